import { ConfigError, egressAllowPrivate, serviceProcess, type HubConfig, type Logger, type Stop } from '@agenthub/runtime';
import { startMessaging } from './index.js';

/**
 * The messaging service as its own process (split mode): gRPC on GRPC_HOST:GRPC_PORT. Needs
 * IDENTITY_ADDR; replicas share DATABASE_URL and REDIS_URL (queue claims and blocking waits work
 * across them).
 */
export async function main(config: HubConfig, log: Logger): Promise<Stop> {
  const identityAddr = config.IDENTITY_ADDR;
  if (!identityAddr) throw new ConfigError('The messaging service needs IDENTITY_ADDR in split mode');
  return serviceProcess(config, log, 'messaging', (deps) =>
    startMessaging({
      ...deps,
      identityAddr,
      limits: {
        blockingMs: config.MESSAGING_BLOCKING_MS,
        onlineMs: config.MESSAGING_ONLINE_MS,
        claimMs: config.MESSAGING_CLAIM_MS,
        maxTaskBytes: config.MESSAGING_TASK_MAX_BYTES,
        maxTasksInFlightPerSender: config.HUB_QUOTA_TASKS_IN_FLIGHT_PER_SENDER,
      },
      sweepIntervalMs: config.MESSAGING_SWEEP_MS,
      push: {
        maxBackoffMs: config.MESSAGING_PUSH_MAX_BACKOFF_MS,
        timeoutMs: config.MESSAGING_PUSH_TIMEOUT_MS,
        maxResponseBytes: config.MESSAGING_PUSH_MAX_RESPONSE_BYTES,
      },
      egress: { allowPrivate: egressAllowPrivate(config) },
    }),
    { bus: true },
  );
}

/**
 * The gateway of `agenthub serve all` in a process of its own (HUB_PROCESSES, see
 * two-processes.ts): forked by the process that runs the services, it takes their addresses, the
 * hub's internal key and the operator token over the IPC channel (never the command line or the
 * environment), serves HTTP on HUB_HOST:HUB_PORT, and adds the services' metrics to its own
 * `/metrics`.
 *
 * Its parent alone decides when it stops: signals sent to the whole group (Ctrl-C, systemd) are
 * ignored here, the parent forwards them as a `stop` message once, and the gateway drains before
 * the services stop. If the parent goes away without a word (SIGKILL), there is nobody to serve:
 * the gateway exits at once.
 */
import { gatewayOptions, startGateway, type RunningGateway, type UpstreamAddresses } from '@agenthub/gateway';
import { ConfigError, InternalKey, limitHeapGrowth, ListenError, loadConfig, Metrics, openKv, processLogger, startTracing, type HubConfig, type Logger, type PeerMetrics } from '@agenthub/runtime';
import { logMetricsPlace } from './metrics-place.js';

/** What the parent tells the gateway process. */
export type ToGateway =
  | { kind: 'start'; upstreams: UpstreamAddresses; internalKey: string; adminToken: string }
  | { kind: 'stop' }
  | { kind: 'metrics'; id: number; metrics: PeerMetrics };

/** What the gateway process tells its parent. */
export type FromGateway =
  | { kind: 'ready'; url: string }
  | { kind: 'failed'; message: string; config?: true; listen?: Pick<ListenError, 'code' | 'host' | 'port' | 'variables'> }
  | { kind: 'metrics'; id: number };

/** The services' metrics are read from the parent at scrape time; a scrape waits this long at most. */
const METRICS_TIMEOUT_MS = 5_000;

function send(message: FromGateway, then?: () => void): void {
  process.send?.(message, undefined, {}, () => then?.());
}

/** The parent's metrics, asked for over the IPC channel. */
function parentMetrics(): () => Promise<PeerMetrics> {
  let next = 0;
  const waiting = new Map<number, (metrics: PeerMetrics) => void>();
  process.on('message', (message: ToGateway) => {
    if (message.kind !== 'metrics') return;
    waiting.get(message.id)?.(message.metrics);
    waiting.delete(message.id);
  });
  return () =>
    new Promise<PeerMetrics>((resolve, reject) => {
      const id = next++;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error('the services process did not send its metrics'));
      }, METRICS_TIMEOUT_MS);
      waiting.set(id, (metrics) => {
        clearTimeout(timer);
        resolve(metrics);
      });
      send({ kind: 'metrics', id });
    });
}

async function start(start: Extract<ToGateway, { kind: 'start' }>, config: HubConfig, log: Logger): Promise<RunningGateway> {
  const metrics = Metrics.fromConfig(config);
  metrics.addPeer(parentMetrics());
  const kv = await openKv({ url: config.REDIS_URL, prefix: config.REDIS_PREFIX });
  try {
    const gateway = await startGateway({
      log,
      metrics,
      kv,
      upstreams: start.upstreams,
      adminToken: start.adminToken,
      // As in one process: metrics on the public port only when HUB_HOST is loopback. The key
      // cache hears revocations through Redis, which this mode requires.
      ...gatewayOptions(config, { oneProcess: true }),
      internalKey: InternalKey.fromBase64(start.internalKey),
    });
    logMetricsPlace(gateway, log);
    const stop = gateway.stop.bind(gateway);
    return {
      ...gateway,
      stop: async (graceMs: number) => {
        await stop(graceMs);
        await kv.close();
      },
    };
  } catch (err) {
    await kv.close().catch(() => undefined);
    throw err;
  }
}

function main(): void {
  limitHeapGrowth();
  const config = loadConfig();
  const log = processLogger(config, 'gateway');
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', () => undefined);
  process.once('disconnect', () => process.exit(1));
  // The gateway's spans are the roots of every call's trace, as in one process.
  const tracing = startTracing(config, { serviceName: 'agenthub' });
  let gateway: Promise<RunningGateway | undefined> | undefined;
  process.on('message', (message: ToGateway) => {
    if (message.kind === 'start' && !gateway) {
      gateway = tracing.then(() => start(message, config, log)).then(
        (running) => {
          send({ kind: 'ready', url: running.url });
          return running;
        },
        (err: Error) => {
          const { code, host, port, variables } = err instanceof ListenError ? err : ({} as Partial<ListenError>);
          send({
            kind: 'failed',
            message: err.message,
            ...(err instanceof ConfigError ? { config: true as const } : {}),
            ...(code && host && port !== undefined && variables ? { listen: { code, host, port, variables } } : {}),
          }, () => process.exit(1));
          return undefined;
        },
      );
    } else if (message.kind === 'stop') {
      void (gateway ?? Promise.resolve(undefined))
        .then((running) => running?.stop(config.HUB_SHUTDOWN_GRACE_MS))
        // The last spans are flushed before exit (a failing collector does not hold the exit up).
        .then(() => tracing.then((stop) => stop()).catch(() => undefined))
        .then(
          () => process.exit(0),
          (err: unknown) => {
            log.error({ err }, 'unclean stop');
            process.exit(1);
          },
        );
    }
  });
}

main();

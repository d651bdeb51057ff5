/**
 * `agenthub serve all` on two cores: the services in this process, the gateway in a child
 * (gateway-process.ts) that calls them over loopback gRPC, the production path. One event loop
 * carried the whole hub before, so a machine's second core idled while the hub was busy; the
 * gateway's share of a call's CPU (HTTP, JSON-RPC, authentication, one gRPC client hop) now runs
 * beside the services' share.
 *
 * Both processes share only what split mode shares: PostgreSQL and Redis (the key cache hears
 * revocations through Redis). So the mode needs DATABASE_URL and REDIS_URL; embedded storage
 * lives inside one process, and HUB_TRANSPORT=inproc calls handlers inside one process.
 *
 * To the operator it is still one process: this one prints where the hub listens, takes the
 * signals, stops the gateway first (which drains its calls) and then the services, serves the
 * metrics of both on one `/metrics`, and exits FAILED if the gateway process dies, so whatever
 * supervises the hub restarts the whole.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { ConfigError, InternalKey, ListenError, type HubConfig, type Logger, type PeerMetrics, type Stop } from '@agenthub/runtime';
import type { FromGateway, ToGateway } from './gateway-process.js';
import type { RunningHub } from './index.js';
import { startServices } from './services.js';

/** Beyond the shutdown grace: the gateway process's own stop (closing Redis, exiting). */
const STOP_SLACK_MS = 5_000;

/**
 * Whole cores this process may use: what Node.js counts (CPU affinity), lowered to the CPU quota
 * of its container where one is set (cgroup v2 `cpu.max`, else v1's CFS quota), which Node.js
 * does not see. A quota of 1.5 cores counts as one: a second process would not have a core.
 */
export function usableCores(read: (path: string) => string = (path) => readFileSync(path, 'utf8'), parallelism = availableParallelism()): number {
  const quota = cgroupQuota(read);
  return quota === undefined ? parallelism : Math.max(1, Math.min(parallelism, Math.floor(quota)));
}

/** The CPU quota in cores, or undefined where none is set or none can be read. */
function cgroupQuota(read: (path: string) => string): number | undefined {
  const attempt = (path: string) => {
    try {
      return read(path).trim();
    } catch {
      return undefined;
    }
  };
  const v2 = attempt('/sys/fs/cgroup/cpu.max')?.split(/\s+/);
  if (v2) return v2[0] === 'max' ? undefined : Number(v2[0]) / Number(v2[1] ?? 100_000) || undefined;
  const quota = Number(attempt('/sys/fs/cgroup/cpu/cpu.cfs_quota_us'));
  const period = Number(attempt('/sys/fs/cgroup/cpu/cpu.cfs_period_us'));
  return quota > 0 && period > 0 ? quota / period : undefined;
}

/**
 * How many processes `serve all` runs: HUB_PROCESSES, where `auto` takes two when both are
 * possible (shared backends, the gRPC transport) and a second core is there to use.
 */
export function hubProcesses(config: Pick<HubConfig, 'HUB_PROCESSES' | 'DATABASE_URL' | 'REDIS_URL' | 'HUB_TRANSPORT'>, cores = usableCores()): 1 | 2 {
  const possible = Boolean(config.DATABASE_URL && config.REDIS_URL) && config.HUB_TRANSPORT === 'grpc';
  if (config.HUB_PROCESSES === '1') return 1;
  if (config.HUB_PROCESSES === '2') {
    if (!possible) throw new ConfigError('HUB_PROCESSES=2 needs DATABASE_URL and REDIS_URL (both processes share them) and HUB_TRANSPORT=grpc');
    return 2;
  }
  return possible && cores >= 2 ? 2 : 1;
}

/** The hub in two processes; `fail` is told if the gateway process dies while the hub runs. */
export async function startHubInTwoProcesses(config: HubConfig, log: Logger, fail: (err: Error) => void): Promise<RunningHub> {
  const keyText = randomBytes(32).toString('base64');
  const services = await startServices(config, log, InternalKey.fromBase64(keyText));
  let child: ChildProcess | undefined;
  try {
    child = forkGateway();
    const gateway = child;
    const exited = new Promise<string | undefined>((resolve) => gateway.once('exit', (code, signal) => resolve(code === 0 ? undefined : signal ? `signal ${signal}` : `code ${code}`)));
    gateway.on('message', (message: FromGateway) => {
      if (message.kind !== 'metrics') return;
      // A scrape gets the gateway's own metrics at once rather than waiting for the services' in vain.
      const answer = (metrics: PeerMetrics) => gateway.connected && gateway.send({ kind: 'metrics', id: message.id, metrics } satisfies ToGateway);
      services.metrics.snapshot().then(answer, (err: unknown) => {
        log.warn({ err }, 'could not read the services\' metrics for the gateway process');
        answer([]);
      });
    });
    gateway.send({ kind: 'start', upstreams: services.upstreams, internalKey: keyText, adminToken: services.adminToken } satisfies ToGateway);
    const url = await ready(gateway, exited);
    let stopping = false;
    void exited.then((how) => {
      if (!stopping) fail(new Error(`the gateway process exited (${how ?? 'code 0'}) while the hub ran`));
    });
    const stop: Stop = async () => {
      // After a failure the gateway is gone already, and that was reported.
      const asked = !stopping && gateway.connected;
      stopping = true;
      if (asked) gateway.send({ kind: 'stop' } satisfies ToGateway);
      const timer = setTimeout(() => gateway.kill('SIGKILL'), config.HUB_SHUTDOWN_GRACE_MS + STOP_SLACK_MS);
      const unclean = await exited;
      clearTimeout(timer);
      await services.stop();
      if (asked && unclean) throw new Error(`the gateway process stopped uncleanly (${unclean})`);
    };
    return { url, adminToken: services.adminToken, services: services.services, stop };
  } catch (err) {
    child?.kill('SIGKILL');
    await services.stop().catch(() => undefined);
    throw err;
  }
}

function forkGateway(): ChildProcess {
  // A profile name given to this process would make both write one file: the child takes
  // node's default name (with its pid) in the same directory.
  const execArgv = process.execArgv.filter((arg) => !arg.startsWith('--cpu-prof-name'));
  return fork(fileURLToPath(new URL('./gateway-process.js', import.meta.url)), [], { execArgv, serialization: 'advanced' });
}

/** The gateway's URL once it listens; its failure to start as the error runProcess reports. */
function ready(gateway: ChildProcess, exited: Promise<string | undefined>): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    gateway.on('message', (message: FromGateway) => {
      if (message.kind === 'ready') resolve(message.url);
      if (message.kind !== 'failed') return;
      if (message.listen) {
        const { code, host, port, variables } = message.listen;
        reject(new ListenError(code, host, port, variables));
      } else reject(message.config ? new ConfigError(message.message) : new Error(message.message));
    });
    void exited.then((how) => reject(new Error(`the gateway process exited (${how ?? 'code 0'}) while starting`)));
  });
}

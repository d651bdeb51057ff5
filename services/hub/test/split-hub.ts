import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { eventsv1, identityv1, messagingv1, secretsv1, workspacev1 } from '@agenthub/proto';
import { freePort, type Backend, type ProvisionedBackend } from '@agenthub/testing';
import type { RunningHub } from '@agenthub/hub';

/**
 * Split mode as operators run it: every service its own built `agenthub serve <service>` process
 * on loopback, over one real PostgreSQL database (a schema per service, plus the event log's `bus`
 * schema) and Redis, with two workspace and two messaging replicas behind one gateway
 * (WORKSPACE_ADDR and MESSAGING_ADDR list both; clients balance round-robin). It runs the compiled
 * code (`npm run build`, or `npx tsc -b`, first), exactly what the image ships.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = join('services', 'hub', 'bin', 'agenthub.js');
/** Migrations of a fresh database and the processes' start on a busy 2-core machine. */
const START_TIMEOUT_MS = 90_000;
/** Above the shutdown grace the stack gives every process (HUB_SHUTDOWN_GRACE_MS below). */
const STOP_TIMEOUT_MS = 20_000;

/** The hub mode of a suite that runs in split mode; `provision` gives it its own database. */
export interface SplitMode {
  readonly name: 'split';
  provision(): Promise<ProvisionedBackend>;
}

/** Split mode over the real backend (split mode needs a shared PostgreSQL and Redis). */
export function splitMode(real: Backend): SplitMode {
  return { name: 'split', provision: () => real.provision() };
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** One `agenthub serve <service>` process of the stack. */
export interface SplitProcess {
  /** `identity`, `workspace-a`, `workspace-b`, `secrets`, `messaging-a`, `messaging-b`, `events`, `gateway`. */
  readonly name: string;
  readonly pid: number;
  /** Its ops endpoint (`http://127.0.0.1:<OPS_PORT>`); the gateway's own URL for the gateway. */
  readonly opsUrl: string;
  /** Resolves when the process has exited. */
  readonly exited: Promise<Exit>;
  /** Everything it wrote to stdout and stderr so far. */
  output(): string;
  /** Sends `signal` and waits for the exit (SIGKILL and a failure after STOP_TIMEOUT_MS). */
  stop(signal?: NodeJS.Signals): Promise<Exit>;
}

export type SplitProcessName = 'identity' | 'workspace-a' | 'workspace-b' | 'secrets' | 'messaging-a' | 'messaging-b' | 'events' | 'gateway';

/** A running split-mode hub: what startHub returns, plus its processes. */
export interface SplitStack extends RunningHub {
  readonly processes: Readonly<Record<SplitProcessName, SplitProcess>>;
  /** The gateway's ops port, where its `/metrics` is (`http://127.0.0.1:<OPS_PORT>`). */
  readonly gatewayOpsUrl: string;
  /**
   * Starts `name` again (after a test stopped or killed it) on its ports and settings, plus
   * `env`, and resolves once it reports ready; `processes[name]` is then the new process.
   */
  respawn(name: SplitProcessName, env?: Record<string, string>): Promise<SplitProcess>;
  /**
   * Starts one more gateway replica on the same services, Redis and credentials (its own ports,
   * plus `env`) and resolves with its URL once it is ready; `stop()` stops it with the rest.
   */
  addGateway(env?: Record<string, string>): Promise<{ url: string; process: SplitProcess }>;
}

/** Every child this test process started, killed if the test process goes away first. */
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});


const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The child's environment: this process's, minus every hub setting it may carry (a developer's
 * shell, CI), plus the stack's. Only what the stack sets reaches the services.
 */
function childEnv(settings: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(HUB_|DATABASE_|REDIS_|GRPC_|OPS_|[A-Z]+_ADDR$|EMBEDDINGS_|QDRANT_|KAFKA_|MESSAGING_|WEBHOOK_|OUTBOX_|LOG_LEVEL$|NODE_OPTIONS$)/.test(key)) continue;
    env[key] = value;
  }
  return { ...env, ...settings };
}

/** `agenthub serve <service>` from the built code, with only `env`'s hub settings; `opsUrl` is where waitReady looks. */
export function spawnProcess(name: string, service: string, env: Record<string, string>, opsUrl: string): SplitProcess {
  // PGAPPNAME names the process's database sessions (pg_stat_activity.application_name), so a
  // test can see which process a query waits in.
  const child = spawn(process.execPath, [BIN, 'serve', service], { cwd: ROOT, env: childEnv({ PGAPPNAME: `agenthub-${name}`, ...env }), stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<Exit>((resolve) =>
    child.once('exit', (code, signal) => {
      children.delete(child);
      resolve({ code, signal });
    }),
  );
  return {
    name,
    pid: child.pid!,
    opsUrl,
    exited,
    output: () => output,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), STOP_TIMEOUT_MS)));
      const result = await Promise.race([exited, late]);
      clearTimeout(timer);
      if (result === 'late') {
        child.kill('SIGKILL');
        await exited;
        throw new Error(`${name} did not exit within ${STOP_TIMEOUT_MS} ms of ${signal}:\n${output}`);
      }
      return result;
    },
  };
}

/** The exit status of `agenthub serve` when a port it was given is taken (README: "`agenthub serve` exits with"). */
const EXIT_LISTEN = 3;

/** A process of the stack found the port chosen for it taken when it came to bind it. */
class PortTaken extends Error {}

async function waitReady(proc: SplitProcess): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  let exit: Exit | undefined;
  void proc.exited.then((e) => (exit = e));
  for (;;) {
    if (exit) {
      const message = `${proc.name} exited while starting (${exit.code ?? exit.signal}):\n${proc.output()}`;
      throw exit.code === EXIT_LISTEN ? new PortTaken(message) : new Error(message);
    }
    try {
      const response = await fetch(`${proc.opsUrl}/readyz`, { signal: AbortSignal.timeout(2_000) });
      if (response.status === 200) return;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) throw new Error(`${proc.name} was not ready within ${START_TIMEOUT_MS} ms:\n${proc.output()}`);
    await sleep(200);
  }
}

/** A fresh operator token, internal key and KEK; a stack restarted on the same database needs the same. */
export function splitCredentials(): Record<'HUB_ADMIN_TOKEN' | 'HUB_INTERNAL_KEY' | 'HUB_KEKS', string> {
  return {
    HUB_ADMIN_TOKEN: `admin-${randomBytes(16).toString('hex')}`,
    HUB_INTERNAL_KEY: randomBytes(32).toString('base64'),
    HUB_KEKS: `v1:${randomBytes(32).toString('base64')}`,
  };
}

/**
 * Starts the stack on `provisioned` (which must be real PostgreSQL and Redis). `env` reaches every
 * process after the stack's own settings, so a suite sets what it would set on the all-in-one hub
 * (MESSAGING_BLOCKING_MS, HUB_EGRESS_ALLOW_PRIVATE, HUB_ADMIN_TOKEN, HUB_KEKS, …). Resolves once
 * every process reports ready; `stop` SIGTERMs them (gateway first) and fails unless each exits 0.
 */
export async function startSplitStack(provisioned: ProvisionedBackend, env: Record<string, string> = {}, choosePort: () => Promise<number> = freePort): Promise<SplitStack> {
  // The ports are chosen free, but bound only seconds later, once each process has loaded; one
  // taken meanwhile (it failed a suite once) costs a start on fresh ports, not the suite.
  for (let attempt = 1; ; attempt++) {
    try {
      return await launchSplitStack(provisioned, env, choosePort);
    } catch (err) {
      if (!(err instanceof PortTaken) || attempt === 3) throw err;
    }
  }
}

async function launchSplitStack(provisioned: ProvisionedBackend, env: Record<string, string>, choosePort: () => Promise<number>): Promise<SplitStack> {
  if (!provisioned.databaseUrl || !provisioned.redisUrl) throw new Error('Split mode needs real PostgreSQL and Redis');
  if (!existsSync(join(ROOT, 'services', 'hub', 'dist', 'cli.js'))) {
    throw new Error('Split mode runs the built code: run `npm run build` (or `npx tsc -b`) first');
  }
  const [idGrpc, idOps, waGrpc, waOps, wbGrpc, wbOps, seGrpc, seOps, maGrpc, maOps, mbGrpc, mbOps, evGrpc, evOps, hubPort, hubOps] = (await Promise.all(
    Array.from({ length: 16 }, () => choosePort()),
  )) as [number, number, number, number, number, number, number, number, number, number, number, number, number, number, number, number];
  const addrs = {
    identity: `127.0.0.1:${idGrpc}`,
    workspace: `127.0.0.1:${waGrpc},127.0.0.1:${wbGrpc}`,
    secrets: `127.0.0.1:${seGrpc}`,
    messaging: `127.0.0.1:${maGrpc},127.0.0.1:${mbGrpc}`,
    events: `127.0.0.1:${evGrpc}`,
  };
  const common: Record<string, string> = {
    DATABASE_URL: provisioned.databaseUrl,
    // Nine processes share the test database server with the other suites.
    DATABASE_POOL_SIZE: '4',
    REDIS_URL: provisioned.redisUrl,
    REDIS_PREFIX: provisioned.redisPrefix,
    ...splitCredentials(),
    HUB_SHUTDOWN_GRACE_MS: '5000',
    HUB_METRICS: 'false',
    LOG_LEVEL: 'warn',
    EMBEDDINGS_THREADS: '1',
    GRPC_HOST: '127.0.0.1',
    // Servers recycle connections every few seconds (production default: 5 minutes), so every
    // suite run in split mode also shows that connection ageing cuts no read and no stream
    // (docs/operations.md: a refused write is sent again once by grpc-js).
    GRPC_MAX_CONNECTION_AGE_MS: '3000',
    IDENTITY_ADDR: addrs.identity,
    WORKSPACE_ADDR: addrs.workspace,
    SECRETS_ADDR: addrs.secrets,
    MESSAGING_ADDR: addrs.messaging,
    EVENTS_ADDR: addrs.events,
    ...env,
  };
  const url = `http://127.0.0.1:${hubPort}`;
  const launchers = new Map<string, (extra: Record<string, string>) => SplitProcess>();
  const service = (name: string, svc: string, grpcPort: number, opsPort: number) => {
    const launch = (extra: Record<string, string>) =>
      spawnProcess(name, svc, { ...common, GRPC_PORT: String(grpcPort), OPS_PORT: String(opsPort), ...extra }, `http://127.0.0.1:${opsPort}`);
    launchers.set(name, launch);
    return launch({});
  };
  const gateway = (extra: Record<string, string>) =>
    spawnProcess('gateway', 'gateway', { ...common, HUB_HOST: '127.0.0.1', HUB_PORT: String(hubPort), OPS_PORT: String(hubOps), ...extra }, url);
  launchers.set('gateway', gateway);
  // Started together, as a deployment rolls out: replicas race for their schema's migrations
  // (advisory lock), and the gateway waits for its upstreams to become ready.
  const processes: Record<SplitProcessName, SplitProcess> = {
    identity: service('identity', 'identity', idGrpc, idOps),
    'workspace-a': service('workspace-a', 'workspace', waGrpc, waOps),
    'workspace-b': service('workspace-b', 'workspace', wbGrpc, wbOps),
    secrets: service('secrets', 'secrets', seGrpc, seOps),
    'messaging-a': service('messaging-a', 'messaging', maGrpc, maOps),
    'messaging-b': service('messaging-b', 'messaging', mbGrpc, mbOps),
    events: service('events', 'events', evGrpc, evOps),
    gateway: gateway({}),
  };

  const extraGateways: SplitProcess[] = [];
  /** SIGTERMs the gateway, then every service together; fails naming each unclean exit. */
  const stop = async () => {
    await Promise.allSettled(extraGateways.map((p) => p.stop()));
    const results = await Promise.allSettled([processes.gateway.stop()]);
    const services = Object.values(processes).filter((p) => p !== processes.gateway);
    results.push(...(await Promise.allSettled(services.map((p) => p.stop()))));
    const problems = results.flatMap((result, i) => {
      const proc = i === 0 ? processes.gateway : services[i - 1]!;
      if (result.status === 'rejected') return [String(result.reason)];
      const { code, signal } = result.value;
      // Stopped earlier by a test (SIGKILL to play a crash) is not this stop's failure.
      if (code === 0 || signal === 'SIGKILL') return [];
      return [`${proc.name} exited with ${code ?? signal}:\n${proc.output()}`];
    });
    if (problems.length) throw new Error(`The split stack did not stop cleanly:\n${problems.join('\n')}`);
  };

  try {
    await Promise.all(Object.values(processes).map(waitReady));
  } catch (err) {
    await Promise.allSettled(Object.values(processes).map((p) => p.stop('SIGKILL')));
    throw err;
  }
  return {
    url,
    adminToken: common.HUB_ADMIN_TOKEN!,
    services: {
      [identityv1.IdentityService.typeName]: addrs.identity,
      [workspacev1.WorkspaceService.typeName]: addrs.workspace,
      [secretsv1.SecretsService.typeName]: addrs.secrets,
      [messagingv1.MessagingService.typeName]: addrs.messaging,
      [eventsv1.EventsService.typeName]: addrs.events,
    },
    processes,
    gatewayOpsUrl: `http://127.0.0.1:${hubOps}`,
    async respawn(name, extra = {}) {
      const proc = launchers.get(name)!(extra);
      processes[name] = proc;
      try {
        await waitReady(proc);
      } catch (err) {
        await proc.stop('SIGKILL').catch(() => undefined);
        throw err;
      }
      return proc;
    },
    async addGateway(extra = {}) {
      const [port, ops] = [await freePort(), await freePort()];
      const extraUrl = `http://127.0.0.1:${port}`;
      const proc = spawnProcess(`gateway-${extraGateways.length + 2}`, 'gateway', { ...common, HUB_HOST: '127.0.0.1', HUB_PORT: String(port), OPS_PORT: String(ops), ...extra }, extraUrl);
      extraGateways.push(proc);
      try {
        await waitReady(proc);
      } catch (err) {
        await proc.stop('SIGKILL').catch(() => undefined);
        throw err;
      }
      return { url: extraUrl, process: proc };
    },
    stop,
  };
}

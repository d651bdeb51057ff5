import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '@agenthub/runtime';
import { backends, testLogger, type Backend, type ProvisionedBackend } from '@agenthub/testing';
import { startHub, type RunningHub } from '@agenthub/hub';
import { splitCredentials, splitMode, startSplitStack, type SplitMode, type SplitStack } from './split-hub.js';

export interface RpcReply {
  status: number;
  body: { jsonrpc: string; id: unknown; result?: any; error?: { code: number; message: string; data?: any } };
}

export interface Agent {
  agent_id: string;
  tenant_id: string;
  api_key: string;
  key_id: string;
}

/** A whole hub on real HTTP and gRPC over the given backend, plus helpers to call it. */
export interface TestHub extends RunningHub {
  dataDir: string;
  /** Where the gateway serves `/metrics`: its URL all-in-one, its ops port in split mode. */
  metricsUrl: string;
  /** The hub's PostgreSQL database, on the real backend (undefined on PGlite). */
  databaseUrl: string | undefined;
  /** Its Redis and the prefix of every key and channel there (undefined on the in-process Kv). */
  redisUrl: string | undefined;
  redisPrefix: string;
  /** One JSON-RPC call as an agent (`key`) on `path` (default `/a2a`). */
  call(key: string | undefined, method: string, params?: unknown, options?: { path?: string; headers?: Record<string, string> }): Promise<RpcReply>;
  /** Like `call` but fails the test unless the call succeeded; returns the result. */
  ok(key: string, method: string, params?: unknown): Promise<any>;
  admin(method: string, params?: unknown): Promise<any>;
  agent(tenant: string, name: string, id?: string): Promise<Agent>;
  /**
   * Stops this hub and starts a new one on the same database, Redis prefix and data directory
   * (an embedded hub only when started with HUB_EMBEDDED_STORAGE=disk).
   */
  restart(): Promise<TestHub>;
}

let nextId = 1;

/** How a suite runs the hub: all-in-one on a backend, or split mode (split-hub.ts). */
export type HubMode = Backend | SplitMode | InprocMode;

/**
 * The all-in-one hub on the real backend with `HUB_TRANSPORT=inproc`: the gateway calls the
 * services' handlers directly instead of over loopback gRPC. Suites that list `withInproc(...)`
 * run in this mode too (a representative subset: workspaces, secrets, messaging).
 */
export interface InprocMode {
  readonly name: 'inproc';
  provision(): Promise<ProvisionedBackend>;
}

/** `modes` plus the in-process transport on the real backend, when it is there. */
export function withInproc(modes: HubMode[]): HubMode[] {
  const real = backends().find((backend) => backend.name === 'postgres+redis');
  return real ? [...modes, { name: 'inproc', provision: () => real.provision() }] : modes;
}

/**
 * The modes an end-to-end suite covers: the all-in-one hub on every backend, plus split mode (one
 * process per service, replicas behind the gateway) when real PostgreSQL and Redis are there.
 * AGENTHUB_TEST_SPLIT=0 leaves split mode out (a quicker local run).
 */
export function hubModes(): HubMode[] {
  const all = backends();
  const real = all.find((backend) => backend.name === 'postgres+redis');
  return real && process.env.AGENTHUB_TEST_SPLIT !== '0' ? [...all, splitMode(real)] : all;
}

export async function startTestHub(mode: SplitMode, env?: Record<string, string>): Promise<TestHub & SplitStack>;
export async function startTestHub(mode: HubMode, env?: Record<string, string>): Promise<TestHub>;
export async function startTestHub(backend: HubMode, env: Record<string, string> = {}): Promise<TestHub> {
  const provisioned = await backend.provision();
  const dataDir = await mkdtemp(join(tmpdir(), 'agenthub-test-'));
  if (backend.name === 'inproc') return startOn(provisioned, dataDir, { HUB_TRANSPORT: 'inproc', ...env }, false);
  // An embedded hub keeps its databases in memory: the same SQL and code without PGlite's emulated
  // file system, which took 40% of an embedded suite's time. Not when the suite restarts it
  // (HUB_EMBEDDED_STORAGE=disk) or names the data directory a later hub starts on again.
  if (backend.name === 'embedded') return startOn(provisioned, dataDir, { ...(env.HUB_DATA_DIR ? {} : { HUB_EMBEDDED_STORAGE: 'memory' }), ...env }, false);
  if (backend.name !== 'split') return startOn(provisioned, dataDir, env, false);
  // Chosen once, so that restart() brings the processes back with the same keys.
  return startOn(provisioned, dataDir, { ...splitCredentials(), ...env }, true);
}

async function startOn(provisioned: ProvisionedBackend, dataDir: string, env: Record<string, string>, split: boolean): Promise<TestHub> {
  const config = loadConfig({
    HUB_PORT: '0',
    HUB_DATA_DIR: dataDir,
    HUB_METRICS: 'false',
    DATABASE_URL: provisioned.databaseUrl,
    REDIS_URL: provisioned.redisUrl,
    REDIS_PREFIX: provisioned.redisPrefix,
    ...env,
  });
  const hub = split ? await startSplitStack(provisioned, { HUB_DATA_DIR: dataDir, ...env }) : await startHub(config, testLogger());

  const call: TestHub['call'] = async (key, method, params = {}, options = {}) => {
    const headers: Record<string, string> = { 'Content-Type': 'application/json', ...options.headers };
    if (key !== undefined) headers.Authorization = `Bearer ${key}`;
    const response = await fetch(`${hub.url}${options.path ?? '/a2a'}`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
    });
    return { status: response.status, body: (await response.json()) as RpcReply['body'] };
  };

  const admin: TestHub['admin'] = async (method, params = {}) => {
    const reply = await call(hub.adminToken, method, params, { path: '/admin' });
    if (reply.body.error) throw new Error(`${method} failed: ${JSON.stringify(reply.body.error)}`);
    return reply.body.result;
  };

  return {
    ...hub,
    dataDir,
    metricsUrl: (hub as Partial<SplitStack>).gatewayOpsUrl ?? hub.url,
    databaseUrl: provisioned.databaseUrl,
    redisUrl: provisioned.redisUrl,
    redisPrefix: provisioned.redisPrefix,
    call,
    admin,
    async ok(key, method, params) {
      const reply = await call(key, method, params);
      if (reply.body.error) throw new Error(`${method} failed: ${JSON.stringify(reply.body.error)}`);
      return reply.body.result;
    },
    async agent(tenant, name, id) {
      const result = await admin('agents.create', { tenant_id: tenant, name, create_tenant: true, ...(id ? { agent_id: id } : {}) });
      return { agent_id: result.agent.id, tenant_id: result.agent.tenant_id, api_key: result.api_key, key_id: result.key.id };
    },
    async restart() {
      if (config.HUB_EMBEDDED_STORAGE === 'memory' && !provisioned.databaseUrl) {
        throw new Error('restart() needs a hub whose embedded databases survive it: start it with HUB_EMBEDDED_STORAGE=disk');
      }
      await hub.stop();
      return startOn(provisioned, dataDir, env, split);
    },
    async stop() {
      try {
        await hub.stop();
      } finally {
        await provisioned.dispose();
        await rm(dataDir, { recursive: true, force: true });
      }
    },
  };
}

/** How many calls of `method` (a gRPC method name) the gateway made, from its /metrics. */
async function clientCallsOf(metricsUrl: string, method: string): Promise<number> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  const counts = text.split('\n').filter((line) => line.startsWith('agenthub_grpc_client_handling_seconds_count') && line.includes(`method="${method}"`));
  return counts.reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
}

/**
 * Runs `burst` (round 0, 1, …) until the process serving `metricsUrl` (the gateway's by default)
 * has made a call of `method`, a grouped twin, since before the first round, five rounds at most:
 * grouping needs calls to arrive while others are on the wire, and a few bursts make that sure.
 * Returns its count of `method` before the first round and after the last.
 */
export async function burstUntilGrouped(hub: TestHub, method: string, burst: (round: number) => Promise<void>, metricsUrl = hub.metricsUrl): Promise<{ before: number; after: number }> {
  const before = await clientCallsOf(metricsUrl, method);
  for (let round = 0; round < 5 && (round === 0 || (await clientCallsOf(metricsUrl, method)) === before); round++) await burst(round);
  return { before, after: await clientCallsOf(metricsUrl, method) };
}

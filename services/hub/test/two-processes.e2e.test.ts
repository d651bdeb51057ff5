import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { backends, skipUnlessRequired, type ProvisionedBackend } from '@agenthub/testing';
import { hubProcesses, usableCores } from '@agenthub/hub';
import { agenthub, HOOK_TIMEOUT_MS, START_TIMEOUT_MS } from './bin.js';
import { freePort, startHubProcess, type HubProcess } from './hub-process.js';

/**
 * Issue 13, "`npm start` uses every core the machine has where that pays": `agenthub serve all`
 * over PostgreSQL and Redis runs its gateway in a second process (HUB_PROCESSES), calling the
 * services over loopback gRPC. To the operator it stays one process: one URL, one `/metrics`, one
 * exit status, its signals; a revoked key still fails on the very next call. Runs the built hub.
 */

const real = backends().find((backend) => backend.name === 'postgres+redis');
const describeReal = real ? describe : describe.skip;
if (!real) console.warn(`[two-processes.e2e] ${skipUnlessRequired('real PostgreSQL and Redis are not reachable: the two-process mode needs them')}`);

/** The live children of a process (what `serve all` forked). */
function childrenOf(pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
}

function commandOf(pid: number): string {
  return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function eventually(check: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return true;
}

/** Whether a listener can take the port (it is free). */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

async function rpc(url: string, path: string, token: string, method: string, params: unknown = {}): Promise<{ status: number; body: any }> {
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return { status: response.status, body: await response.json() };
}

/** An OTLP/HTTP JSON collector: the names and trace ids of the spans it was sent. */
async function collector(): Promise<{ url: string; spans: { name: string; traceId: string }[]; close(): Promise<void> }> {
  const spans: { name: string; traceId: string }[] = [];
  const server: Server = createHttpServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const sent = JSON.parse(body) as { resourceSpans?: { scopeSpans?: { spans?: { name: string; traceId: string }[] }[] }[] };
      for (const resource of sent.resourceSpans ?? []) for (const scope of resource.scopeSpans ?? []) for (const span of scope.spans ?? []) spans.push({ name: span.name, traceId: span.traceId });
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, spans, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe('how many processes serve all runs (hubProcesses)', () => {
  const shared = { DATABASE_URL: 'postgres://db/hub', REDIS_URL: 'redis://kv', HUB_TRANSPORT: 'grpc' } as const;

  it('auto: two where the backends are shared servers, the transport is gRPC and there is a second core', () => {
    expect(hubProcesses({ ...shared, HUB_PROCESSES: 'auto' }, 2)).toBe(2);
    expect(hubProcesses({ ...shared, HUB_PROCESSES: 'auto' }, 1)).toBe(1);
    expect(hubProcesses({ ...shared, DATABASE_URL: undefined, HUB_PROCESSES: 'auto' }, 8)).toBe(1);
    expect(hubProcesses({ ...shared, REDIS_URL: undefined, HUB_PROCESSES: 'auto' }, 8)).toBe(1);
    expect(hubProcesses({ ...shared, HUB_TRANSPORT: 'inproc', HUB_PROCESSES: 'auto' }, 8)).toBe(1);
  });

  it('1 and 2 as told; 2 refused, naming what it needs, where one process must hold everything', () => {
    expect(hubProcesses({ ...shared, HUB_PROCESSES: '1' }, 8)).toBe(1);
    expect(hubProcesses({ ...shared, HUB_PROCESSES: '2' }, 1)).toBe(2);
    expect(() => hubProcesses({ ...shared, REDIS_URL: undefined, HUB_PROCESSES: '2' }, 8)).toThrow('HUB_PROCESSES=2 needs DATABASE_URL and REDIS_URL');
    expect(() => hubProcesses({ ...shared, HUB_TRANSPORT: 'inproc', HUB_PROCESSES: '2' }, 8)).toThrow('HUB_TRANSPORT=grpc');
  });

  it('counts the cores a container\'s CPU quota leaves, where Node.js sees the whole machine\'s', () => {
    const files = (entries: Record<string, string>) => (path: string) => {
      if (!(path in entries)) throw Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' });
      return entries[path]!;
    };
    expect(usableCores(files({}), 8)).toBe(8);
    expect(usableCores(files({ '/sys/fs/cgroup/cpu.max': 'max 100000\n' }), 8)).toBe(8);
    expect(usableCores(files({ '/sys/fs/cgroup/cpu.max': '100000 100000\n' }), 8)).toBe(1);
    expect(usableCores(files({ '/sys/fs/cgroup/cpu.max': '150000 100000\n' }), 8)).toBe(1);
    expect(usableCores(files({ '/sys/fs/cgroup/cpu.max': '400000 100000\n' }), 2)).toBe(2);
    expect(usableCores(files({ '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '-1\n', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000\n' }), 4)).toBe(4);
    expect(usableCores(files({ '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '50000\n', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000\n' }), 4)).toBe(1);
    expect(usableCores(files({ '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '200000\n', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000\n' }), 4)).toBe(2);
  });

  it('agenthub serve all with HUB_PROCESSES=2 and embedded storage exits 2 naming the variable', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'agenthub-two-'));
    try {
      const result = await agenthub(['serve', 'all'], { HUB_PROCESSES: '2', HUB_PORT: String(await freePort()), HUB_DATA_DIR: dataDir, HUB_EMBEDDED_STORAGE: 'memory' });
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('HUB_PROCESSES=2 needs DATABASE_URL and REDIS_URL');
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

describeReal('agenthub serve all in two processes (PostgreSQL and Redis)', () => {
  let provisioned: ProvisionedBackend;
  let dataDir: string;
  const adminToken = `two-admin-${randomBytes(12).toString('hex')}`;

  /** The hub's settings on this suite's database and Redis, on a free port unless `extra` names one. */
  async function settings(extra: Record<string, string> = {}): Promise<Record<string, string>> {
    return {
      HUB_PORT: extra.HUB_PORT ?? String(await freePort()),
      HUB_DATA_DIR: dataDir,
      HUB_ADMIN_TOKEN: adminToken,
      HUB_KEKS: `v1:${randomBytes(32).toString('base64')}`,
      DATABASE_URL: provisioned.databaseUrl!,
      REDIS_URL: provisioned.redisUrl!,
      REDIS_PREFIX: provisioned.redisPrefix!,
      EMBEDDINGS_THREADS: '1',
      ...extra,
    };
  }

  async function start(extra: Record<string, string> = {}): Promise<HubProcess> {
    return startHubProcess(await settings(extra));
  }

  /** The gateway process `hub` forked: its only child, running gateway-process.js. */
  function gatewayOf(hub: HubProcess): number {
    const children = childrenOf(hub.child.pid!);
    expect(children).toHaveLength(1);
    expect(commandOf(children[0]!)).toContain('gateway-process.js');
    return children[0]!;
  }

  beforeAll(async () => {
    provisioned = await real!.provision();
    dataDir = await mkdtemp(join(tmpdir(), 'agenthub-two-'));
  }, HOOK_TIMEOUT_MS);

  afterAll(async () => {
    await rm(dataDir, { recursive: true, force: true });
    await provisioned?.dispose();
  });

  it('serves every call, one /metrics for both processes, a revoked key refused on the next call, and stops both on SIGTERM with status 0', async () => {
    // The default (auto) on this machine, or what HUB_PROCESSES=2 asks for on a 1-core one.
    const hub = await start(usableCores() >= 2 ? {} : { HUB_PROCESSES: '2' });
    try {
      // The line comes once the gateway said it listens, maybe just after /readyz first answered.
      expect(await eventually(() => hub.output().includes('gateway and services in two processes'), 10_000)).toBe(true);
      const gateway = gatewayOf(hub);

      const created = await rpc(hub.url, '/admin', adminToken, 'agents.create', { tenant_id: 'acme', name: 'worker', create_tenant: true });
      const key: string = created.body.result.api_key;
      const workspace = await rpc(hub.url, '/a2a', key, 'x-hub/workspace.create', { name: 'Two' });
      const read = await rpc(hub.url, '/a2a', key, 'x-hub/workspace.get', { workspace_id: workspace.body.result.workspace.id });
      expect(read.body.result).toMatchObject({ workspace: { name: 'Two' }, role: 'admin', member_count: 1 });

      const metrics = await (await fetch(`${hub.url}/metrics`)).text();
      // The gateway's counters and the services' gauges and server-side calls, each family once.
      expect(metrics).toMatch(/^agenthub_jsonrpc_requests_total\{method="x-hub\/workspace.get",code="0"\} 1$/m);
      expect(metrics).toMatch(/^agenthub_outbox_pending\{service="workspace"\} \d+$/m);
      expect(metrics).toMatch(/^agenthub_grpc_server_handling_seconds_count\{service="agenthub.workspace.v1.WorkspaceService",method="GetWorkspace",code="OK"\} 1$/m);
      const families = [...metrics.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]);
      expect(families.length).toBeGreaterThan(20);
      expect(new Set(families).size).toBe(families.length);

      // Identity revokes in this process; the gateway's key memory is in the other.
      expect((await rpc(hub.url, '/a2a', key, 'x-hub/workspace.list')).status).toBe(200);
      await rpc(hub.url, '/admin', adminToken, 'keys.revoke', { key_id: created.body.result.key.id });
      expect((await rpc(hub.url, '/a2a', key, 'x-hub/workspace.list')).status).toBe(401);

      await hub.kill('SIGTERM');
      expect({ code: hub.child.exitCode, signal: hub.child.signalCode }).toEqual({ code: 0, signal: null });
      expect(alive(gateway)).toBe(false);
    } finally {
      await hub.kill('SIGKILL');
    }
  }, START_TIMEOUT_MS + 30_000);

  it('exits 1 when its gateway process dies, so a supervisor restarts the whole hub', async () => {
    const hub = await start({ HUB_PROCESSES: '2' });
    try {
      process.kill(gatewayOf(hub), 'SIGKILL');
      await new Promise((resolve) => hub.child.once('exit', resolve));
      expect(hub.child.exitCode).toBe(1);
      expect(hub.output()).toContain('the gateway process exited (signal SIGKILL) while the hub ran');
    } finally {
      await hub.kill('SIGKILL');
    }
  }, START_TIMEOUT_MS + 30_000);

  it('leaves no gateway behind holding the port when it is SIGKILLed itself', async () => {
    const hub = await start({ HUB_PROCESSES: '2' });
    const gateway = gatewayOf(hub);
    const port = Number(new URL(hub.url).port);
    await hub.kill('SIGKILL');
    expect(await eventually(() => !alive(gateway), 10_000)).toBe(true);
    expect(await portFree(port)).toBe(true);
  }, START_TIMEOUT_MS + 30_000);

  it('traces a call from the gateway process into the services\' as one trace', async () => {
    const otlp = await collector();
    const hub = await start({ HUB_PROCESSES: '2', OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_BSP_SCHEDULE_DELAY: '100' });
    try {
      const created = await rpc(hub.url, '/admin', adminToken, 'agents.create', { tenant_id: 'traced', name: 'worker', create_tenant: true });
      const key: string = created.body.result.api_key;
      const workspace = await rpc(hub.url, '/a2a', key, 'x-hub/workspace.create', { name: 'Traced' });
      await rpc(hub.url, '/a2a', key, 'x-hub/workspace.get', { workspace_id: workspace.body.result.workspace.id });
      const traced = () => {
        const root = otlp.spans.find((span) => span.name === 'jsonrpc x-hub/workspace.get');
        return root && otlp.spans.some((span) => span.traceId === root.traceId && span.name === 'agenthub.workspace.v1.WorkspaceService/GetWorkspace');
      };
      expect(await eventually(() => Boolean(traced()), 15_000)).toBe(true);
    } finally {
      await hub.kill('SIGTERM');
      await otlp.close();
    }
  }, START_TIMEOUT_MS + 30_000);

  it('exits 3 naming HUB_PORT when the gateway process finds the port taken', async () => {
    const taken = createServer();
    const port = await new Promise<number>((resolve) => taken.listen(0, '127.0.0.1', () => resolve((taken.address() as { port: number }).port)));
    try {
      const result = await agenthub(['serve', 'all'], await settings({ HUB_PROCESSES: '2', HUB_PORT: String(port) }));
      expect(result.code).toBe(3);
      expect(result.stderr).toContain(`Port ${port} is already in use (HUB_PORT)`);
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  }, START_TIMEOUT_MS);

  it('HUB_PROCESSES=1 keeps the whole hub in one process', async () => {
    const hub = await start({ HUB_PROCESSES: '1' });
    try {
      expect(await eventually(() => hub.output().includes('; one process)'), 10_000)).toBe(true);
      expect(childrenOf(hub.child.pid!)).toEqual([]);
      expect((await rpc(hub.url, '/admin', adminToken, 'tenants.list')).body.result.tenants.map((t: { id: string }) => t.id)).toContain('acme');
    } finally {
      await hub.kill('SIGTERM');
    }
  }, START_TIMEOUT_MS + 30_000);
});

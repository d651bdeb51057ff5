import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { backends, type ProvisionedBackend } from '@agenthub/testing';

/**
 * Split mode as operators run it: every service its own `agenthub serve <service>` process (the
 * built bin; `npm run build` first) on loopback, over one real PostgreSQL database (a schema per
 * service) and Redis, with two workspace and two messaging replicas behind the gateway (WORKSPACE_ADDR
 * and MESSAGING_ADDR list both, balanced round-robin). Needs real PostgreSQL and Redis; skipped, saying so, without them.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = join('services', 'hub', 'bin', 'agenthub.js');
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 15_000;

const real = backends().find((backend) => backend.name === 'postgres+redis');
const describeSplit = real ? describe : describe.skip;
if (!real) {
  console.warn('[split.e2e] skipped: real PostgreSQL and Redis are not reachable (see libs/testing/global-setup.js)');
}

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

interface Proc {
  name: string;
  child: ChildProcess;
  exited: Promise<Exit>;
  output(): string;
  grpcPort: number;
  /** Ops endpoint (`http://127.0.0.1:<OPS_PORT>`), or the gateway's own HTTP URL. */
  opsUrl: string;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function baseEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(HUB_|DATABASE_|REDIS_|GRPC_|OPS_|IDENTITY_|WORKSPACE_|SECRETS_|EMBEDDINGS_|QDRANT_|LOG_LEVEL$|NODE_OPTIONS$)/.test(key)) continue;
    env[key] = value;
  }
  return { ...env, LOG_LEVEL: 'warn', ...extra };
}

const running = new Set<ChildProcess>();

function spawnService(name: string, service: string, env: Record<string, string>, grpcPort: number, opsUrl: string): Proc {
  const child = spawn(process.execPath, [BIN, 'serve', service], { cwd: ROOT, env: baseEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  running.add(child);
  void exited.then(() => running.delete(child));
  return { name, child, exited, output: () => output, grpcPort, opsUrl };
}

async function waitReady(proc: Proc): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (proc.child.exitCode !== null || proc.child.signalCode !== null) {
      throw new Error(`${proc.name} exited early (${proc.child.exitCode ?? proc.child.signalCode}):\n${proc.output()}`);
    }
    try {
      const response = await fetch(`${proc.opsUrl}/readyz`, { signal: AbortSignal.timeout(2_000) });
      if (response.status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${proc.name} was not ready within ${START_TIMEOUT_MS} ms:\n${proc.output()}`);
    await sleep(200);
  }
}

async function stopProc(proc: Proc, signal: NodeJS.Signals = 'SIGTERM'): Promise<Exit> {
  proc.child.kill(signal);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), STOP_TIMEOUT_MS)));
  const result = await Promise.race([proc.exited, timeout]);
  clearTimeout(timer);
  if (result === 'timeout') {
    proc.child.kill('SIGKILL');
    throw new Error(`${proc.name} did not exit within ${STOP_TIMEOUT_MS} ms of ${signal}:\n${proc.output()}`);
  }
  return result;
}

/** Successful calls this process's gRPC server handled for services whose name matches. */
async function servedCalls(proc: Proc, service: RegExp): Promise<number> {
  const text = await (await fetch(`${proc.opsUrl}/metrics`)).text();
  let total = 0;
  for (const line of text.split('\n')) {
    const match = /^agenthub_grpc_server_handling_seconds_count\{([^}]*)\} (\d+)/.exec(line);
    if (!match) continue;
    const labels = match[1] ?? '';
    const serviceLabel = /service="([^"]*)"/.exec(labels)?.[1] ?? '';
    if (service.test(serviceLabel) && labels.includes('code="OK"')) total += Number(match[2]);
  }
  return total;
}

describeSplit('split mode: one process per service, two workspace and two messaging replicas', () => {
  let provisioned: ProvisionedBackend;
  let procs: Record<'identity' | 'workspaceA' | 'workspaceB' | 'secrets' | 'messagingA' | 'messagingB' | 'gateway', Proc>;
  let gatewayUrl: string;
  const adminToken = `admin-${randomBytes(16).toString('hex')}`;
  let nextId = 1;

  const rpc = async (key: string, method: string, params: unknown = {}, path = '/a2a') => {
    const response = await fetch(`${gatewayUrl}${path}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}`, 'A2A-Version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
    });
    return (await response.json()) as { result?: any; error?: { code: number; message: string } };
  };
  const ok = async (key: string, method: string, params: unknown = {}) => {
    const reply = await rpc(key, `x-hub/${method}`, params);
    if (reply.error) throw new Error(`${method} failed: ${JSON.stringify(reply.error)}`);
    return reply.result;
  };
  const agent = async (tenant: string, name: string) => {
    const reply = await rpc(adminToken, 'agents.create', { tenant_id: tenant, name, create_tenant: true }, '/admin');
    if (reply.error) throw new Error(`agents.create failed: ${JSON.stringify(reply.error)}`);
    return { agent_id: reply.result.agent.id as string, api_key: reply.result.api_key as string };
  };

  beforeAll(async () => {
    provisioned = await real!.provision();
    const ports = await Promise.all(Array.from({ length: 14 }, freePort));
    const [idGrpc, idOps, waGrpc, waOps, wbGrpc, wbOps, seGrpc, seOps, maGrpc, maOps, mbGrpc, mbOps, hubPort, gwGrpc] = ports as number[] as [number, number, number, number, number, number, number, number, number, number, number, number, number, number];
    const common: Record<string, string> = {
      DATABASE_URL: provisioned.databaseUrl!,
      DATABASE_POOL_SIZE: '4',
      REDIS_URL: provisioned.redisUrl!,
      REDIS_PREFIX: provisioned.redisPrefix,
      HUB_ADMIN_TOKEN: adminToken,
      HUB_INTERNAL_TOKEN: `internal-${randomBytes(16).toString('hex')}`,
      HUB_KEKS: `v1:${randomBytes(32).toString('base64')}`,
      HUB_SHUTDOWN_GRACE_MS: '5000',
      HUB_METRICS: 'false',
      EMBEDDINGS_THREADS: '1',
      GRPC_HOST: '127.0.0.1',
      IDENTITY_ADDR: `127.0.0.1:${idGrpc}`,
      WORKSPACE_ADDR: `127.0.0.1:${waGrpc},127.0.0.1:${wbGrpc}`,
      SECRETS_ADDR: `127.0.0.1:${seGrpc}`,
      MESSAGING_ADDR: `127.0.0.1:${maGrpc},127.0.0.1:${mbGrpc}`,
    };
    const service = (name: string, svc: string, grpcPort: number, opsPort: number) =>
      spawnService(name, svc, { ...common, GRPC_PORT: String(grpcPort), OPS_PORT: String(opsPort) }, grpcPort, `http://127.0.0.1:${opsPort}`);
    gatewayUrl = `http://127.0.0.1:${hubPort}`;
    // Started together: the two workspace replicas race for the migrations (advisory lock).
    procs = {
      identity: service('identity', 'identity', idGrpc, idOps),
      workspaceA: service('workspace-a', 'workspace', waGrpc, waOps),
      workspaceB: service('workspace-b', 'workspace', wbGrpc, wbOps),
      secrets: service('secrets', 'secrets', seGrpc, seOps),
      messagingA: service('messaging-a', 'messaging', maGrpc, maOps),
      messagingB: service('messaging-b', 'messaging', mbGrpc, mbOps),
      gateway: spawnService('gateway', 'gateway', { ...common, HUB_HOST: '127.0.0.1', HUB_PORT: String(hubPort), GRPC_PORT: String(gwGrpc) }, gwGrpc, gatewayUrl),
    };
    await Promise.all(Object.values(procs).map(waitReady));
  }, START_TIMEOUT_MS + 30_000);

  afterAll(async () => {
    for (const child of running) child.kill('SIGKILL');
    await sleep(200);
    await provisioned?.dispose();
  }, 30_000);

  it('serves /healthz, /readyz (with its checks) and /metrics on every service ops port', async () => {
    for (const proc of [procs.identity, procs.workspaceA, procs.workspaceB, procs.secrets, procs.messagingA, procs.messagingB]) {
      const health = await fetch(`${proc.opsUrl}/healthz`);
      expect(health.status).toBe(200);
      const ready = await fetch(`${proc.opsUrl}/readyz`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({ ready: true, stopping: false, checks: { grpc: { ok: true }, db: { ok: true }, kv: { ok: true } } });
      const metrics = await fetch(`${proc.opsUrl}/metrics`);
      expect(metrics.status).toBe(200);
      expect(metrics.headers.get('content-type')).toContain('text/plain');
      expect(await metrics.text()).toContain('# TYPE agenthub_grpc_server_handling_seconds histogram');
      expect((await fetch(`${proc.opsUrl}/nope`)).status).toBe(404);
    }
    const gateway = await fetch(`${gatewayUrl}/readyz`);
    expect(gateway.status).toBe(200);
  });

  it('answers workspace, member, secret and grant calls through the gateway, spread over both workspace replicas', async () => {
    const owner = await agent('acme', 'owner');
    const colleague = await agent('acme', 'colleague');
    const foreign = await agent('globex', 'foreign');
    const beforeA = await servedCalls(procs.workspaceA, /WorkspaceService/);
    const beforeB = await servedCalls(procs.workspaceB, /WorkspaceService/);

    const { workspace } = await ok(owner.api_key, 'workspace.create', { name: 'Split' });
    expect(workspace.id).toMatch(/^ws/);
    await ok(owner.api_key, 'workspace.members.add', { workspace_id: workspace.id, agent_id: colleague.agent_id, role: 'write' });
    const { members } = await ok(colleague.api_key, 'workspace.members.list', { workspace_id: workspace.id });
    expect(members.map((m: { agent_id: string }) => m.agent_id).sort()).toEqual([owner.agent_id, colleague.agent_id].sort());
    for (let i = 0; i < 10; i++) {
      expect(await ok(colleague.api_key, 'workspace.get', { workspace_id: workspace.id })).toMatchObject({ role: 'write', member_count: 2 });
    }

    await ok(colleague.api_key, 'workspace.secrets.set', { workspace_id: workspace.id, key: 'DB_PASSWORD', value: 's3cret' });
    expect(await ok(owner.api_key, 'workspace.secrets.get', { workspace_id: workspace.id, key: 'DB_PASSWORD' })).toMatchObject({ value: 's3cret' });

    // Cross-tenant member through an approved grant; revoking it denies the very next call.
    const { grant } = await ok(foreign.api_key, 'grants.request', { agent_id: owner.agent_id });
    await ok(owner.api_key, 'grants.approve', { grant_id: grant.id });
    await ok(owner.api_key, 'workspace.members.add', { workspace_id: workspace.id, agent_id: foreign.agent_id, role: 'read' });
    expect(await ok(foreign.api_key, 'workspace.get', { workspace_id: workspace.id })).toMatchObject({ role: 'read' });
    await ok(owner.api_key, 'grants.revoke', { grant_id: grant.id });
    for (let i = 0; i < 4; i++) {
      const denied = await rpc(foreign.api_key, 'x-hub/workspace.get', { workspace_id: workspace.id });
      expect(denied.error).toMatchObject({ code: -32100, message: 'Access denied' });
    }

    const servedA = (await servedCalls(procs.workspaceA, /WorkspaceService/)) - beforeA;
    const servedB = (await servedCalls(procs.workspaceB, /WorkspaceService/)) - beforeB;
    expect(servedA).toBeGreaterThan(0);
    expect(servedB).toBeGreaterThan(0);
    expect(servedA + servedB).toBeGreaterThanOrEqual(15);
  });

  it('delivers messages across messaging replicas, waking blocking inbox polls', async () => {
    const sender = await agent('acme', 'sender');
    const recipient = await agent('acme', 'recipient');
    const beforeA = await servedCalls(procs.messagingA, /MessagingService/);
    const beforeB = await servedCalls(procs.messagingB, /MessagingService/);
    for (let i = 0; i < 4; i++) {
      // The recipient waits first (on one replica); the send (likely on the other) must wake it.
      const polled = rpc(recipient.api_key, 'x-hub/inbox.poll', { wait_ms: 8000 });
      await sleep(150);
      const started = Date.now();
      const sent = await rpc(sender.api_key, 'SendMessage', { message: { role: 'user', parts: [{ kind: 'text', text: `hello ${i}` }] }, configuration: { agentId: recipient.agent_id } });
      expect(sent.error).toBeUndefined();
      const { result, error } = await polled;
      expect(error).toBeUndefined();
      expect(Date.now() - started).toBeLessThan(5000);
      expect(result.deliveries.map((d: { task_id: string }) => d.task_id)).toEqual([sent.result.id]);
      for (const d of result.deliveries as { delivery_id: string }[]) await ok(recipient.api_key, 'inbox.ack', { delivery_id: d.delivery_id });
      const task = await rpc(sender.api_key, 'GetTask', { id: sent.result.id });
      expect(task.result.id).toBe(sent.result.id);
    }
    expect((await servedCalls(procs.messagingA, /MessagingService/)) - beforeA).toBeGreaterThan(0);
    expect((await servedCalls(procs.messagingB, /MessagingService/)) - beforeB).toBeGreaterThan(0);
  });

  it('keeps answering when one workspace replica dies', async () => {
    const owner = await agent('acme', 'survivor');
    const { workspace } = await ok(owner.api_key, 'workspace.create', { name: 'Before' });
    const exit = await stopProc(procs.workspaceA, 'SIGKILL');
    expect(exit.signal).toBe('SIGKILL');
    await sleep(300);
    const before = await servedCalls(procs.workspaceB, /WorkspaceService/);
    for (let i = 0; i < 8; i++) {
      expect(await ok(owner.api_key, 'workspace.get', { workspace_id: workspace.id })).toMatchObject({ role: 'admin' });
    }
    const created = await ok(owner.api_key, 'workspace.create', { name: 'After' });
    await ok(owner.api_key, 'workspace.secrets.set', { workspace_id: created.workspace.id, key: 'K', value: 'v' });
    expect(await ok(owner.api_key, 'workspace.secrets.get', { workspace_id: created.workspace.id, key: 'K' })).toMatchObject({ value: 'v' });
    expect((await servedCalls(procs.workspaceB, /WorkspaceService/)) - before).toBeGreaterThanOrEqual(9);
  });

  it('stops every process cleanly on SIGTERM', async () => {
    const order = [procs.gateway, procs.messagingA, procs.messagingB, procs.secrets, procs.workspaceB, procs.identity];
    for (const proc of order) {
      const exit = await stopProc(proc);
      expect({ name: proc.name, ...exit }).toEqual({ name: proc.name, code: 0, signal: null });
    }
  }, 4 * STOP_TIMEOUT_MS);
});

import { identityv1 } from '@agenthub/proto';
import { ConfigError, createClient, GrpcServer, HubError, InternalKey, MemoryKv, Metrics, Reason, startOpsServer, type Db, type Kv, type OpsServer } from '@agenthub/runtime';
import { testLogger } from '@agenthub/testing';
import { channelTarget } from '../src/grpc/client.js';

/** What every server and client of this file signs and checks calls with. */
const internalKey = InternalKey.generate();

/** A gRPC server for IdentityService whose getAgent answers with the server's label. */
async function serve(label: string) {
  const metrics = new Metrics();
  const server = new GrpcServer({ log: testLogger(), metrics, internalKey });
  const handlers = new Proxy(
    {},
    {
      get: (_target, name: string) =>
        name === 'getAgent'
          ? async () => ({ agent: { id: label } })
          : async () => {
              throw new HubError(Reason.UNAVAILABLE, 'not in this test');
            },
    },
  );
  server.add(identityv1.IdentityService, handlers as never);
  const port = await server.listen('127.0.0.1:0');
  return { server, metrics, address: `127.0.0.1:${port}` };
}

const workingDb = { query: async () => ({ rows: [{ '?column?': 1 }], rowCount: 1 }) } as unknown as Db;

describe('ops endpoint', () => {
  const cleanup: (() => unknown)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
  });

  async function setup(options: { db?: Db; kv?: Kv } = {}) {
    const grpc = await serve('a');
    const kv = options.kv ?? new MemoryKv();
    const ops: OpsServer = await startOpsServer({
      host: '127.0.0.1',
      port: 0,
      metrics: grpc.metrics,
      log: testLogger(),
      db: options.db ?? workingDb,
      kv,
      grpcAddress: grpc.address,
      checkTimeoutMs: 500,
    });
    cleanup.push(() => grpc.server.shutdown(100), () => ops.close(), () => kv.close());
    return { ...grpc, ops };
  }

  const get = async (ops: OpsServer, path: string) => {
    const response = await fetch(`${ops.url}${path}`);
    const text = await response.text();
    return { status: response.status, type: response.headers.get('content-type'), text, json: () => JSON.parse(text) };
  };

  it('serves liveness, readiness with its checks, and the process metrics', async () => {
    const { ops, address, metrics } = await setup();
    const client = createClient(identityv1.IdentityService, address, { defaultTimeoutMs: 2000, metrics, internalKey });
    cleanup.push(() => client.close());
    await client.getAgent({ agentId: 'x' });

    expect(ops.port).toBeGreaterThan(0);
    expect((await get(ops, '/healthz')).status).toBe(200);
    const ready = await get(ops, '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.json()).toEqual({ ready: true, stopping: false, checks: { grpc: { ok: true }, db: { ok: true }, kv: { ok: true } } });
    const scraped = await get(ops, '/metrics');
    expect(scraped.status).toBe(200);
    expect(scraped.type).toContain('text/plain');
    expect(scraped.text).toMatch(/agenthub_grpc_server_handling_seconds_count\{service="agenthub\.identity\.v1\.IdentityService",method="GetAgent",code="OK"\} 1/);
    expect((await get(ops, '/other')).status).toBe(404);
    expect((await fetch(`${ops.url}/readyz`, { method: 'POST' })).status).toBe(405);
  });

  it('is not ready when the database fails, naming the check', async () => {
    const failingDb = { query: async () => Promise.reject(new Error('connection refused')) } as unknown as Db;
    const { ops } = await setup({ db: failingDb });
    const ready = await get(ops, '/readyz');
    expect(ready.status).toBe(503);
    expect(ready.json()).toEqual({ ready: false, stopping: false, checks: { grpc: { ok: true }, db: { ok: false, error: 'connection refused' }, kv: { ok: true } } });
  });

  it('is not ready when the key-value store does not answer in time', async () => {
    const kv = new MemoryKv();
    kv.ping = () => new Promise(() => undefined);
    const { ops } = await setup({ kv });
    const ready = await get(ops, '/readyz');
    expect(ready.status).toBe(503);
    expect(ready.json().checks.kv).toEqual({ ok: false, error: 'kv did not answer within 500 ms' });
  });

  it('is not ready when gRPC health reports NOT_SERVING, or once stopping begins', async () => {
    const { ops, server } = await setup();
    server.setServing(false);
    const notServing = await get(ops, '/readyz');
    expect(notServing.status).toBe(503);
    expect(notServing.json().checks.grpc).toEqual({ ok: false, error: 'NOT_SERVING' });
    server.setServing(true);
    expect((await get(ops, '/readyz')).status).toBe(200);

    ops.markStopping();
    const stopping = await get(ops, '/readyz');
    expect(stopping.status).toBe(503);
    expect(stopping.json()).toMatchObject({ ready: false, stopping: true, checks: { grpc: { ok: true }, db: { ok: true }, kv: { ok: true } } });
    // Liveness stays up while the process drains.
    expect((await get(ops, '/healthz')).status).toBe(200);
  });
});

describe('gRPC client address lists', () => {
  it('turns a comma-separated list into a round-robin address target', () => {
    expect(channelTarget('10.0.0.1:50051')).toBe('10.0.0.1:50051');
    expect(channelTarget('identity.svc:50051')).toBe('identity.svc:50051');
    expect(channelTarget('dns:///identity.svc:50051')).toBe('dns:///identity.svc:50051');
    expect(channelTarget('10.0.0.1:1, 10.0.0.2:2')).toBe('ipv4:10.0.0.1:1,10.0.0.2:2');
    expect(channelTarget('localhost:1,127.0.0.1:2')).toBe('ipv4:127.0.0.1:1,127.0.0.1:2');
    expect(channelTarget('[::1]:1,[::1]:2')).toBe('ipv6:[::1]:1,[::1]:2');
    expect(() => channelTarget('a.svc:1,b.svc:2')).toThrow(ConfigError);
    expect(() => channelTarget('10.0.0.1:1,10.0.0.2')).toThrow(/not host:port/);
    expect(() => channelTarget('10.0.0.1:1,[::1]:2')).toThrow(/cannot mix/);
  });

  it('spreads calls over every listed server, and keeps calling the rest when one stops', async () => {
    const a = await serve('a');
    const b = await serve('b');
    const client = createClient(identityv1.IdentityService, `${a.address},${b.address}`, { defaultTimeoutMs: 2000, internalKey });
    try {
      const seen: string[] = [];
      for (let i = 0; i < 10; i++) seen.push((await client.getAgent({ agentId: 'x' })).agent!.id);
      expect(seen.filter((id) => id === 'a').length).toBeGreaterThanOrEqual(3);
      expect(seen.filter((id) => id === 'b').length).toBeGreaterThanOrEqual(3);

      await a.server.shutdown(100);
      await new Promise((resolve) => setTimeout(resolve, 100));
      const after: string[] = [];
      for (let i = 0; i < 6; i++) after.push((await client.getAgent({ agentId: 'x' })).agent!.id);
      expect(after).toEqual(Array(6).fill('b'));
    } finally {
      client.close();
      await b.server.shutdown(100);
    }
  });
});

import { randomBytes } from 'node:crypto';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { HubError, MemoryKv, Reason, RedisKv, type Kv } from '@agenthub/runtime';

/** One conformance suite for every Kv adapter: what callers rely on, whichever backs it. */
const adapters: [string, () => Promise<Kv>][] = [['MemoryKv', async () => new MemoryKv()]];
if (process.env.AGENTHUB_TEST_REDIS_URL) {
  adapters.push(['RedisKv', () => RedisKv.connect({ url: process.env.AGENTHUB_TEST_REDIS_URL!, prefix: `kvtest:${randomBytes(4).toString('hex')}:` })]);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(adapters)('Kv conformance: %s', (_name, open) => {
  let kv: Kv;
  beforeEach(async () => { kv = await open(); });
  afterEach(() => kv.close());

  it('gets what was set and forgets what was deleted', async () => {
    expect(await kv.get('a')).toBeUndefined();
    await kv.set('a', '1');
    expect(await kv.get('a')).toBe('1');
    await kv.del('a');
    expect(await kv.get('a')).toBeUndefined();
  });

  it('expires values after their ttl', async () => {
    await kv.set('short', 'x', 50);
    expect(await kv.get('short')).toBe('x');
    await sleep(120);
    expect(await kv.get('short')).toBeUndefined();
  });

  it('sets only absent keys with setIfAbsent', async () => {
    expect(await kv.setIfAbsent('k', 'first', 1000)).toBe(true);
    expect(await kv.setIfAbsent('k', 'second', 1000)).toBe(false);
    expect(await kv.get('k')).toBe('first');
  });

  it('delivers published messages to subscribers until they unsubscribe', async () => {
    const got: string[] = [];
    const unsubscribe = await kv.subscribe('ch', (m) => got.push(m));
    await kv.publish('ch', 'one');
    await kv.publish('other', 'ignored');
    for (let i = 0; i < 50 && got.length < 1; i++) await sleep(10);
    expect(got).toEqual(['one']);
    await unsubscribe();
    await kv.publish('ch', 'two');
    await sleep(50);
    expect(got).toEqual(['one']);
  });

  it('takes tokens from a bucket until it is empty, then tells how long to wait', async () => {
    const first = await kv.take('bucket', 3, 1, 2);
    expect(first).toEqual({ allowed: true, remaining: 1, retryAfterMs: 0 });
    const refused = await kv.take('bucket', 3, 1, 2);
    expect(refused.allowed).toBe(false);
    expect(refused.remaining).toBe(1);
    // One token short at one token a second.
    expect(refused.retryAfterMs).toBeGreaterThan(800);
    expect(refused.retryAfterMs).toBeLessThanOrEqual(1000);
    expect((await kv.take('bucket', 3, 1, 0)).allowed).toBe(true);
    expect((await kv.take('other', 3, 1, 3)).allowed).toBe(true);
  });

  it('refills a bucket over time', async () => {
    expect((await kv.take('refill', 2, 20, 2)).allowed).toBe(true);
    expect((await kv.take('refill', 2, 20, 1)).allowed).toBe(false);
    await sleep(120);
    expect((await kv.take('refill', 2, 20, 1)).allowed).toBe(true);
  });

  it('takes atomically under concurrent callers', async () => {
    const results = await Promise.all(Array.from({ length: 20 }, () => kv.take('race', 10, 0.001, 1)));
    expect(results.filter((r) => r.allowed)).toHaveLength(10);
  });

  it('answers ping', async () => {
    await expect(kv.ping()).resolves.toBeUndefined();
  });
});

describe('RedisKv isolation', () => {
  const url = process.env.AGENTHUB_TEST_REDIS_URL;
  (url ? it : it.skip)(`keeps prefixes apart${url ? '' : ' (skipped: no Redis reachable)'}`, async () => {
    const a = await RedisKv.connect({ url: url!, prefix: 'iso-a:' });
    const b = await RedisKv.connect({ url: url!, prefix: 'iso-b:' });
    try {
      await a.set('same', 'a', 1000);
      expect(await b.get('same')).toBeUndefined();
    } finally {
      await a.close();
      await b.close();
    }
  });
});

/**
 * Redis going away must not leave callers waiting: a command fails within a bound (UNAVAILABLE)
 * instead of queueing until the connection comes back, and one whose caller's signal aborts first
 * stops with the caller. Redis is reached through a TCP relay this test can cut.
 */
describe('RedisKv while Redis is unreachable', () => {
  const url = process.env.AGENTHUB_TEST_REDIS_URL;
  let relay: Server;
  const sockets = new Set<Socket>();
  let kv: RedisKv;

  beforeAll(async () => {
    if (!url) return;
    const target = new URL(url);
    relay = createServer((client) => {
      const upstream = connect(Number(target.port || 6379), target.hostname);
      for (const socket of [client, upstream]) {
        sockets.add(socket);
        socket.on('error', () => undefined);
        socket.on('close', () => sockets.delete(socket));
      }
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    const port = (relay.address() as { port: number }).port;
    kv = await RedisKv.connect({ url: `redis://127.0.0.1:${port}`, prefix: `kvdown:${randomBytes(4).toString('hex')}:`, offlineWaitMs: 300 });
  });
  afterAll(async () => {
    await kv?.close();
    relay?.close();
  });

  const timed = async (work: Promise<unknown>) => {
    const started = performance.now();
    const err = await work.then(() => undefined, (e: unknown) => e);
    return { err, ms: performance.now() - started };
  };

  (url ? it : it.skip)('fails a command within a bound, then stops a waiting one when its signal aborts', async () => {
    await kv.set('k', 'v');
    expect(await kv.get('k')).toBe('v');

    // Redis is gone: the relay refuses new connections and drops the open one.
    relay.close();
    for (const socket of sockets) socket.destroy();

    const down = await timed(kv.get('k'));
    expect(down.err).toBeInstanceOf(HubError);
    expect((down.err as HubError).reason).toBe(Reason.UNAVAILABLE);
    expect(down.ms).toBeLessThan(2_000);

    // The caller's deadline comes before the bounded wait for the connection ends.
    const left = await timed(kv.set('k', 'w', undefined, AbortSignal.timeout(50)));
    expect((left.err as HubError).reason).toBe(Reason.DEADLINE_EXCEEDED);
    expect(left.ms).toBeLessThan(250);
  });
});

import { randomBytes } from 'node:crypto';
import { MemoryKv, RedisKv, type Kv } from '@agenthub/runtime';

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

  it('holds at most max slots, all of an acquisition or none, until released', async () => {
    expect(await kv.acquireSlots('sem', ['a', 'b'], 3, 10_000)).toBe(true);
    expect(await kv.acquireSlots('sem', ['c', 'd'], 3, 10_000)).toBe(false);
    expect(await kv.acquireSlots('sem', ['c'], 3, 10_000)).toBe(true);
    expect(await kv.acquireSlots('sem', ['d'], 3, 10_000)).toBe(false);
    expect(await kv.acquireSlots('other-sem', ['d'], 3, 10_000)).toBe(true);
    await kv.releaseSlots('sem', ['a', 'b']);
    expect(await kv.acquireSlots('sem', ['d', 'e'], 3, 10_000)).toBe(true);
    expect(await kv.acquireSlots('sem', ['f'], 0, 10_000)).toBe(false);
  });

  it('frees the slots of a holder that stopped renewing them, keeps the renewed ones', async () => {
    expect(await kv.acquireSlots('lease', ['kept', 'lost'], 2, 150)).toBe(true);
    for (let i = 0; i < 3; i++) {
      await sleep(75);
      await kv.renewSlots('lease', ['kept'], 150);
    }
    // 225 ms on: `lost` ran out, `kept` was renewed, and a renewal does not bring back `lost`.
    await kv.renewSlots('lease', ['lost'], 150);
    expect(await kv.acquireSlots('lease', ['new'], 2, 150)).toBe(true);
    expect(await kv.acquireSlots('lease', ['more'], 2, 150)).toBe(false);
  });

  it('acquires slots atomically under concurrent callers', async () => {
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => kv.acquireSlots('sem-race', [`id${i}`], 5, 10_000)));
    expect(results.filter(Boolean)).toHaveLength(5);
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

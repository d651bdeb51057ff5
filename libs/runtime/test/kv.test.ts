import { randomBytes } from 'node:crypto';
import { connect, createServer, type Socket } from 'node:net';
import { HubError, MemoryKv, Reason, type Kv } from '@agenthub/runtime';
import { RedisKv } from '@agenthub/runtime/redis';

/** One conformance suite for every Kv adapter: what callers rely on, whichever backs it. */
const adapters: [string, () => Promise<Kv>][] = [['MemoryKv', async () => new MemoryKv()]];
if (process.env.AGENTHUB_TEST_REDIS_URL) {
  adapters.push(['RedisKv', () => RedisKv.connect({ url: process.env.AGENTHUB_TEST_REDIS_URL!, prefix: `kvtest:${randomBytes(4).toString('hex')}:` })]);
}

/** Polls `check` every 10 ms until it holds; fails after `boundMs`. Resolves with the time it took. */
async function within(boundMs: number, what: string, check: () => Promise<boolean>): Promise<number> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > boundMs) throw new Error(`Not within ${boundMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return Date.now() - started;
}

/** The next message `kv` delivers on `channel`, to a subscriber of its own. */
async function nextMessage(kv: Kv, channel: string): Promise<{ message: Promise<string>; unsubscribe: () => Promise<void> }> {
  let heard!: (message: string) => void;
  const message = new Promise<string>((resolve) => (heard = resolve));
  const unsubscribe = await kv.subscribe(channel, (m) => heard(m));
  return { message, unsubscribe };
}

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
    await kv.set('long', 'y', 60_000);
    expect(await kv.get('short')).toBe('x');
    await within(2_000, 'short expired', async () => (await kv.get('short')) === undefined);
    expect(await kv.get('long')).toBe('y');
  });

  it('sets only absent keys with setIfAbsent', async () => {
    expect(await kv.setIfAbsent('k', 'first', 1000)).toBe(true);
    expect(await kv.setIfAbsent('k', 'second', 1000)).toBe(false);
    expect(await kv.get('k')).toBe('first');
  });

  it('delivers published messages to subscribers until they unsubscribe', async () => {
    const got: string[] = [];
    const unsubscribe = await kv.subscribe('ch', (m) => got.push(m));
    // Messages arrive in the order they were published: had 'ignored' reached this subscriber,
    // it would be there before 'one'.
    const first = await nextMessage(kv, 'ch');
    await kv.publish('other', 'ignored');
    await kv.publish('ch', 'one');
    expect(await first.message).toBe('one');
    await first.unsubscribe();
    expect(got).toEqual(['one']);
    await unsubscribe();
    // Another subscriber hearing 'two' is the signal that it was delivered to whoever listened.
    const second = await nextMessage(kv, 'ch');
    await kv.publish('ch', 'two');
    expect(await second.message).toBe('two');
    await second.unsubscribe();
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
    const refused = await kv.take('refill', 2, 20, 1);
    expect(refused.allowed).toBe(false);
    // One token at 20 a second: back within 50 ms, and a refused take does not spend it.
    expect(refused.retryAfterMs).toBeGreaterThan(0);
    expect(refused.retryAfterMs).toBeLessThanOrEqual(50);
    await within(2_000, 'a token refilled', async () => (await kv.take('refill', 2, 20, 1)).allowed);
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
    // `kept` is renewed at every look; a slot is free once `lost` ran out.
    await within(2_000, 'the unrenewed lease ran out', async () => {
      await kv.renewSlots('lease', ['kept'], 150);
      if (!(await kv.acquireSlots('lease', ['probe'], 2, 150))) return false;
      await kv.releaseSlots('lease', ['probe']);
      return true;
    });
    // A renewal does not bring back `lost`.
    await kv.renewSlots('lease', ['kept', 'lost'], 150);
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

/**
 * A TCP relay in front of the test Redis: `cut` refuses new connections and drops the open ones
 * (Redis gone), `mute` keeps them but stops passing Redis's replies on (Redis stalled).
 */
async function redisRelay(url: string) {
  const target = new URL(url);
  const sockets = new Set<Socket>();
  let muted = false;
  const server = createServer((client) => {
    const upstream = connect(Number(target.port || 6379), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => sockets.delete(socket));
    }
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      if (!muted) client.write(chunk);
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `redis://127.0.0.1:${(server.address() as { port: number }).port}`,
    mute: () => (muted = true),
    cut: () => {
      server.close();
      for (const socket of sockets) socket.destroy();
    },
  };
}

const timed = async (work: Promise<unknown>) => {
  const started = performance.now();
  const err = await work.then(() => undefined, (e: unknown) => e);
  return { err, ms: performance.now() - started };
};

/**
 * Redis failing must not leave callers waiting. Gone: a command fails within a bound (UNAVAILABLE)
 * instead of queueing until the connection comes back. Stalled (it holds the connection but stops
 * answering, as a half-open link does): a command fails once `commandTimeoutMs` passes. Either
 * way a caller's earlier deadline wins.
 */
describe('RedisKv when Redis fails', () => {
  const url = process.env.AGENTHUB_TEST_REDIS_URL;
  let relay: Awaited<ReturnType<typeof redisRelay>>;
  let kv: RedisKv;
  let prefix: string;

  beforeEach(async () => {
    if (!url) return;
    relay = await redisRelay(url);
    prefix = `kvfail:${randomBytes(4).toString('hex')}:`;
    kv = await RedisKv.connect({ url: relay.url, prefix, offlineWaitMs: 300, commandTimeoutMs: 300 });
  });
  afterEach(async () => {
    relay?.cut();
    await kv?.close();
    if (!url) return;
    // The keys were written through the relay, which is gone: removed over a connection of their own.
    const direct = await RedisKv.connect({ url, prefix });
    await direct.del('k');
    await direct.del('bucket');
    await direct.close();
  });

  (url ? it : it.skip)('fails a command within a bound once Redis is gone, then stops a waiting one when its signal aborts', async () => {
    await kv.set('k', 'v');
    expect(await kv.get('k')).toBe('v');

    // Redis is gone: the relay refuses new connections and drops the open one.
    relay.cut();

    const down = await timed(kv.get('k'));
    expect(down.err).toBeInstanceOf(HubError);
    expect((down.err as HubError).reason).toBe(Reason.UNAVAILABLE);
    expect(down.ms).toBeLessThan(2_000);

    // The caller's deadline comes before the bounded wait for the connection ends.
    const left = await timed(kv.set('k', 'w', undefined, AbortSignal.timeout(50)));
    expect((left.err as HubError).reason).toBe(Reason.DEADLINE_EXCEEDED);
    expect(left.ms).toBeLessThan(250);
  });

  (url ? it : it.skip)('fails a command that gets no answer within commandTimeoutMs, and a caller\'s earlier deadline first', async () => {
    await kv.set('k', 'v');
    relay.mute();
    const stalled = await timed(kv.get('k'));
    expect(stalled.err).toBeInstanceOf(HubError);
    expect((stalled.err as HubError).reason).toBe(Reason.UNAVAILABLE);
    expect((stalled.err as HubError).message).toBe('The key-value store did not answer within 300 ms');
    expect(stalled.ms).toBeGreaterThanOrEqual(290);
    expect(stalled.ms).toBeLessThan(2_000);

    const early = await timed(kv.take('bucket', 5, 1, 1, AbortSignal.timeout(50)));
    expect((early.err as HubError).reason).toBe(Reason.DEADLINE_EXCEEDED);

    // Closing says goodbye after every answer owed, which never come: it gives up after the same bound.
    const closing = await timed(kv.close());
    expect(closing.ms).toBeLessThan(2_000);
  });
});

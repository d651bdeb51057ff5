import { createClient, ClientClosedError, ClientOfflineError, SocketClosedUnexpectedlyError, type RedisClientType } from 'redis';
import { SpanKind, withSpan } from '../tracing.js';
import type { Kv, TakeResult } from './kv.js';
import { abortError, throwIfAborted } from '../abort.js';
import { HubError, Reason } from '../errors.js';

/** How long a command waits for a lost connection to come back before failing UNAVAILABLE. */
export const DEFAULT_OFFLINE_WAIT_MS = 1_000;

/** How long a command waits for its answer before failing UNAVAILABLE (the Redis client's own default). */
export const DEFAULT_COMMAND_TIMEOUT_MS = 5_000;

/**
 * The token bucket of `Kv.take`, atomic in Redis and timed by the server's clock, so every
 * gateway replica draws from the same bucket. The hash expires once it would be full again.
 */
const TAKE_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = capacity
else
  tokens = math.min(capacity, tokens + math.max(0, now - at) * rate / 1000)
end
local allowed = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) / rate * 1000) + 1000)
local wait = 0
if allowed == 0 then
  wait = math.ceil((math.min(cost, capacity) - tokens) / rate * 1000)
end
return { allowed, math.floor(tokens), wait }
`;

/** `Kv.acquireSlots`: a sorted set of lease ids scored by when they run out (the server's clock). */
const ACQUIRE_SLOTS_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local max = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) + #ARGV - 2 > max then
  return 0
end
for i = 3, #ARGV do
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
`;

/** `Kv.renewSlots`: XX, so a lease that ran out (and may have been counted free) is not revived. */
const RENEW_SLOTS_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[i])
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return 1
`;

/** Redis: one connection for commands, a second one opened on first subscribe. */
export class RedisKv implements Kv {
  private subscriber: RedisClientType | undefined;

  private constructor(
    private readonly client: RedisClientType,
    private readonly prefix: string,
    private readonly offlineWaitMs: number,
    private readonly commandTimeoutMs: number,
  ) {}

  /**
   * `prefix` namespaces every key and channel, so several hubs (or tests) can share a server.
   * `offlineWaitMs` bounds how long a command waits while the connection is down,
   * `commandTimeoutMs` how long it waits for its answer.
   */
  static async connect(options: { url: string; prefix?: string; offlineWaitMs?: number; commandTimeoutMs?: number }): Promise<RedisKv> {
    const client: RedisClientType = createClient({
      url: options.url,
      // A command issued while disconnected fails instead of waiting in a queue without bound;
      // `run` waits for the connection first, for a bounded time.
      disableOfflineQueue: true,
      // `run` bounds the wait for an answer. The client's own bound is an AbortSignal.timeout per
      // command, whose timer outlives the answer by the whole 5 s: at hundreds of commands a
      // second those timers were most of what each young-generation GC pause had to copy.
      commandOptions: { timeout: 0 },
      socket: { reconnectStrategy: (retries: number) => Math.min(100 * 2 ** retries, 5_000) },
    });
    // Reconnection is automatic; an error event without a listener would crash the process.
    client.on('error', () => undefined);
    await client.connect();
    return new RedisKv(client, options.prefix ?? 'agenthub:', options.offlineWaitMs ?? DEFAULT_OFFLINE_WAIT_MS, options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS);
  }

  /**
   * Runs one command inside a client span (no key or value on it: keys can name API keys'
   * hashes), once the connection is up, and stops waiting for it when `signal` aborts or
   * `commandTimeoutMs` passes.
   */
  private async run<T>(name: string, signal: AbortSignal | undefined, work: () => Promise<T>): Promise<T> {
    throwIfAborted(signal);
    if (!this.client.isReady) await this.connected(signal);
    const reply = withSpan(name, { kind: SpanKind.CLIENT, childOnly: true, attributes: { 'db.system.name': 'redis', 'db.operation.name': name } }, work);
    try {
      return await awaitReply(reply, signal, this.commandTimeoutMs);
    } catch (err) {
      // The connection went (or was down): the command did not run, or its answer is lost.
      if (err instanceof ClientOfflineError || err instanceof ClientClosedError || err instanceof SocketClosedUnexpectedlyError) throw unreachable(err);
      throw err;
    }
  }

  /** Resolves when the connection is ready; rejects after `offlineWaitMs` or when `signal` aborts. */
  private connected(signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const finish = (err?: HubError) => {
        clearTimeout(timer);
        this.client.off('ready', onReady);
        signal?.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve();
      };
      const onReady = () => finish();
      const onAbort = () => finish(abortError(signal!));
      const timer = setTimeout(() => finish(unreachable()), this.offlineWaitMs);
      this.client.on('ready', onReady);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  async get(key: string, signal?: AbortSignal): Promise<string | undefined> {
    return (await this.run('GET', signal, () => this.client.get(this.prefix + key))) ?? undefined;
  }

  async set(key: string, value: string, ttlMs?: number, signal?: AbortSignal): Promise<void> {
    await this.run('SET', signal, () => this.client.set(this.prefix + key, value, ttlMs === undefined ? undefined : { PX: Math.max(1, Math.round(ttlMs)) }));
  }

  async setIfAbsent(key: string, value: string, ttlMs: number, signal?: AbortSignal): Promise<boolean> {
    const reply = await this.run('SET', signal, () => this.client.set(this.prefix + key, value, { NX: true, PX: Math.max(1, Math.round(ttlMs)) }));
    return reply === 'OK';
  }

  async del(key: string, signal?: AbortSignal): Promise<void> {
    await this.run('DEL', signal, () => this.client.del(this.prefix + key));
  }

  async take(key: string, capacity: number, refillPerSec: number, cost: number, signal?: AbortSignal): Promise<TakeResult> {
    const reply = (await this.run('EVAL', signal, () =>
      this.client.eval(TAKE_SCRIPT, { keys: [this.prefix + key], arguments: [String(capacity), String(refillPerSec), String(cost)] }),
    )) as [number, number, number];
    return { allowed: reply[0] === 1, remaining: reply[1], retryAfterMs: reply[2] };
  }

  async acquireSlots(key: string, ids: readonly string[], max: number, ttlMs: number, signal?: AbortSignal): Promise<boolean> {
    const reply = await this.run('EVAL', signal, () =>
      this.client.eval(ACQUIRE_SLOTS_SCRIPT, { keys: [this.prefix + key], arguments: [String(max), String(Math.max(1, Math.round(ttlMs))), ...ids] }),
    );
    return reply === 1;
  }

  async renewSlots(key: string, ids: readonly string[], ttlMs: number, signal?: AbortSignal): Promise<void> {
    if (!ids.length) return;
    await this.run('EVAL', signal, () => this.client.eval(RENEW_SLOTS_SCRIPT, { keys: [this.prefix + key], arguments: [String(Math.max(1, Math.round(ttlMs))), ...ids] }));
  }

  async releaseSlots(key: string, ids: readonly string[], signal?: AbortSignal): Promise<void> {
    if (!ids.length) return;
    await this.run('ZREM', signal, () => this.client.zRem(this.prefix + key, [...ids]));
  }

  async publish(channel: string, message: string, signal?: AbortSignal): Promise<void> {
    await this.run('PUBLISH', signal, () => this.client.publish(this.prefix + channel, message));
  }

  async subscribe(channel: string, onMessage: (message: string) => void, onGap?: () => void): Promise<() => Promise<void>> {
    if (!this.subscriber) {
      // Subscribing is not a caller's command: (un)subscribes made while the connection is down
      // wait for it, as node-redis resubscribes on reconnect anyway (and `listen` callers do not
      // await an unsubscribe).
      this.subscriber = this.client.duplicate({ disableOfflineQueue: false });
      this.subscriber.on('error', () => undefined);
      await this.subscriber.connect();
    }
    const subscriber = this.subscriber;
    const listener = (message: string) => onMessage(message);
    // Pub/sub does not replay: whatever was published while the connection was down is lost.
    const gapEvents = ['error', 'end', 'reconnecting', 'ready'] as const;
    const gap = () => onGap?.();
    if (onGap) for (const event of gapEvents) subscriber.on(event, gap);
    await subscriber.subscribe(this.prefix + channel, listener);
    return async () => {
      if (onGap) for (const event of gapEvents) subscriber.off(event, gap);
      await subscriber.unsubscribe(this.prefix + channel, listener);
    };
  }

  async ping(signal?: AbortSignal): Promise<void> {
    await this.run('PING', signal, () => this.client.ping());
  }

  async close(): Promise<void> {
    // A connection that is down cannot say goodbye, and one that stopped answering never ends
    // its goodbye (it waits for every answer owed): either would hold up shutdown.
    for (const client of [this.subscriber, this.client]) {
      try {
        if (client?.isReady) await awaitReply(client.close(), undefined, this.commandTimeoutMs);
        else client?.destroy();
      } catch {
        client?.destroy();
      }
    }
  }
}

function unreachable(cause?: unknown): HubError {
  return new HubError(Reason.UNAVAILABLE, 'The key-value store is unreachable', { cause });
}

/**
 * `work`'s result; `abortError(signal)` as soon as `signal` aborts; UNAVAILABLE once `timeoutMs`
 * passes (the command itself runs on). The timer goes with the answer.
 */
function awaitReply<T>(work: Promise<T>, signal: AbortSignal | undefined, timeoutMs: number): Promise<T> {
  let onAbort = (): void => undefined;
  let timer: NodeJS.Timeout | undefined;
  const stopped = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new HubError(Reason.UNAVAILABLE, `The key-value store did not answer within ${timeoutMs} ms`)), timeoutMs);
    onAbort = () => reject(abortError(signal!));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  return Promise.race([work, stopped]).finally(() => {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  });
}

import { createClient, type RedisClientType } from 'redis';
import { SpanKind, withSpan } from '../tracing.js';
import type { Kv, TakeResult } from './kv.js';

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

/** A client span for one command run inside a traced call (no key or value on it: keys can name API keys' hashes). */
const command = <T>(name: string, work: () => Promise<T>): Promise<T> =>
  withSpan(name, { kind: SpanKind.CLIENT, childOnly: true, attributes: { 'db.system.name': 'redis', 'db.operation.name': name } }, work);

/** Redis: one connection for commands, a second one opened on first subscribe. */
export class RedisKv implements Kv {
  private subscriber: RedisClientType | undefined;

  private constructor(private readonly client: RedisClientType, private readonly prefix: string) {}

  /** `prefix` namespaces every key and channel, so several hubs (or tests) can share a server. */
  static async connect(options: { url: string; prefix?: string }): Promise<RedisKv> {
    const client: RedisClientType = createClient({
      url: options.url,
      socket: { reconnectStrategy: (retries: number) => Math.min(100 * 2 ** retries, 5_000) },
    });
    // Reconnection is automatic; an error event without a listener would crash the process.
    client.on('error', () => undefined);
    await client.connect();
    return new RedisKv(client, options.prefix ?? 'agenthub:');
  }

  async get(key: string): Promise<string | undefined> {
    return (await command('GET', () => this.client.get(this.prefix + key))) ?? undefined;
  }

  async set(key: string, value: string, ttlMs?: number): Promise<void> {
    await command('SET', () => this.client.set(this.prefix + key, value, ttlMs === undefined ? undefined : { PX: Math.max(1, Math.round(ttlMs)) }));
  }

  async setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean> {
    const reply = await command('SET', () => this.client.set(this.prefix + key, value, { NX: true, PX: Math.max(1, Math.round(ttlMs)) }));
    return reply === 'OK';
  }

  async del(key: string): Promise<void> {
    await command('DEL', () => this.client.del(this.prefix + key));
  }

  async take(key: string, capacity: number, refillPerSec: number, cost: number): Promise<TakeResult> {
    const reply = (await command('EVAL', () =>
      this.client.eval(TAKE_SCRIPT, { keys: [this.prefix + key], arguments: [String(capacity), String(refillPerSec), String(cost)] }),
    )) as [number, number, number];
    return { allowed: reply[0] === 1, remaining: reply[1], retryAfterMs: reply[2] };
  }

  async acquireSlots(key: string, ids: readonly string[], max: number, ttlMs: number): Promise<boolean> {
    const reply = await command('EVAL', () =>
      this.client.eval(ACQUIRE_SLOTS_SCRIPT, { keys: [this.prefix + key], arguments: [String(max), String(Math.max(1, Math.round(ttlMs))), ...ids] }),
    );
    return reply === 1;
  }

  async renewSlots(key: string, ids: readonly string[], ttlMs: number): Promise<void> {
    if (!ids.length) return;
    await command('EVAL', () => this.client.eval(RENEW_SLOTS_SCRIPT, { keys: [this.prefix + key], arguments: [String(Math.max(1, Math.round(ttlMs))), ...ids] }));
  }

  async releaseSlots(key: string, ids: readonly string[]): Promise<void> {
    if (!ids.length) return;
    await command('ZREM', () => this.client.zRem(this.prefix + key, [...ids]));
  }

  async publish(channel: string, message: string): Promise<void> {
    await command('PUBLISH', () => this.client.publish(this.prefix + channel, message));
  }

  async subscribe(channel: string, onMessage: (message: string) => void, onGap?: () => void): Promise<() => Promise<void>> {
    if (!this.subscriber) {
      this.subscriber = this.client.duplicate();
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

  async ping(): Promise<void> {
    await this.client.ping();
  }

  async close(): Promise<void> {
    await this.subscriber?.quit().catch(() => undefined);
    await this.client.quit().catch(() => undefined);
  }
}

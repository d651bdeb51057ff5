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

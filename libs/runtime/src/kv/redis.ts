import { createClient, type RedisClientType } from 'redis';
import { SpanKind, withSpan } from '../tracing.js';
import type { Kv } from './kv.js';

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

import { EventEmitter } from 'node:events';
import type { Kv } from './kv.js';

/** In-process Kv for the all-in-one mode: shared only by the services of this process. */
export class MemoryKv implements Kv {
  private readonly values = new Map<string, { value: string; expiresAt: number }>();
  private readonly channels = new EventEmitter().setMaxListeners(0);

  async get(key: string): Promise<string | undefined> {
    const entry = this.values.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= Date.now()) {
      this.values.delete(key);
      return undefined;
    }
    return entry.value;
  }

  async set(key: string, value: string, ttlMs?: number): Promise<void> {
    this.values.set(key, { value, expiresAt: ttlMs === undefined ? Infinity : Date.now() + ttlMs });
  }

  async setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean> {
    if ((await this.get(key)) !== undefined) return false;
    await this.set(key, value, ttlMs);
    return true;
  }

  async del(key: string): Promise<void> {
    this.values.delete(key);
  }

  async publish(channel: string, message: string): Promise<void> {
    // Delivered on a later tick, as with Redis: a publisher never runs subscribers inline.
    setImmediate(() => this.channels.emit(channel, message));
  }

  async subscribe(channel: string, onMessage: (message: string) => void): Promise<() => Promise<void>> {
    this.channels.on(channel, onMessage);
    return async () => {
      this.channels.off(channel, onMessage);
    };
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    this.values.clear();
    this.channels.removeAllListeners();
  }
}

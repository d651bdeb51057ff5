import { EventEmitter } from 'node:events';
import type { Kv, TakeResult } from './kv.js';
import { throwIfAborted } from '../abort.js';

/** Past this many buckets, full ones (indistinguishable from absent ones) are dropped. */
const BUCKET_SWEEP_AT = 10_000;

/** In-process Kv for the all-in-one mode: shared only by the services of this process. */
export class MemoryKv implements Kv {
  private readonly values = new Map<string, { value: string; expiresAt: number }>();
  private readonly buckets = new Map<string, { tokens: number; at: number; full: number }>();
  private readonly channels = new EventEmitter().setMaxListeners(0);
  /** Semaphores: lease id → when it runs out. */
  private readonly slots = new Map<string, Map<string, number>>();

  async get(key: string, signal?: AbortSignal): Promise<string | undefined> {
    throwIfAborted(signal);
    const entry = this.values.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= Date.now()) {
      this.values.delete(key);
      return undefined;
    }
    return entry.value;
  }

  async set(key: string, value: string, ttlMs?: number, signal?: AbortSignal): Promise<void> {
    throwIfAborted(signal);
    this.values.set(key, { value, expiresAt: ttlMs === undefined ? Infinity : Date.now() + ttlMs });
  }

  async setIfAbsent(key: string, value: string, ttlMs: number, signal?: AbortSignal): Promise<boolean> {
    throwIfAborted(signal);
    if ((await this.get(key)) !== undefined) return false;
    await this.set(key, value, ttlMs);
    return true;
  }

  async del(key: string, signal?: AbortSignal): Promise<void> {
    throwIfAborted(signal);
    this.values.delete(key);
  }

  async take(key: string, capacity: number, refillPerSec: number, cost: number, signal?: AbortSignal): Promise<TakeResult> {
    throwIfAborted(signal);
    const now = Date.now();
    const bucket = this.buckets.get(key);
    let tokens = bucket ? Math.min(capacity, bucket.tokens + ((now - bucket.at) * refillPerSec) / 1000) : capacity;
    const allowed = tokens >= cost;
    if (allowed) tokens -= cost;
    if (!bucket && this.buckets.size >= BUCKET_SWEEP_AT) {
      for (const [k, b] of this.buckets) if (b.full <= now) this.buckets.delete(k);
    }
    this.buckets.set(key, { tokens, at: now, full: now + ((capacity - tokens) / refillPerSec) * 1000 });
    const missing = (cost > capacity ? capacity : cost) - tokens;
    return { allowed, remaining: Math.floor(tokens), retryAfterMs: allowed ? 0 : Math.ceil((missing / refillPerSec) * 1000) };
  }

  async acquireSlots(key: string, ids: readonly string[], max: number, ttlMs: number, signal?: AbortSignal): Promise<boolean> {
    throwIfAborted(signal);
    const now = Date.now();
    const leases = this.slots.get(key) ?? new Map<string, number>();
    for (const [id, until] of leases) if (until <= now) leases.delete(id);
    if (leases.size + ids.length > max) {
      if (!leases.size) this.slots.delete(key);
      return false;
    }
    for (const id of ids) leases.set(id, now + ttlMs);
    this.slots.set(key, leases);
    return true;
  }

  async renewSlots(key: string, ids: readonly string[], ttlMs: number, signal?: AbortSignal): Promise<void> {
    throwIfAborted(signal);
    const leases = this.slots.get(key);
    if (!leases) return;
    const now = Date.now();
    for (const id of ids) {
      const until = leases.get(id);
      if (until !== undefined && until > now) leases.set(id, now + ttlMs);
    }
  }

  async releaseSlots(key: string, ids: readonly string[], signal?: AbortSignal): Promise<void> {
    throwIfAborted(signal);
    const leases = this.slots.get(key);
    if (!leases) return;
    for (const id of ids) leases.delete(id);
    if (!leases.size) this.slots.delete(key);
  }

  async publish(channel: string, message: string, signal?: AbortSignal): Promise<void> {
    throwIfAborted(signal);
    // Delivered on a later tick, as with Redis: a publisher never runs subscribers inline.
    setImmediate(() => this.channels.emit(channel, message));
  }

  async subscribe(channel: string, onMessage: (message: string) => void): Promise<() => Promise<void>> {
    this.channels.on(channel, onMessage);
    return async () => {
      this.channels.off(channel, onMessage);
    };
  }

  async ping(signal?: AbortSignal): Promise<void> {
    throwIfAborted(signal);
  }

  async close(): Promise<void> {
    this.values.clear();
    this.buckets.clear();
    this.slots.clear();
    this.channels.removeAllListeners();
  }
}

/**
 * Shared short-lived state and cross-replica notifications: Redis in production, a map and an
 * event emitter in one process otherwise. Every command takes the caller's signal: an aborted one
 * sends nothing and a command in flight stops being waited for (rejecting with `abortError`).
 * While the backend is unreachable a command waits a bounded time for it to come back, then
 * fails UNAVAILABLE; commands are never queued without limit.
 */
export interface Kv {
  get(key: string, signal?: AbortSignal): Promise<string | undefined>;
  /** `ttlMs` bounds how long the value lives; without it, it lives until deleted. */
  set(key: string, value: string, ttlMs?: number, signal?: AbortSignal): Promise<void>;
  /** Sets the value only when the key holds none; returns whether it did. */
  setIfAbsent(key: string, value: string, ttlMs: number, signal?: AbortSignal): Promise<boolean>;
  del(key: string, signal?: AbortSignal): Promise<void>;
  /**
   * Token bucket: atomically refills `key` (at most `capacity` tokens, `refillPerSec` a second)
   * and takes `cost` tokens when it holds that many. Cost 0 only reads the bucket.
   */
  take(key: string, capacity: number, refillPerSec: number, cost: number, signal?: AbortSignal): Promise<TakeResult>;
  /**
   * A counting semaphore of `max` slots under `key`, shared like the buckets: drops the leases
   * whose time ran out, then adds `ids` (one slot each, held for `ttlMs`) only when all of them
   * fit. Returns whether it added them. A holder that goes away frees its slots within `ttlMs`.
   */
  acquireSlots(key: string, ids: readonly string[], max: number, ttlMs: number, signal?: AbortSignal): Promise<boolean>;
  /** Holds `ids` of `key` for another `ttlMs` from now; leases that already ran out stay gone. */
  renewSlots(key: string, ids: readonly string[], ttlMs: number, signal?: AbortSignal): Promise<void>;
  releaseSlots(key: string, ids: readonly string[], signal?: AbortSignal): Promise<void>;
  /** Delivers `message` to every subscriber of `channel` in every process sharing the backend. */
  publish(channel: string, message: string, signal?: AbortSignal): Promise<void>;
  /**
   * Returns a function that ends the subscription. `onGap`, when given, runs whenever messages may
   * have been lost: the connection dropped, or came back (messages published meanwhile are gone).
   */
  subscribe(channel: string, onMessage: (message: string) => void, onGap?: () => void): Promise<() => Promise<void>>;
  ping(signal?: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

export interface TakeResult {
  allowed: boolean;
  /** Whole tokens left after this take. */
  remaining: number;
  /** 0 when allowed; else how long until `cost` tokens are there (until the bucket is full when it never holds that many). */
  retryAfterMs: number;
}

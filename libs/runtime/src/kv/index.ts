import type { Kv } from './kv.js';
import { MemoryKv } from './memory.js';

export type { Kv, TakeResult } from './kv.js';
export { LocalFirstKv } from './local-first.js';
export { MemoryKv } from './memory.js';
export type { RedisKv } from './redis.js';

/**
 * Redis when a URL is configured, else in-process. The Redis client (hundreds of modules) is
 * loaded only then, so a process without Redis does not pay for it at start.
 */
export async function openKv(options: { url?: string; prefix?: string }): Promise<Kv> {
  if (!options.url) return new MemoryKv();
  const { RedisKv } = await import('./redis.js');
  return RedisKv.connect({ url: options.url, prefix: options.prefix });
}

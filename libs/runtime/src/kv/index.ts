import type { Kv } from './kv.js';
import { MemoryKv } from './memory.js';
import { RedisKv } from './redis.js';

export type { Kv, TakeResult } from './kv.js';
export { MemoryKv } from './memory.js';
export { RedisKv } from './redis.js';

/** Redis when a URL is configured, else in-process. */
export async function openKv(options: { url?: string; prefix?: string }): Promise<Kv> {
  return options.url ? RedisKv.connect({ url: options.url, prefix: options.prefix }) : new MemoryKv();
}

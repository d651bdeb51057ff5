/**
 * The gateway caches "API key hash → principal" in the Kv for HUB_AUTH_CACHE_MS, filling an
 * entry only when the key holds none. Revoking a key overwrites its entry with a tombstone that
 * outlives any cache entry, before the revocation is answered: so a revoked key fails on the
 * very next call, even when a lookup that started before the revocation finishes after it, and
 * with several gateway replicas (they share Redis).
 */
export function authCacheKey(apiKeyHash: string): string {
  return `auth:${apiKeyHash}`;
}

export const REVOKED_KEY_TOMBSTONE = 'revoked';

/** Upper bound of HUB_AUTH_CACHE_MS; the tombstone lives longer than any cached entry. */
export const MAX_AUTH_CACHE_MS = 60 * 60 * 1000;
export const TOMBSTONE_TTL_MS = 2 * MAX_AUTH_CACHE_MS;

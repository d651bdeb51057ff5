/**
 * The gateway caches "API key hash → principal" in the Kv for HUB_AUTH_CACHE_MS. The identity
 * service deletes the entry before it answers a revocation, so a revoked key fails on the very
 * next call even with several gateway replicas (they share Redis).
 */
export function authCacheKey(apiKeyHash: string): string {
  return `auth:${apiKeyHash}`;
}

import { refusedClass, type HubConfig } from '@agenthub/runtime';
import { requestLogLevel, type GatewayDeps } from './index.js';
import { limitsConfig } from './limits/index.js';
import type { ProxyTrust } from './origin.js';

/**
 * The gateway's settings from configuration (HUB_*, rate limits included): the one mapping, used by its `main.ts` and
 * by the all-in-one hub, which add what differs by how they run it (upstreams, keys, Kv, TLS).
 *
 * Intentional differences, decided here: the all-in-one hub (`oneProcess`) caches API keys
 * whenever HUB_AUTH_CACHE_MS says so, since its identity service drops revoked keys from the very
 * cache the gateway reads. A separate gateway caches only when that cache is shared (REDIS_URL).
 *
 * `/metrics` (tenant ids in its labels) is served on the ops port (OPS_HOST:OPS_PORT), which no
 * Ingress routes to, by a separate gateway always and by the all-in-one hub whenever HUB_HOST is
 * reachable from elsewhere (the container's 0.0.0.0). Only an all-in-one hub on a loopback HUB_HOST
 * (a developer's machine) keeps it on the public port, where only the machine itself can ask.
 */
export function gatewayOptions(
  config: HubConfig,
  mode: { oneProcess: boolean },
): Pick<GatewayDeps, 'host' | 'port' | 'maxBodyBytes' | 'maxBatch' | 'maxJsonDepth' | 'publicUrl' | 'trustedProxies' | 'authCacheMs' | 'grpcTimeoutMs' | 'streamMaxMs' | 'metricsListen' | 'requestLogLevel' | 'limits'> {
  return {
    host: config.HUB_HOST,
    port: config.HUB_PORT,
    maxBodyBytes: config.HUB_MAX_BODY_BYTES,
    maxBatch: config.HUB_MAX_BATCH,
    maxJsonDepth: config.HUB_MAX_JSON_DEPTH,
    publicUrl: config.HUB_PUBLIC_URL,
    trustedProxies: proxyTrust(config),
    authCacheMs: mode.oneProcess || config.REDIS_URL ? config.HUB_AUTH_CACHE_MS : 0,
    grpcTimeoutMs: config.HUB_GRPC_TIMEOUT_MS,
    streamMaxMs: config.HUB_STREAM_MAX_MS,
    ...(mode.oneProcess && isLoopbackHost(config.HUB_HOST) ? {} : { metricsListen: { host: config.OPS_HOST ?? config.HUB_HOST, port: config.OPS_PORT } }),
    requestLogLevel: requestLogLevel(config.NODE_ENV),
    limits: limitsConfig(config),
  };
}

/**
 * HUB_TRUSTED_PROXIES decides whose forwarded headers are believed. Without it, the deprecated
 * HUB_RATE_TRUST_FORWARDED_FOR=true keeps its old meaning: every peer is a proxy that appended
 * the client to X-Forwarded-For (now for Agent Card links too, as one setting decides both).
 */
export function proxyTrust(config: Pick<HubConfig, 'HUB_TRUSTED_PROXIES' | 'HUB_RATE_TRUST_FORWARDED_FOR'>): ProxyTrust | undefined {
  return config.HUB_TRUSTED_PROXIES ?? (config.HUB_RATE_TRUST_FORWARDED_FOR ? 'any-peer' : undefined);
}

/**
 * Whether a listen address is reachable from this machine only: localhost, or a loopback address
 * as the egress guard classifies them (127.0.0.0/8, ::1, and IPv4-mapped forms of those).
 */
export function isLoopbackHost(host: string): boolean {
  const address = host.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  return address === 'localhost' || refusedClass(address) === 'loopback';
}

import { BlockList, isIP } from 'node:net';

/**
 * The base URL links the hub hands out (Agent Cards) are built from. The configured public URL
 * (HUB_PUBLIC_URL) wins; without it the request is the only witness, and a forwarded header
 * (`X-Forwarded-Proto`, `X-Forwarded-Host`) is believed only when the hop that sent it is a
 * trusted proxy, since anyone else could set them.
 */
export interface Origin {
  baseUrl: string;
  /** Request headers the URL was read from, for `Vary`; empty when it is the configured one. */
  vary: string[];
}

export interface OriginRequest {
  /** Address of the peer that opened the connection (the last hop). */
  remoteAddress: string | undefined;
  /** Whether that connection is TLS. */
  encrypted: boolean;
  header(name: string): string | undefined;
}

/**
 * Proxies whose forwarded headers (`X-Forwarded-For`, `-Proto`, `-Host`) are believed: addresses
 * and CIDR ranges (HUB_TRUSTED_PROXIES), or `any-peer` (the deprecated HUB_RATE_TRUST_FORWARDED_FOR):
 * whatever peer connects is a proxy, but no hop it forwards is.
 */
export type ProxyTrust = readonly string[] | 'any-peer';

export interface OriginOptions {
  publicUrl?: string;
  trustedProxies?: ProxyTrust;
}

/** undefined when the request names no usable host (a malformed Host header). */
export type OriginOf = (request: OriginRequest) => Origin | undefined;

const HOST = /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

export function originOf(options: OriginOptions): OriginOf {
  if (options.publicUrl) {
    const fixed: Origin = { baseUrl: options.publicUrl, vary: [] };
    return () => fixed;
  }
  const trust = proxyTrust(options.trustedProxies);
  return (request) => {
    const viaProxy = trust.peer(request.remoteAddress);
    const forwardedProto = viaProxy ? first(request.header('x-forwarded-proto'))?.toLowerCase() : undefined;
    const forwardedHost = viaProxy ? first(request.header('x-forwarded-host')) : undefined;
    // TLS on either hop makes the link https: a card must never send a key back over plain http.
    const https = request.encrypted || forwardedProto === 'https';
    const host = forwardedHost ?? request.header('host');
    if (!host || !HOST.test(host)) return undefined;
    const vary = ['Host'];
    if (viaProxy) vary.push('X-Forwarded-Proto', 'X-Forwarded-Host');
    return { baseUrl: `${https ? 'https' : 'http'}://${host.toLowerCase()}`, vary };
  };
}

function first(value: string | undefined): string | undefined {
  const head = value?.split(',')[0]?.trim();
  return head || undefined;
}

/**
 * The client's address for per-address limits: behind a trusted proxy, `X-Forwarded-For` walked
 * from its last hop (the one the proxy appended) back past further trusted proxies; otherwise the
 * peer's own address, since anyone else could write the header.
 */
export function clientAddressOf(trusted: ProxyTrust | undefined): (peer: string, forwardedFor: string | undefined) => string {
  const trust = proxyTrust(trusted);
  return (peer, forwardedFor) => {
    if (!trust.peer(peer) || !forwardedFor) return peer;
    const hops = forwardedFor.split(',').map((hop) => hop.trim()).filter(Boolean);
    for (let i = hops.length - 1; i >= 0; i--) {
      if (i === 0 || !trust.hop(hops[i]!)) return hops[i]!;
    }
    return peer;
  };
}

function proxyTrust(trusted: ProxyTrust | undefined): { peer: (address: string | undefined) => boolean; hop: (address: string) => boolean } {
  if (trusted === 'any-peer') return { peer: (address) => address !== undefined, hop: () => false };
  const list = trustList(trusted ?? []);
  const check = (address: string | undefined) => list !== undefined && address !== undefined && isTrusted(list, address);
  return { peer: check, hop: check };
}

function trustList(entries: readonly string[]): BlockList | undefined {
  if (!entries.length) return undefined;
  const list = new BlockList();
  for (const entry of entries) {
    const [address = '', prefix] = entry.split('/');
    const type = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    if (prefix === undefined) list.addAddress(address, type);
    else list.addSubnet(address, Number(prefix), type);
  }
  return list;
}

function isTrusted(list: BlockList, address: string): boolean {
  // An IPv4 peer on a dual-stack socket shows as ::ffff:a.b.c.d.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  const plain = mapped ? mapped[1]! : address;
  const family = isIP(plain);
  return family !== 0 && list.check(plain, family === 6 ? 'ipv6' : 'ipv4');
}

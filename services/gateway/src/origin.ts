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

export interface OriginOptions {
  publicUrl?: string;
  /** Addresses and CIDR ranges of proxies whose forwarded headers are believed. */
  trustedProxies?: readonly string[];
}

/** undefined when the request names no usable host (a malformed Host header). */
export type OriginOf = (request: OriginRequest) => Origin | undefined;

const HOST = /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

export function originOf(options: OriginOptions): OriginOf {
  if (options.publicUrl) {
    const fixed: Origin = { baseUrl: options.publicUrl, vary: [] };
    return () => fixed;
  }
  const trusted = trustList(options.trustedProxies ?? []);
  return (request) => {
    const viaProxy = trusted !== undefined && request.remoteAddress !== undefined && isTrusted(trusted, request.remoteAddress);
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

import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import { HubError } from '@agenthub/runtime';

/**
 * Server-side request forgery guard. A webhook URL is checked when it is created, and every
 * connection re-resolves its host and checks each address again (DNS may change in between,
 * on purpose or not), connecting only to an address this check approved.
 */

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Every address a host name resolves to; tests inject their own table. */
export type Resolver = (host: string) => Promise<ResolvedAddress[]>;

export const systemResolver: Resolver = async (host) => {
  const found = await dnsLookup(host, { all: true, verbatim: true });
  return found.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

type Cidr = [bytes: number[], prefix: number, label: string];

const v4 = (text: string, prefix: number, label: string): Cidr => [text.split('.').map(Number), prefix, label];

/** Refused IPv4 ranges, labelled for the caller. */
const V4_BLOCKED: Cidr[] = [
  v4('0.0.0.0', 8, 'unspecified'),
  v4('10.0.0.0', 8, 'private'),
  v4('100.64.0.0', 10, 'carrier-grade NAT'),
  v4('127.0.0.0', 8, 'loopback'),
  v4('169.254.0.0', 16, 'link-local (cloud metadata)'),
  v4('172.16.0.0', 12, 'private'),
  v4('192.168.0.0', 16, 'private'),
  v4('224.0.0.0', 4, 'multicast'),
  // Reserved, including the broadcast address.
  v4('240.0.0.0', 4, 'reserved'),
];

const V6_BLOCKED: Cidr[] = [
  [ipv6Bytes('::1'), 128, 'loopback'],
  [ipv6Bytes('fc00::'), 7, 'private'],
  [ipv6Bytes('fe80::'), 10, 'link-local'],
  [ipv6Bytes('ff00::'), 8, 'multicast'],
];

function inCidr(bytes: number[], [base, prefix]: Cidr): boolean {
  for (let bit = 0; bit < prefix; bit += 8) {
    const mask = prefix - bit >= 8 ? 0xff : (0xff << (8 - (prefix - bit))) & 0xff;
    if (((bytes[bit / 8] ?? 0) & mask) !== ((base[bit / 8] ?? 0) & mask)) return false;
  }
  return true;
}

/** The 16 bytes of an IPv6 address (zone id dropped, a trailing dotted quad allowed). */
function ipv6Bytes(text: string): number[] {
  let address = text.replace(/%.*$/, '');
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (quad) {
    const [a, b, c, d] = quad[1]!.split('.').map(Number) as [number, number, number, number];
    address = `${address.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = address.includes('::') ? address.split('::') as [string, string] : [address, undefined];
  const groups = (part: string | undefined) => (part ? part.split(':') : []);
  const left = groups(head);
  const right = groups(tail);
  const all = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return all.flatMap((group) => {
    const value = parseInt(group || '0', 16);
    return [value >> 8, value & 0xff];
  });
}

/**
 * Why an address may not be a webhook target (`loopback`, `private`, …), or undefined when it
 * may. IPv6 forms that carry an IPv4 address (mapped `::ffff:a.b.c.d`, the deprecated
 * compatible `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`) are judged by that IPv4 address.
 */
export function blockedClass(address: string): string | undefined {
  const family = isIP(address.replace(/%.*$/, ''));
  if (family === 4) {
    const bytes = address.split('.').map(Number);
    return V4_BLOCKED.find((cidr) => inCidr(bytes, cidr))?.[2];
  }
  if (family !== 6) return 'unparseable';
  const bytes = ipv6Bytes(address);
  const embedded = bytes.slice(12).join('.');
  const zeros = (n: number) => bytes.slice(0, n).every((b) => b === 0);
  if (zeros(10) && bytes[10] === 0xff && bytes[11] === 0xff) return blockedClass(embedded);
  if (zeros(16)) return 'unspecified';
  const named = V6_BLOCKED.find((cidr) => inCidr(bytes, cidr))?.[2];
  if (named) return named;
  if (zeros(12)) return blockedClass(embedded);
  if (inCidr(bytes, [ipv6Bytes('64:ff9b::'), 96, ''])) return blockedClass(embedded);
  return undefined;
}

export interface TargetPolicy {
  /** HUB_WEBHOOK_ALLOW_PRIVATE: every address class is allowed (tests, labs). */
  allowPrivate: boolean;
  resolve: Resolver;
}

export const URL_MAX = 2048;

/** The URL's host without the brackets of an IPv6 literal. */
function hostOf(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/**
 * Parses and checks a webhook URL: http or https, no user information, and (unless private
 * targets are allowed) a host whose every address is public. Refusals are INVALID_PARAMS on
 * `url` saying why, naming the address class but never an address the host resolved to.
 */
export async function checkTarget(raw: string, policy: TargetPolicy): Promise<string> {
  if (raw.length === 0) throw HubError.invalidParams('url', 'is required');
  if (raw.length > URL_MAX) throw HubError.invalidParams('url', `must be at most ${URL_MAX} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw HubError.invalidParams('url', 'must be an absolute http or https URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw HubError.invalidParams('url', 'must use http or https');
  if (url.username || url.password) throw HubError.invalidParams('url', 'must not contain user information');
  if (!url.hostname) throw HubError.invalidParams('url', 'must name a host');
  if (!policy.allowPrivate) {
    const problem = await refusal(hostOf(url), policy.resolve);
    if (problem) throw HubError.invalidParams('url', problem);
  }
  return url.toString();
}

/** Why connecting to `host` is refused, or undefined when every address it has is public. */
async function refusal(host: string, resolve: Resolver): Promise<string | undefined> {
  if (isIP(host)) {
    const blocked = blockedClass(host);
    return blocked && `is refused: it names a ${blocked} address`;
  }
  let addresses: ResolvedAddress[];
  try {
    addresses = await resolve(host);
  } catch {
    return 'is refused: its host does not resolve';
  }
  if (addresses.length === 0) return 'is refused: its host does not resolve';
  for (const { address } of addresses) {
    const blocked = blockedClass(address);
    if (blocked) return `is refused: its host resolves to a ${blocked} address`;
  }
  return undefined;
}

/** A refusal at connection time; recorded on the attempt like any network error. */
export class BlockedTargetError extends Error {
  override readonly name = 'BlockedTargetError';
}

/** Checks an IP-literal host before connecting (Node does not call `lookup` for those). */
export function checkLiteral(url: URL, policy: TargetPolicy): void {
  const host = hostOf(url);
  if (policy.allowPrivate || !isIP(host)) return;
  const blocked = blockedClass(host);
  if (blocked) throw new BlockedTargetError(`refused: the URL names a ${blocked} address`);
}

/**
 * A `lookup` for http.request: resolves with the policy's resolver and hands the socket only
 * addresses that pass the check, so the connection goes to exactly what was approved.
 */
export function guardedLookup(policy: TargetPolicy): LookupFunction {
  return (hostname, options, callback) => {
    const family = typeof options === 'object' ? options.family : undefined;
    policy
      .resolve(hostname)
      .then((found) => {
        const addresses = found.filter((a) => !family || family === a.family);
        if (addresses.length === 0) throw Object.assign(new Error(`${hostname} does not resolve`), { code: 'ENOTFOUND' });
        if (!policy.allowPrivate) {
          for (const { address } of addresses) {
            const blocked = blockedClass(address);
            if (blocked) throw new BlockedTargetError(`refused: the host resolves to a ${blocked} address`);
          }
        }
        if (typeof options === 'object' && options.all) callback(null, addresses);
        else callback(null, addresses[0]!.address, addresses[0]!.family);
      })
      .catch((err: NodeJS.ErrnoException) => callback(err, '', 0));
  };
}

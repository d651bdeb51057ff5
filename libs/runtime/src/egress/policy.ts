import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { HubError } from '../errors.js';

/**
 * The address policy of every outbound call the hub makes: an allow-list of global unicast
 * space. An address is allowed only when `ipaddr.js` classifies it as `unicast` (none of the
 * special-purpose ranges it knows: private, loopback, link-local, CGNAT, 192.0.0.0/24,
 * 198.18.0.0/15, documentation, 6to4, Teredo, NAT64, discard 100::/64, site-local fec0::/10, …)
 * and, for IPv6, lies in 2000::/3, the only block IANA allocates for global unicast (so the
 * deprecated IPv4-compatible ::/96 and anything unassigned are refused too).
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

export interface EgressPolicy {
  /** HUB_EGRESS_ALLOW_PRIVATE: every address class is allowed (tests, labs, targets inside the cluster). */
  allowPrivate: boolean;
  resolve: Resolver;
}

/** A policy with the system resolver. */
export function egressPolicy(allowPrivate: boolean, resolve: Resolver = systemResolver): EgressPolicy {
  return { allowPrivate, resolve };
}

const GLOBAL_V6 = ipaddr.IPv6.parse('2000::');
const NAT64_WELL_KNOWN = ipaddr.IPv6.parse('64:ff9b::');

/** Labels for `ipaddr.js` range names, as callers read them in a refusal. */
const LABELS: Record<string, string> = {
  broadcast: 'reserved',
  linkLocal: 'link-local',
  carrierGradeNat: 'carrier-grade NAT',
  uniqueLocal: 'private',
  deprecatedSiteLocal: 'site-local',
  rfc6052: 'local NAT64',
  rfc6145: 'IPv4-translated',
  teredo: 'Teredo',
  discard: 'discard-only',
  as112: 'reserved',
  as112v6: 'reserved',
  amt: 'reserved',
  orchid2: 'reserved',
  deprecatedOrchid: 'reserved',
};

/**
 * Why an address may not be connected to (`loopback`, `private`, `6to4`, …), or undefined when it
 * is global unicast. IPv4-mapped IPv6 addresses and the NAT64 well-known prefix 64:ff9b::/96 are
 * judged by the IPv4 address they carry; the local-use NAT64 prefix 64:ff9b:1::/48 is refused.
 */
export function refusedClass(address: string): string | undefined {
  const text = address.replace(/%.*$/, '');
  if (!isIP(text)) return 'unparseable';
  const parsed = ipaddr.parse(text);
  if (parsed.kind() === 'ipv4') {
    const range = parsed.range();
    if (range === 'unicast') return undefined;
    return range === 'linkLocal' ? 'link-local (cloud metadata)' : (LABELS[range] ?? range);
  }
  const v6 = parsed as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return refusedClass(v6.toIPv4Address().toString());
  if (v6.match(NAT64_WELL_KNOWN, 96)) return refusedClass(ipaddr.fromByteArray(v6.toByteArray().slice(12)).toString());
  const range = v6.range();
  if (range !== 'unicast') return LABELS[range] ?? range;
  if (!v6.match(GLOBAL_V6, 3)) return 'reserved';
  return undefined;
}

/** The URL's host without the brackets of an IPv6 literal. */
export function hostOf(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/** Why connecting to `host` is refused, or undefined when every address it has is allowed. */
export async function hostRefusal(host: string, resolve: Resolver): Promise<string | undefined> {
  if (isIP(host)) {
    const refused = refusedClass(host);
    return refused && `is refused: it names a ${refused} address`;
  }
  let addresses: ResolvedAddress[];
  try {
    addresses = await resolve(host);
  } catch {
    return 'is refused: its host does not resolve';
  }
  if (addresses.length === 0) return 'is refused: its host does not resolve';
  for (const { address } of addresses) {
    const refused = refusedClass(address);
    if (refused) return `is refused: its host resolves to a ${refused} address`;
  }
  return undefined;
}

export const URL_MAX = 2048;

/**
 * Parses and checks a target URL a caller registers (a webhook, a push agent's endpoint): http or
 * https, no user information, and (unless private targets are allowed) a host whose every
 * address is global unicast. Refusals are INVALID_PARAMS on `field` saying why, naming the
 * address class but never an address the host resolved to. Returns the normalised URL.
 */
export async function checkTargetUrl(raw: string, field: string, policy: EgressPolicy): Promise<string> {
  if (raw.length === 0) throw HubError.invalidParams(field, 'is required');
  if (raw.length > URL_MAX) throw HubError.invalidParams(field, `must be at most ${URL_MAX} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw HubError.invalidParams(field, 'must be an absolute http or https URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw HubError.invalidParams(field, 'must use http or https');
  if (url.username || url.password) throw HubError.invalidParams(field, 'must not contain user information');
  if (!url.hostname) throw HubError.invalidParams(field, 'must name a host');
  if (!policy.allowPrivate) {
    const problem = await hostRefusal(hostOf(url), policy.resolve);
    if (problem) throw HubError.invalidParams(field, problem);
  }
  return url.toString();
}

/** A refusal at connection time: the target's address is outside the policy. */
export class BlockedAddressError extends Error {
  override readonly name = 'BlockedAddressError';
}

/**
 * A `lookup` for http.request: resolves with the policy's resolver and hands the socket only
 * addresses that pass the check, so the connection goes to exactly what was approved (DNS
 * answers may change between a registration check and a send, on purpose or not).
 */
export function guardedLookup(policy: EgressPolicy): LookupFunction {
  return (hostname, options, callback) => {
    const family = typeof options === 'object' ? options.family : undefined;
    policy
      .resolve(hostname)
      .then((found) => {
        const addresses = found.filter((a) => !family || family === a.family);
        if (addresses.length === 0) throw Object.assign(new Error(`${hostname} does not resolve`), { code: 'ENOTFOUND' });
        if (!policy.allowPrivate) {
          for (const { address } of addresses) {
            const refused = refusedClass(address);
            if (refused) throw new BlockedAddressError(`the host resolves to a ${refused} address`);
          }
        }
        if (typeof options === 'object' && options.all) callback(null, addresses);
        else callback(null, addresses[0]!.address, addresses[0]!.family);
      })
      .catch((err: NodeJS.ErrnoException) => callback(err, '', 0));
  };
}

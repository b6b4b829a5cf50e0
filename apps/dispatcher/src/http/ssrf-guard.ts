import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/** An attempt refused because its target is not a public address (contract §2, SSRF guard). */
export class BlockedTargetError extends Error {
  readonly code = 'ESSRFBLOCKED';
  constructor(host: string, address?: string) {
    super(address ? `target ${host} resolves to non-public address ${address}` : `target ${host} is not a public address`);
    this.name = 'BlockedTargetError';
  }
}

/** IPv6 global unicast (RFC 4291): anything outside it, such as ::7f00:1, is not a public target. */
const IPV6_GLOBAL_UNICAST = ipaddr.parseCIDR('2000::/3');

/**
 * True only for ordinary public unicast addresses: loopback, private, link-local, CGNAT,
 * multicast, unique-local, documentation, IPv4-compatible/mapped and other special ranges are refused.
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6') {
    const v6 = parsed as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) return isPublicAddress(v6.toIPv4Address().toString());
    return v6.range() === 'unicast' && v6.match(IPV6_GLOBAL_UNICAST);
  }
  return parsed.range() === 'unicast';
}

/** The URL host without IPv6 brackets. */
export function bareHost(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

/** Refuses a URL whose host is an IP literal that is not public (no DNS lookup happens for those). */
export function assertLiteralTargetAllowed(url: URL): void {
  const host = bareHost(url.hostname);
  if (isIP(host) && !isPublicAddress(host)) throw new BlockedTargetError(host);
}

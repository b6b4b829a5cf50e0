import { Resolver, type LookupAddress, type LookupAllOptions, type LookupOneOptions } from 'node:dns';
import { BlockedTargetError, isPublicAddress } from './ssrf-guard.js';

export interface ReceiverLookupOptions {
  /** Time for one query to one server before c-ares tries again (WEBHOOK_DNS_TIMEOUT_MS). */
  timeoutMs: number;
  /** Queries per server before giving up (WEBHOOK_DNS_TRIES). */
  tries: number;
  /** Name servers as "ip" or "ip:port"; empty means the system's (/etc/resolv.conf). */
  servers: readonly string[];
  /** Without the guard every address is allowed (WEBHOOK_ALLOW_PRIVATE_TARGETS=true). */
  allowPrivateTargets: boolean;
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;
export type ReceiverLookup = (hostname: string, options: LookupOneOptions | LookupAllOptions, callback: LookupCallback) => void;

/** RFC 6761 §6.3: localhost names are loopback without asking anyone (c-ares does not read /etc/hosts). */
const LOCALHOST: LookupAddress[] = [
  { address: '127.0.0.1', family: 4 },
  { address: '::1', family: 6 },
];

function isLocalhostName(hostname: string): boolean {
  const name = hostname.toLowerCase().replace(/\.$/, '');
  return name === 'localhost' || name.endsWith('.localhost');
}

function lookupError(code: string, hostname: string, message: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${message} (${hostname})`), { code, hostname }) as NodeJS.ErrnoException;
}

/**
 * The socket's lookup hook for receivers. Names are resolved with c-ares (node:dns Resolver):
 * its queries wait on the event loop, not on libuv's four shared threads (which dns.lookup
 * blocks), so a tenant whose name servers never answer cannot delay anyone else's lookups.
 * Each lookup is bounded by timeoutMs × tries; with the guard on, only public addresses are
 * returned, and the socket connects to exactly what is returned (no rebinding gap).
 */
export function createReceiverLookup(options: ReceiverLookupOptions): ReceiverLookup {
  const resolver = new Resolver({ timeout: options.timeoutMs, tries: options.tries });
  if (options.servers.length > 0) resolver.setServers([...options.servers]);
  const deadlineMs = options.timeoutMs * options.tries;

  const resolveAll = (hostname: string, family: number | undefined, done: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) => {
    if (isLocalhostName(hostname)) {
      done(null, LOCALHOST.filter((entry) => !family || entry.family === family));
      return;
    }
    const families = family === 4 || family === 6 ? [family] : [4, 6];
    const found: LookupAddress[][] = families.map(() => []);
    const errors: NodeJS.ErrnoException[] = [];
    let pending = families.length;
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      clearTimeout(deadline);
      const addresses = found.flat();
      if (addresses.length > 0) done(null, addresses);
      else if (pending > 0) done(lookupError('ETIMEOUT', hostname, `no answer from the name server within ${deadlineMs} ms`), []);
      else done(errors.find((e) => e.code !== 'ENODATA' && e.code !== 'ENOTFOUND') ?? lookupError('ENOTFOUND', hostname, 'host not found'), []);
    };
    // c-ares backs off between tries; this keeps the promised bound whatever it does.
    const deadline = setTimeout(finish, deadlineMs);
    families.forEach((fam, index) => {
      const callback = (error: NodeJS.ErrnoException | null, addresses: string[]) => {
        pending -= 1;
        if (error) errors.push(error);
        else found[index] = addresses.map((address) => ({ address, family: fam }));
        // IPv4 first: an answer for it is enough to connect, AAAA may still be on its way.
        if (pending === 0 || (fam === 4 && found[index]!.length > 0)) finish();
      };
      if (fam === 4) resolver.resolve4(hostname, callback);
      else resolver.resolve6(hostname, callback);
    });
  };

  return (hostname, lookupOptions, callback) => {
    resolveAll(hostname, lookupOptions.family as number | undefined, (error, resolved) => {
      if (error) {
        callback(error, '');
        return;
      }
      const addresses = options.allowPrivateTargets ? resolved : resolved.filter((entry) => isPublicAddress(entry.address));
      const first = addresses[0];
      if (!first) {
        callback(new BlockedTargetError(hostname, resolved[0]?.address) as unknown as NodeJS.ErrnoException, '');
        return;
      }
      if ((lookupOptions as LookupAllOptions).all) callback(null, addresses);
      else callback(null, first.address, first.family);
    });
  };
}

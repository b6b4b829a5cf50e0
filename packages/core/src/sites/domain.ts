import { InputError } from '../errors.js';

/**
 * Normalizes what a person types as a site's address to the spec's domain form: no protocol,
 * no `www.`, no trailing slash, lower case. Anything that is more than a host is refused.
 */
export function normalizeDomain(input: string): string {
  const raw = input.trim();
  if (!raw) throw new InputError('domain is empty');
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `http://${raw}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new InputError(`"${input}" is not a domain`);
  }
  if (url.username || url.password || url.port || url.search || url.hash || (url.pathname !== '/' && url.pathname !== '')) {
    throw new InputError(`"${input}" is not a bare domain: give the host only, without path, port or query`);
  }
  let host = url.hostname.toLowerCase().replace(/\.$/, '');
  if (host.startsWith('www.')) host = host.slice(4);
  if (!/^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/.test(host)) {
    throw new InputError(`"${input}" is not a valid domain`);
  }
  return host;
}

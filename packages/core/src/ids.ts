import { randomBytes, randomUUID } from 'node:crypto';

export type IdKind = 'acct' | 'site' | 'scan' | 'key' | 'wh' | 'evt' | 'dlv' | 'run' | 'dep';

/** A new opaque identifier such as `site_3f1c…`; clients must not parse it. */
export function newId(kind: IdKind): string {
  return `${kind}_${randomUUID().replaceAll('-', '')}`;
}

/** Hex from a CSPRNG; used for webhook secrets. */
export function randomHex(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}

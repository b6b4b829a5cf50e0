import type { RevocationListenerEvents } from '@svc/core';
import type { KeyCache } from './key-cache.js';
import type { KnownKeys } from './known-keys.js';
import type { UnknownKeyCache } from './unknown-key-cache.js';

/**
 * What the API's key caches do with Postgres's key notifications: a revoked key leaves the cache
 * and the filter; a created one empties the negative cache and enters the filter; and cached keys
 * are trusted (and the filter answers "absent") only while notifications are sure to arrive.
 */
export function keyNotificationEvents(caches: { keyCache: KeyCache; unknownKeyCache: UnknownKeyCache; knownKeys: KnownKeys }): RevocationListenerEvents {
  const { keyCache, unknownKeyCache, knownKeys } = caches;
  return {
    onRevoked: (keyId) => {
      keyCache.deleteKey(keyId);
      knownKeys.revoked(keyId);
    },
    onCreated: (keyId) => {
      unknownKeyCache.clear();
      knownKeys.created(keyId);
    },
    onConnectionChange: (listening) => {
      keyCache.setTrusted(listening);
      unknownKeyCache.clear();
      knownKeys.listeningChanged(listening);
    },
  };
}

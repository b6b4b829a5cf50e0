import { connect } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { Db } from '../db/knex.js';

/** An IPv4 address of this machine that is not loopback, or undefined when it has none. */
export function nonLoopbackAddress(): string | undefined {
  for (const addresses of Object.values(networkInterfaces())) {
    for (const address of addresses ?? []) if (!address.internal && address.family === 'IPv4') return address.address;
  }
  return undefined;
}

/** Whether a TCP connection to host:port is accepted, or the error code refusing it (ECONNREFUSED). */
export function tryConnect(host: string, port: number): Promise<'connected' | string> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}

interface TarnPool {
  numUsed(): number;
  numPendingAcquires(): number;
  on(event: 'acquireRequest', listener: () => void): void;
  removeListener(event: 'acquireRequest', listener: () => void): void;
}

/** The pool's own numbers, and a count of the connections asked of it from now on. */
export function watchPool(db: Db): { readonly used: number; readonly pending: number; readonly acquiresAsked: number; stop(): void } {
  const pool = (db.client as { pool: TarnPool }).pool;
  let asked = 0;
  const onAcquire = () => (asked += 1);
  pool.on('acquireRequest', onAcquire);
  return {
    get used() {
      return pool.numUsed();
    },
    get pending() {
      return pool.numPendingAcquires();
    },
    get acquiresAsked() {
      return asked;
    },
    stop: () => pool.removeListener('acquireRequest', onAcquire),
  };
}

/** Takes `count` connections of the pool (a pool busy to its last connection) until release(). */
export async function holdConnections(db: Db, count: number): Promise<{ release(): void }> {
  const client = db.client as { acquireConnection(): Promise<unknown>; releaseConnection(connection: unknown): unknown };
  const held: unknown[] = [];
  for (let i = 0; i < count; i++) held.push(await client.acquireConnection());
  return {
    release: () => {
      for (const connection of held.splice(0)) void client.releaseConnection(connection);
    },
  };
}

import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP proxy in front of a real server, for tests that need the network to fail the way
 * it does in production:
 * - `blackhole()` makes every open connection go silent without closing it, as a NAT or firewall
 *   that forgot the connection does, while new connections still pass;
 * - `cutAfterCommitOf(name)` (Postgres) loses a connection right after a commit, as a Postgres
 *   restart, a failover or a pooler restart can: the next connection that sends a statement whose
 *   name starts with `name` is closed once Postgres has answered that statement with ReadyForQuery
 *   (for a statement run outside a transaction block, the commit is done by then), and none of the
 *   answer reaches the client. Once.
 */
export interface TcpProxy {
  port: number;
  blackhole(): void;
  cutAfterCommitOf(statementNamePrefix: string): void;
  /** The connections cut so far. */
  readonly cuts: number;
  close(): Promise<void>;
}

/** Postgres's ReadyForQuery message type: the server is idle again, its transaction ended. */
const READY_FOR_QUERY = 0x5a;

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const pairs = new Set<{ client: Socket; upstream: Socket; silent: boolean }>();
  let armedWith: string | undefined;
  let cuts = 0;
  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, targetHost);
    const pair = { client, upstream, silent: false };
    pairs.add(pair);
    // While watching, the server's answer is held back and read message by message (type byte,
    // then a length that counts itself): the client never sends a statement before the previous
    // one's ReadyForQuery, so the answer starts on a message boundary.
    let watching = false;
    let answer = Buffer.alloc(0);
    let sent = '';
    client.on('data', (chunk: Buffer) => {
      if (pair.silent) return;
      if (armedWith !== undefined && !watching) {
        // Keep a tail of what was sent, so a name split across two chunks is still seen.
        sent = (sent + chunk.toString('latin1')).slice(-4096);
        if (sent.includes(armedWith)) {
          watching = true;
          armedWith = undefined;
        }
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (pair.silent) return;
      if (!watching) {
        client.write(chunk);
        return;
      }
      answer = Buffer.concat([answer, chunk]);
      for (let at = 0; at + 5 <= answer.length; ) {
        const type = answer[at];
        const length = answer.readUInt32BE(at + 1);
        if (at + 1 + length > answer.length) break;
        if (type === READY_FOR_QUERY) {
          cuts += 1;
          client.destroy();
          upstream.destroy();
          return;
        }
        at += 1 + length;
      }
    });
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end);
    upstream.on('close', end);
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    blackhole() {
      for (const pair of pairs) pair.silent = true;
    },
    cutAfterCommitOf(statementNamePrefix) {
      armedWith = statementNamePrefix;
    },
    get cuts() {
      return cuts;
    },
    async close() {
      for (const pair of pairs) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP proxy in front of Postgres that can lose a connection right after a commit, as
 * a Postgres restart, a failover or a pooler restart can: `cutAfterCommitOf(name)` arms it; the
 * next connection that sends a statement whose name starts with `name` is closed once Postgres
 * has answered that statement with ReadyForQuery (for a statement run outside a transaction
 * block, the commit is done by then), and none of the answer reaches the client. Once.
 */
export interface CommitCuttingProxy {
  port: number;
  cutAfterCommitOf(statementNamePrefix: string): void;
  /** The connections cut so far. */
  readonly cuts: number;
  close(): Promise<void>;
}

/** Postgres's ReadyForQuery message type: the server is idle again, its transaction ended. */
const READY_FOR_QUERY = 0x5a;

export async function startCommitCuttingProxy(targetHost: string, targetPort: number): Promise<CommitCuttingProxy> {
  const sockets = new Set<Socket>();
  let armedWith: string | undefined;
  let cuts = 0;
  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, targetHost);
    sockets.add(client).add(upstream);
    // While watching, the server's answer is held back and read message by message (type byte,
    // then a length that counts itself): the client never sends a statement before the previous
    // one's ReadyForQuery, so the answer starts on a message boundary.
    let watching = false;
    let answer = Buffer.alloc(0);
    let sent = '';
    client.on('data', (chunk: Buffer) => {
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
      sockets.delete(client);
      sockets.delete(upstream);
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
    cutAfterCommitOf(statementNamePrefix) {
      armedWith = statementNamePrefix;
    },
    get cuts() {
      return cuts;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

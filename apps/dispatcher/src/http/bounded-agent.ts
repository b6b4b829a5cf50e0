import { Agent, type AgentOptions } from 'node:https';
import type { Socket } from 'node:net';

/** A destroyed socket stays listed until its 'close': it no longer holds a connection. */
export function liveSockets(pool: NodeJS.ReadOnlyDict<Socket[]>): Socket[] {
  return Object.values(pool).flatMap((sockets) => (sockets ?? []).filter((socket) => !socket.destroyed));
}

/**
 * An agent that never holds more than maxTotal open sockets: opening one more first closes an idle
 * socket (of each host's, the one idle longest). Node's own maxTotalSockets would instead queue the new
 * host's attempt until some idle socket times out, counting that wait in the attempt's
 * timeout. Attempts in flight never exceed the concurrency (at most maxTotal), so an idle
 * socket is there to close whenever the bound is reached.
 */
export class BoundedAgent extends Agent {
  constructor(
    private readonly maxTotal: number,
    options: AgentOptions,
  ) {
    super(options);
  }

  override createConnection(...args: Parameters<Agent['createConnection']>): ReturnType<Agent['createConnection']> {
    const idle = liveSockets(this.freeSockets);
    let open = liveSockets(this.sockets).length + idle.length;
    for (const socket of idle) {
      if (open < this.maxTotal) break;
      socket.destroy();
      open -= 1;
    }
    return super.createConnection(...args);
  }
}

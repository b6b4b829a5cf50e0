import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP proxy in front of a real server. `blackhole()` makes every open connection go
 * silent without closing it — as a NAT or firewall that forgot the connection does — while new
 * connections still pass.
 */
export interface TcpProxy {
  port: number;
  blackhole(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const pairs = new Set<{ client: Socket; upstream: Socket; silent: boolean }>();
  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, targetHost);
    const pair = { client, upstream, silent: false };
    pairs.add(pair);
    client.on('data', (chunk) => {
      if (!pair.silent) upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (!pair.silent) client.write(chunk);
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
    async close() {
      for (const pair of pairs) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

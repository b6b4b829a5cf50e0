import { createServer, request, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request that went through the proxy, with what the API answered it. */
export interface ProxiedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The API's status, and whether it marked the answer a replay (`Idempotent-Replayed: true`). */
  status: number;
  replayed: boolean;
  /** False when the proxy dropped the answer instead of passing it on. */
  answered: boolean;
}

/**
 * A loopback HTTP proxy in front of the real API that can lose an answer the way a network does
 * after a request arrived: `loseNextAnswer()` forwards the next request (of that method), lets the
 * API answer it in full (so whatever the request does is done and committed), then destroys the
 * client's connection without passing a byte of the answer on. The client sees a dropped
 * connection and cannot know whether the request took effect.
 */
export interface AnswerLosingProxy {
  baseUrl: string;
  readonly requests: ProxiedRequest[];
  loseNextAnswer(method?: string): void;
  close(): Promise<void>;
}

export async function startAnswerLosingProxy(target: string): Promise<AnswerLosingProxy> {
  const upstream = new URL(target);
  const requests: ProxiedRequest[] = [];
  const armed: Array<string | undefined> = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const method = req.method ?? 'GET';
      const at = armed.findIndex((wanted) => wanted === undefined || wanted === method);
      const lose = at >= 0;
      if (lose) armed.splice(at, 1);
      const forwarded = request(
        { host: upstream.hostname, port: upstream.port, method, path: req.url, headers: { ...req.headers, host: upstream.host } },
        (answer) => {
          const body: Buffer[] = [];
          answer.on('data', (chunk: Buffer) => body.push(chunk));
          answer.on('end', () => {
            requests.push({
              method,
              path: req.url ?? '/',
              headers: req.headers,
              status: answer.statusCode ?? 0,
              replayed: answer.headers['idempotent-replayed'] === 'true',
              answered: !lose,
            });
            if (lose) {
              req.socket.destroy();
              return;
            }
            res.writeHead(answer.statusCode ?? 502, answer.headers).end(Buffer.concat(body));
          });
        },
      );
      forwarded.on('error', () => req.socket.destroy());
      forwarded.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    requests,
    loseNextAnswer(method) {
      armed.push(method);
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { requireSystemCommand } from '@svc/core/testing';

/** Receiver names the test DNS server answers (dns-server.ts): the certificate covers them. */
export const TEST_DNS_NAMES = ['answering.dns.test'];

/** Bodies no text column can hold as they are: what a hostile or careless receiver answers. */
export const HOSTILE_BODIES: Record<string, Buffer> = {
  // `200 OK` in UTF-16: every other byte is a NUL.
  nul: Buffer.from('{"received":true}', 'utf16le'),
  'invalid-utf8': Buffer.from([0x6f, 0x6b, 0x20, 0xff, 0xfe, 0xc3, 0x28, 0xa0, 0xa1, 0xe2, 0x28, 0xa1, 0xf0, 0x90, 0x28, 0xbc, 0xed, 0xa0, 0x80]),
  // gzip without `content-encoding`: binary bytes, with NULs in the header.
  gzip: gzipSync(Buffer.from('{"received":true,"padding":"' + 'x'.repeat(600) + '"}')),
};

export interface TestCertificate {
  cert: string;
  key: string;
  certPath: string;
  cleanup(): void;
}

/** A self-signed certificate for 127.0.0.1 and localhost, made with openssl for this test run. */
export function makeCertificate(): TestCertificate {
  requireSystemCommand('openssl', 'openssl', "the tests' HTTPS receiver needs a certificate");
  const dir = mkdtempSync(join(tmpdir(), 'svc-receiver-'));
  const certPath = join(dir, 'cert.pem');
  const keyPath = join(dir, 'key.pem');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', keyPath, '-out', certPath, '-days', '2', '-subj', '/CN=localhost',
    '-addext', `subjectAltName=DNS:localhost,IP:127.0.0.1,${TEST_DNS_NAMES.map((name) => `DNS:${name}`).join(',')}`,
  ], { stdio: 'ignore' });
  return {
    cert: readFileSync(certPath, 'utf8'),
    key: readFileSync(keyPath, 'utf8'),
    certPath,
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export interface ReceivedRequest {
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  receivedAt: number;
}

/**
 * A real HTTPS receiver. Paths choose its behaviour:
 * /ok → 200, /fail → 500, /hang → never answers, /slow/<ms> → 200 after <ms>,
 * /redirect → 302 to /ok, /reset → drops the connection,
 * /flaky/<n> → 500 for the first n requests of each delivery id, then 200,
 * /answer/<status>/<kind> → <status> with one of HOSTILE_BODIES as text/plain,
 * and any prefix given to handle() → that handler.
 * answerWith(path, status) overrides any of these for exactly that path (a receiver that breaks or is fixed).
 */
export class Receiver {
  readonly requests: ReceivedRequest[] = [];
  /** TLS connections accepted so far: attempts that reuse keep-alive connections do not add to it. */
  tlsConnections = 0;
  private readonly sockets = new Set<Socket>();
  private readonly perDelivery = new Map<string, number>();
  private readonly overrides = new Map<string, number>();
  private readonly handlers = new Map<string, (req: IncomingMessage, res: ServerResponse, body: Buffer) => void>();
  private readonly server: Server;
  port = 0;

  constructor(certificate: TestCertificate) {
    this.server = createServer({ cert: certificate.cert, key: certificate.key }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const path = req.url ?? '/';
        const deliveryId = String(req.headers['x-service-delivery-id'] ?? '');
        const seen = (this.perDelivery.get(deliveryId) ?? 0) + 1;
        this.perDelivery.set(deliveryId, seen);
        const answer = () => this.requests.push({ path, headers: req.headers, body: Buffer.concat(chunks), receivedAt: Date.now() });
        const override = this.overrides.get(path);
        if (override !== undefined) {
          answer();
          res.writeHead(override, { 'content-type': 'text/plain' }).end(`status ${override}`);
          return;
        }
        for (const [prefix, handler] of this.handlers) {
          if (path.startsWith(prefix)) {
            answer();
            handler(req, res, Buffer.concat(chunks));
            return;
          }
        }
        const hostile = /^\/answer\/(\d{3})\/([a-z0-9-]+)/.exec(path);
        if (hostile && HOSTILE_BODIES[hostile[2]!]) {
          answer();
          res.writeHead(Number(hostile[1]), { 'content-type': 'text/plain' }).end(HOSTILE_BODIES[hostile[2]!]);
          return;
        }
        if (path.startsWith('/hang')) {
          answer();
          return;
        }
        if (path.startsWith('/reset')) {
          answer();
          req.socket.destroy();
          return;
        }
        if (path.startsWith('/redirect')) {
          answer();
          res.writeHead(302, { location: `https://127.0.0.1:${this.port}/ok` }).end();
          return;
        }
        if (path.startsWith('/fail')) {
          answer();
          res.writeHead(500, { 'content-type': 'text/plain' }).end('receiver failure');
          return;
        }
        const flaky = /^\/flaky\/(\d+)/.exec(path);
        if (flaky) {
          answer();
          const failing = seen <= Number(flaky[1]);
          res.writeHead(failing ? 503 : 200).end(failing ? 'not yet' : 'ok');
          return;
        }
        const slow = /^\/slow\/(\d+)/.exec(path);
        if (slow) {
          setTimeout(() => {
            answer();
            res.writeHead(200).end('ok');
          }, Number(slow[1]));
          return;
        }
        answer();
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      });
    });
    this.server.on('secureConnection', () => {
      this.tlsConnections += 1;
    });
    this.server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  /** Answers requests whose path starts with `prefix` with `handler` (after the body is read). */
  handle(prefix: string, handler: (req: IncomingMessage, res: ServerResponse, body: Buffer) => void): this {
    this.handlers.set(prefix, handler);
    return this;
  }

  /** Like receivers that never close an idle keep-alive connection themselves. */
  neverCloseIdleConnections(): this {
    this.server.keepAliveTimeout = 0;
    return this;
  }

  /** TCP connections open right now. */
  openConnections(): number {
    return this.sockets.size;
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    const address = this.server.address();
    this.port = typeof address === 'object' && address ? address.port : 0;
    return this;
  }

  url(path: string, host = '127.0.0.1'): string {
    return `https://${host}:${this.port}${path}`;
  }

  /** From now on, answers every request to exactly this path with this status. */
  answerWith(path: string, status: number): void {
    this.overrides.set(path, status);
  }

  /** Requests whose path starts with the prefix. */
  to(prefix: string): ReceivedRequest[] {
    return this.requests.filter((request) => request.path.startsWith(prefix));
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

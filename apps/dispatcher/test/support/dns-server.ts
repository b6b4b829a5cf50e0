import { createSocket, type Socket } from 'node:dgram';

/**
 * A tiny real DNS server on loopback UDP (RFC 1035): it answers A queries for the names it is
 * given with their IPv4 address, AAAA queries for them with no records, and never answers
 * anything else, like a tenant's name server that is down.
 */
export class TestDnsServer {
  /** Queries received, by lower-case name. */
  readonly queries = new Map<string, number>();
  private readonly socket: Socket = createSocket('udp4');
  port = 0;

  constructor(private readonly answers: Record<string, string>) {
    this.socket.on('message', (message, remote) => {
      const question = parseQuestion(message);
      if (!question) return;
      this.queries.set(question.name, (this.queries.get(question.name) ?? 0) + 1);
      const address = this.answers[question.name];
      if (address === undefined) return;
      this.socket.send(answer(message, question, question.type === 1 ? address : null), remote.port, remote.address);
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.socket.bind(0, '127.0.0.1', resolve));
    this.port = this.socket.address().port;
    return this;
  }

  /** For WEBHOOK_DNS_SERVERS. */
  get server(): string {
    return `127.0.0.1:${this.port}`;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.socket.close(() => resolve()));
  }
}

interface Question {
  name: string;
  type: number;
  /** Offset just past the question (QNAME, QTYPE, QCLASS). */
  end: number;
}

function parseQuestion(message: Buffer): Question | null {
  if (message.length < 12 || message.readUInt16BE(4) < 1) return null;
  const labels: string[] = [];
  let offset = 12;
  while (offset < message.length) {
    const length = message[offset]!;
    offset += 1;
    if (length === 0) break;
    labels.push(message.toString('ascii', offset, offset + length));
    offset += length;
  }
  if (offset + 4 > message.length) return null;
  return { name: labels.join('.').toLowerCase(), type: message.readUInt16BE(offset), end: offset + 4 };
}

function answer(query: Buffer, question: Question, ipv4: string | null): Buffer {
  const header = Buffer.alloc(12);
  query.copy(header, 0, 0, 2); // the query's id
  header.writeUInt16BE(0x8180 | (query.readUInt16BE(2) & 0x0100), 2); // response, recursion available, NOERROR
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(ipv4 ? 1 : 0, 6);
  const questionBytes = query.subarray(12, question.end);
  if (!ipv4) return Buffer.concat([header, questionBytes]);
  const record = Buffer.alloc(16);
  record.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
  record.writeUInt16BE(1, 2); // A
  record.writeUInt16BE(1, 4); // IN
  record.writeUInt32BE(5, 6); // TTL
  record.writeUInt16BE(4, 10);
  ipv4.split('.').forEach((part, i) => record.writeUInt8(Number(part), 12 + i));
  return Buffer.concat([header, questionBytes, record]);
}

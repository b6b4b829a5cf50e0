// The benchmark's webhook receiver: an HTTPS server (self-signed certificate, keep-alive) in its
// own process, so its CPU does not distort the publisher's timers. It records every request
// (X-Service-Delivery-Id, receive time, attempt number seen for that id) and answers the parent
// over IPC.
//
// Paths: /ok → 200; /flaky/<k> → 503 for the first k requests of each delivery id, then 200;
// /slow/<ms> → 200, answered <ms> milliseconds after the request arrived (a receiver that does
// its work before answering, as real ones do: case 2b's dispatcher-bound regime); /hang → no
// answer until the parent sends `release` (a receiver that went dark: case 9's noisy neighbour).
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';

if (!process.send) {
  console.error('receiver.mjs is started by bench/run.mjs over IPC');
  process.exit(2);
}

const nowMs = () => performance.timeOrigin + performance.now();

/** Per request: [deliveryId, receivedAtMs, nthForThisId, status]. */
let records = [];
let perDelivery = new Map();
let waiters = [];
/** TLS connections accepted since the last reset (keep-alive reuse shows as few of them). */
let connections = 0;
/** When the last answer was written (for /slow, the end of the last attempt as the sender sees it). */
let lastAnsweredAt = null;
/** Responses of /hang requests, held open until `release`. */
let hanging = new Set();

function checkWaiters() {
  if (waiters.length === 0) return;
  waiters = waiters.filter((w) => {
    const value = w.unique ? perDelivery.size : records.length;
    if (value < w.count) return true;
    clearTimeout(w.timer);
    w.resolve({ reached: true, count: value, lastAt: records[records.length - 1]?.[1] ?? null });
    return false;
  });
}

const server = createServer(
  { cert: readFileSync(process.env.BENCH_CERT), key: readFileSync(process.env.BENCH_KEY) },
  (req, res) => {
    const at = nowMs();
    const id = String(req.headers['x-service-delivery-id'] ?? '');
    const seen = (perDelivery.get(id) ?? 0) + 1;
    perDelivery.set(id, seen);
    const path = req.url ?? '/';
    let status = 200;
    const flaky = /^\/flaky\/(\d+)/.exec(path);
    const slow = /^\/slow\/(\d+)/.exec(path);
    const hang = path.startsWith('/hang');
    if (flaky && seen <= Number(flaky[1])) status = 503;
    else if (!flaky && !slow && !hang && !path.startsWith('/ok')) status = 404;
    records.push([id, at, seen, status]);
    const answer = () => {
      res.writeHead(status, { 'content-type': 'text/plain', 'content-length': status === 200 ? 2 : 7 });
      res.end(status === 200 ? 'ok' : 'not yet');
      lastAnsweredAt = nowMs();
    };
    req.resume();
    req.on('end', () => {
      if (slow) setTimeout(answer, Math.max(0, at + Number(slow[1]) - nowMs()));
      else if (hang) {
        hanging.add(answer);
        res.on('close', () => hanging.delete(answer));
      } else answer();
    });
    checkWaiters();
  },
);
server.on('secureConnection', () => connections++);
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;

process.on('message', (message) => {
  const { id, cmd } = message;
  const reply = (body) => process.send({ id, ...body });
  switch (cmd) {
    case 'reset':
      records = [];
      perDelivery = new Map();
      connections = 0;
      lastAnsweredAt = null;
      reply({ ok: true });
      break;
    case 'release': {
      // Answers every held /hang request (200), so the attempts end now, not at their timeout.
      const held = [...hanging];
      hanging = new Set();
      for (const answer of held) answer();
      reply({ released: held.length });
      break;
    }
    case 'hanging':
      reply({ hanging: hanging.size });
      break;
    case 'count':
      reply({ count: records.length, unique: perDelivery.size, connections, lastAt: records[records.length - 1]?.[1] ?? null, lastAnsweredAt });
      break;
    case 'wait': {
      // Resolves when `count` requests (or distinct delivery ids with `unique`) have arrived.
      const waiter = { count: message.count, unique: Boolean(message.unique), resolve: reply };
      waiter.timer = setTimeout(() => {
        waiters = waiters.filter((w) => w !== waiter);
        reply({ reached: false, count: waiter.unique ? perDelivery.size : records.length, lastAt: records[records.length - 1]?.[1] ?? null });
      }, message.timeoutMs);
      waiters.push(waiter);
      checkWaiters();
      break;
    }
    case 'dump':
      reply({ records });
      break;
    case 'close':
      server.closeAllConnections?.();
      server.close(() => reply({ ok: true }));
      break;
    default:
      reply({ error: `unknown command ${cmd}` });
  }
});

// Never outlive the benchmark that started it.
process.on('disconnect', () => process.exit(0));

server.listen(0, '127.0.0.1', () => {
  process.send({ type: 'ready', port: server.address().port });
});

// The dispatcher baseline: a plain got loop POSTing given bodies to the receiver with a fixed
// concurrency over keep-alive, signing each body like any webhook sender must. It stays alive
// between runs (like the dispatcher, whose sockets stay pooled) and is driven over IPC.
// The receiver's self-signed CA comes from NODE_EXTRA_CA_CERTS, as for the dispatcher.
import { Agent, request } from 'node:https';
import got from 'got';
import { signBody } from '@svc/core';

if (!process.send) {
  console.error('baseline-got.mjs is started by bench/run.mjs over IPC');
  process.exit(2);
}

const nowMs = () => performance.timeOrigin + performance.now();
const agent = new Agent({ keepAlive: true });

/** The same POST with Node's own https (for the ADR: what got costs per POST beside it). */
function postWithHttps(url, bytes, headers) {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', agent, headers: { ...headers, 'content-length': bytes.length }, timeout: 10_000 }, (res) => {
      res.on('data', () => undefined);
      res.on('end', () => resolve({ statusCode: res.statusCode }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end(bytes);
  });
}

async function run({ url, items, secret, concurrency, idPrefix, client = 'got' }) {
  let next = 0;
  let errors = 0;
  const statuses = {};
  const startedAt = nowMs();
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      const { type, body } = items[i];
      const bytes = Buffer.from(body, 'utf8');
      try {
        const headers = {
          'content-type': 'application/json',
          'user-agent': 'Service-Webhooks/1.0',
          'x-service-signature': signBody(bytes, secret),
          'x-service-event': type,
          'x-service-delivery-id': `${idPrefix}${i}`,
        };
        const response = client === 'https' ? await postWithHttps(url, bytes, headers) : await got.post(url, {
          body: bytes,
          headers,
          agent: { https: agent },
          retry: { limit: 0 },
          throwHttpErrors: false,
          followRedirect: false,
          timeout: { request: 10_000 },
        });
        statuses[response.statusCode] = (statuses[response.statusCode] ?? 0) + 1;
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { startedAt, finishedAt: nowMs(), errors, statuses };
}

process.on('message', (message) => {
  if (message.cmd === 'run') {
    run(message).then(
      (result) => process.send({ id: message.id, ...result }),
      (error) => process.send({ id: message.id, error: String(error) }),
    );
  } else if (message.cmd === 'close') {
    agent.destroy();
    process.send({ id: message.id, ok: true });
  }
});
process.on('disconnect', () => process.exit(0));
process.send({ type: 'ready' });

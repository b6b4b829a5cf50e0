// Receives webhook deliveries next to the nightly job: verifies each one, drops repeats by
// delivery id, answers at once, and prints the event.
//
//   WEBHOOK_SECRET=<the secret returned when the subscription was created> PORT=8080 node receive.mjs
//
// Put it behind your HTTPS endpoint (deliveries go only to https:// urls).
import { createServer } from 'node:http';
import { createWebhookHandler, isEventOfType } from '@site-visibility/client';

const secret = process.env.WEBHOOK_SECRET;
if (!secret) {
  console.error('set WEBHOOK_SECRET to the subscription secret');
  process.exit(2);
}

const handle = createWebhookHandler({
  secret,
  onEvent: (event, { deliveryId }) => {
    if (isEventOfType(event, 'scan.completed')) {
      console.log(JSON.stringify({ deliveryId, scan: event.data.scanId, site: event.data.domain, score: event.data.score }));
    } else {
      console.log(JSON.stringify({ deliveryId, event: event.event }));
    }
  },
});

const server = createServer((req, res) => {
  if (req.method === 'POST' && req.url === '/webhooks') return handle(req, res);
  res.writeHead(404).end();
});
server.listen(Number(process.env.PORT ?? 8080), () => console.error(`listening on ${server.address().port}`));
process.on('SIGTERM', () => server.close());
process.on('SIGINT', () => server.close());

// The image's HEALTHCHECK: asks /healthz of whichever of the service's processes the container
// runs (its PID 1): the API on PORT, the dispatcher on its metrics port (METRICS_PORT, default
// 9465). HEALTHCHECK_PORT overrides both. A one-shot command (migrate, svc) has nothing to ask.
'use strict';
const { readFileSync } = require('node:fs');

let command = '';
try {
  command = readFileSync('/proc/1/cmdline', 'utf8').split('\0').join(' ');
} catch {
  // Not Linux, or no /proc: only HEALTHCHECK_PORT can say.
}
const port =
  process.env.HEALTHCHECK_PORT ||
  (command.includes('apps/dispatcher/') ? process.env.METRICS_PORT || '9465' : command.includes('apps/api/') ? process.env.PORT || '3000' : '');
if (!port) process.exit(0);

fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2500) }).then(
  (response) => process.exit(response.ok ? 0 : 1),
  () => process.exit(1),
);

/** The dispatcher's test harness, for other workspaces' end-to-end stories (`@svc/dispatcher/test-support`). */
export * from './harness.js';
export * from './delivery-probe.js';
export * from './receiver.js';

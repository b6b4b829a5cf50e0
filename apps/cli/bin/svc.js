#!/usr/bin/env node
// A committed shim so that npm can link the bin before the TypeScript build has run.
await import('../dist/src/main.js');

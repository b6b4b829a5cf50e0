#!/usr/bin/env node
// A committed shim so that npm can link the bin before the build has run. It runs the bundle
// (apps/cli/scripts/bundle.mjs, made by `npm run build`): one file instead of hundreds of
// modules keeps a command's start-up CPU low.
await import('../dist/bundle/svc.mjs');

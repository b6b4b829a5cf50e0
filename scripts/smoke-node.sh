#!/usr/bin/env bash
# Runs the release on other Node.js majors: for each one, builds the release folder, migrates,
# starts an API and a dispatcher on that Node, delivers a signed event and stops them
# (apps/dispatcher/test/release.test.ts with SMOKE_NODE). The suite itself runs on the machine's Node.
#
#   scripts/smoke-node.sh 22 24        (after npm ci; .ci/run runs it after npm test)
#
# The binaries come from the npm registry: node-linux-<arch>, the package the `node` package installs.
set -euo pipefail
cd "$(dirname "$0")/.."
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64) arch=arm64 ;;
  *) echo "smoke-node: no Node.js binary package for $(uname -m)" >&2; exit 1 ;;
esac
for major in "$@"; do
  prefix="node_modules/.cache/smoke-node/$major"
  if [ ! -x "$prefix/node_modules/node-linux-$arch/bin/node" ]; then
    npm install --prefix "$prefix" --no-save --no-package-lock --no-audit --no-fund --loglevel=error "node-linux-$arch@$major" >/dev/null
  fi
  node_bin="$(pwd)/$prefix/node_modules/node-linux-$arch/bin/node"
  echo "smoke: the release on node $("$node_bin" --version)"
  SMOKE_NODE="$node_bin" SMOKE_NODE_MAJOR="$major" \
    node --experimental-vm-modules --no-warnings=ExperimentalWarning node_modules/jest/bin/jest.js apps/dispatcher/dist/test/release.test.js
done

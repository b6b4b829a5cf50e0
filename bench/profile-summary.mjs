// Summarizes a V8 .cpuprofile (from `node --cpu-prof`, which `npm run bench -- --cpu-prof`
// passes to the service's processes): top functions by self time, and self time per package.
//
//   node bench/profile-summary.mjs <file.cpuprofile> [top]
//   node bench/profile-summary.mjs <file.cpuprofile> --callers=<functionName> [depth]   (who calls it, by self time)
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';

function where(url) {
  if (!url) return '(native/V8)';
  if (url.startsWith('node:')) return 'node core';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1];
  const ours = /\/(apps\/[^/]+|packages\/[^/]+|bench)\//.exec(url);
  return ours ? ours[1] : url.replace(/^file:\/\//, '');
}

function shortUrl(url) {
  if (!url) return '';
  return url.replace(/^file:\/\//, '').replace(/^.*node_modules\//, '').replace(/^.*\/(apps|packages|bench)\//, '$1/');
}

export function summarizeProfile(file, top = 20) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i];
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const parent = new Map();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  // Attribute each sample to the nearest frame that belongs to a package or to our code, so a
  // socket write made for pg counts as pg, not as "native".
  const owner = new Map();
  const ownerOf = (id) => {
    if (owner.has(id)) return owner.get(id);
    const node = byId.get(id);
    const { url, functionName } = node.callFrame;
    let result;
    if (functionName === '(garbage collector)' || functionName === '(program)' || functionName === '(idle)') result = functionName;
    else if (url && !url.startsWith('node:')) result = where(url);
    else result = parent.has(id) ? ownerOf(parent.get(id)) : '(no JS caller: event loop, I/O, V8)';
    
    owner.set(id, result);
    return result;
  };
  let total = 0;
  const fns = new Map();
  const owners = new Map();
  const pkgs = new Map();
  let idle = 0;
  for (const [id, micros] of self) {
    const node = byId.get(id);
    const { functionName, url, lineNumber } = node.callFrame;
    total += micros;
    const own = ownerOf(id);
    if (own !== '(idle)') owners.set(own, (owners.get(own) ?? 0) + micros);
    if (functionName === '(idle)') {
      idle += micros;
      continue;
    }
    const key = `${functionName || '(anonymous)'} ${shortUrl(url)}${url ? `:${lineNumber + 1}` : ''}`;
    fns.set(key, (fns.get(key) ?? 0) + micros);
    const pkg = functionName === '(garbage collector)' ? '(garbage collector)' : functionName === '(program)' ? '(program)' : where(url);
    pkgs.set(pkg, (pkgs.get(pkg) ?? 0) + micros);
  }
  const busy = total - idle;
  const pct = (v) => `${((100 * v) / busy).toFixed(1).padStart(5)}%`;
  const lines = [`== ${basename(file)}: ${(total / 1e6).toFixed(1)} s profiled, ${(busy / 1e6).toFixed(1)} s busy (${((100 * busy) / total).toFixed(0)}%)`];
  lines.push('   self time by package (share of busy time):');
  for (const [pkg, v] of [...pkgs].sort((a, b) => b[1] - a[1]).slice(0, 16)) lines.push(`   ${pct(v)}  ${(v / 1e3).toFixed(0).padStart(7)} ms  ${pkg}`);
  lines.push('   time attributed to the nearest package or app frame on the stack (node core and native calls count for their caller):');
  for (const [pkg, v] of [...owners].sort((a, b) => b[1] - a[1]).slice(0, 16)) lines.push(`   ${pct(v)}  ${(v / 1e3).toFixed(0).padStart(7)} ms  ${pkg}`);
  lines.push(`   top ${top} functions by self time:`);
  for (const [fn, v] of [...fns].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`   ${pct(v)}  ${(v / 1e3).toFixed(0).padStart(7)} ms  ${fn}`);
  return lines.join('\n');
}

/** The call chains (depth frames up) under which `name` spends its self time. */
export function callersOf(file, name, depth = 8) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const self = new Map();
  profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const chains = new Map();
  for (const node of profile.nodes) {
    if (node.callFrame.functionName !== name || !self.get(node.id)) continue;
    const chain = [];
    for (let cur = parent.get(node.id), d = 0; cur !== undefined && d < depth; cur = parent.get(cur), d++) {
      const frame = byId.get(cur).callFrame;
      chain.push(`${frame.functionName || '(anonymous)'} ${shortUrl(frame.url)}${frame.url ? `:${frame.lineNumber + 1}` : ''}`);
    }
    const key = chain.join('\n        <- ');
    chains.set(key, (chains.get(key) ?? 0) + self.get(node.id));
  }
  return [...chains]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 10)
    .map(([chain, micros]) => `${(micros / 1e3).toFixed(0).padStart(6)} ms  <- ${chain}`)
    .join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [file, second, third] = process.argv.slice(2);
  if (!file) {
    console.error('usage: node bench/profile-summary.mjs <file.cpuprofile> [top | --callers=<function> [depth]]');
    process.exit(2);
  }
  if (second?.startsWith('--callers=')) console.log(callersOf(file, second.slice('--callers='.length), Number(third ?? 8)));
  else console.log(summarizeProfile(file, Number(second ?? 25)));
}

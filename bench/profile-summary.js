#!/usr/bin/env node
// Summarises a V8 .cpuprofile (from `BENCH_PROFILE=1 npm run bench`, or any `node --cpu-prof`):
// time by subsystem (HTTP/Koa, JSON-RPC, auth, gRPC, PostgreSQL, metrics, logging…), by package or
// source file, by function, and inclusive time. Usage:
//
//   node bench/profile-summary.js <file.cpuprofile> [options]
//     --from <ms> --to <ms>   only samples in this window of the profile (skip start-up, warm-up)
//     --per-request <n>       n requests were served in the window: also print µs per request
//     --exclude <fn,fn>       drop samples whose leaf is one of these, e.g. "writev,(idle)"
//     --callers <fn>          which package/app code the time inside <fn> (e.g. writev) served
//     --focus <substring>     inclusive time of the functions matching it only
//     --top <n>               rows per table (default 25)
//
// V8 samples wall time. On a busy machine the time a process spends descheduled lands on
// whatever was on its stack, typically the writev that woke the peer it wrote to (the load
// generator, a PostgreSQL backend); `--exclude "writev,(idle)"` gives a CPU-like view.

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values: opts, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    from: { type: 'string', default: '0' },
    to: { type: 'string' },
    'per-request': { type: 'string' },
    exclude: { type: 'string', default: '' },
    callers: { type: 'string' },
    focus: { type: 'string' },
    top: { type: 'string', default: '25' },
  },
});
const file = positionals[0];
if (!file) {
  console.error('usage: node bench/profile-summary.js <file.cpuprofile> [--from ms] [--to ms] [--per-request n] [--exclude fn,fn] [--callers fn] [--focus text] [--top n]');
  process.exit(1);
}
const TOP = Number(opts.top);
const FROM_MS = Number(opts.from);
const TO_MS = opts.to === undefined ? Infinity : Number(opts.to);
const PER_REQUEST = Number(opts['per-request'] ?? 0);
const EXCLUDE = new Set(opts.exclude.split(',').filter(Boolean));

// Subsystems: every sample is charged to the nearest frame (from the leaf up) that belongs to a
// known package or to our code, so node internals (sockets, http2, streams, syscalls) count for
// whoever called them. The first matching line wins for a frame.
const SUBSYSTEMS = [
  ['PostgreSQL client (pg, pool, protocol, stores)', /^(pg|pg-pool|pg-protocol|pg-types|pgpass|postgres-[a-z]+)$|^libs\/runtime\/db\/|^services\/[^/]+\/store\.js$/],
  ['gRPC (grpc-js, http2, protobuf, our client/server wrappers)', /^@grpc\/|^@bufbuild\/|^node:internal\/http2|^libs\/runtime\/grpc\/|^libs\/proto\//],
  ['auth (API key → Redis cache)', /^@redis\/|^redis$|^libs\/runtime\/kv\/|^services\/gateway\/auth\.js$|^cluster-key-slot$/],
  ['JSON-RPC handling (envelope, params/zod, route, views)', /^services\/gateway\/(jsonrpc|route|params|methods|views|errors|upstreams)(\.js$|\/)|^zod$/],
  ['HTTP server + Koa (incl. response writes)', /^koa|^services\/gateway\/app\.js$|^node:_http_|^(on-finished|ee-first|delegates|statuses|content-type|mime-types|vary|only|http-errors|cookies|accepts|fresh|type-is|encodeurl|escape-html|destroy|parseurl)$/],
  ['workspace service logic', /^services\/workspace\//],
  ['identity service logic', /^services\/identity\//],
  ['secrets service logic', /^services\/secrets\//],
  ['metrics (prom-client)', /^prom-client$|^libs\/runtime\/metrics\.js$|^tdigest$|^bintrees$/],
  ['logging (pino)', /^pino|^sonic-boom$|^fast-redact$|^libs\/runtime\/logger\.js$/],
];

const profile = JSON.parse(readFileSync(file, 'utf8'));
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const stackOf = function* (id) {
  for (let cur = id; cur !== undefined; cur = parent.get(cur)) yield nodes.get(cur);
};

// Self time per profile node; timeDeltas[i] is the time elapsed before sample i.
const selfUs = new Map();
let t = profile.startTime;
let totalUs = 0;
for (let i = 0; i < profile.samples.length; i++) {
  const dt = profile.timeDeltas[i] ?? 0;
  t += dt;
  const ms = (t - profile.startTime) / 1000;
  if (ms < FROM_MS || ms > TO_MS) continue;
  const id = profile.samples[i];
  if (EXCLUDE.has(nodes.get(id).callFrame.functionName)) continue;
  selfUs.set(id, (selfUs.get(id) ?? 0) + dt);
  totalUs += dt;
}
if (!totalUs) {
  console.error('No samples in that window.');
  process.exit(1);
}

/** Package name, our own source file (services/<pkg>/<file>), node: module, or a (pseudo) frame. */
function area(n) {
  const { url, functionName } = n.callFrame;
  if (!url) {
    if (functionName === '(garbage collector)') return '(gc)';
    if (functionName === '(idle)') return '(idle)';
    if (functionName === '(program)') return '(program: native/V8 outside JS)';
    return `(native) ${functionName}`;
  }
  // Our packages, also when run from a copy under some node_modules/@agenthub/.
  const own = /(?:node_modules\/@agenthub\/|(?:services|libs)\/)([^/]+)\/dist\/(.*)$/.exec(url);
  if (own) return `${['proto', 'runtime', 'testing'].includes(own[1]) ? 'libs' : 'services'}/${own[1]}/${own[2]}`;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (pkg) return pkg[1];
  if (url.startsWith('node:internal/')) return url.split('/').slice(0, 3).join('/');
  return url.replace(/^file:\/\//, '');
}
const isCode = (a) => !a.startsWith('node:') && !a.startsWith('(');
const label = (n) => {
  const { functionName, url, lineNumber } = n.callFrame;
  const where = url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/((?:services|libs)\/)/, '$1');
  return `${functionName || '(anonymous)'}  ${where}${url ? `:${lineNumber + 1}` : ''}`;
};
const fmt = (us) =>
  `${((100 * us) / totalUs).toFixed(1).padStart(5)}%` + (PER_REQUEST ? `  ${(us / PER_REQUEST).toFixed(0).padStart(5)} µs/req` : '') + `  ${(us / 1000).toFixed(0).padStart(6)} ms`;
const add = (map, key, us) => map.set(key, (map.get(key) ?? 0) + us);
function table(title, map, rows = TOP) {
  console.log(`\n${title}`);
  for (const [key, us] of [...map].sort((a, b) => b[1] - a[1]).slice(0, rows)) console.log(`  ${fmt(us)}  ${key}`);
}

const bySubsystem = new Map();
const byArea = new Map();
const byFunction = new Map();
const inclusive = new Map();
const callers = new Map();
let underCallers = 0;
for (const [id, us] of selfUs) {
  const leaf = nodes.get(id);
  add(byArea, area(leaf), us);
  add(byFunction, label(leaf), us);

  let subsystem;
  for (const n of stackOf(id)) {
    const a = area(n);
    subsystem = SUBSYSTEMS.find(([, re]) => re.test(a))?.[0];
    if (subsystem) break;
  }
  const leafArea = area(leaf);
  subsystem ??= leafArea.startsWith('(native)') ? '(native, no JS caller)' : leafArea.startsWith('(') ? leafArea : `other: ${leafArea.startsWith('node:') ? 'node internals (event loop, streams, timers)' : leafArea}`;
  add(bySubsystem, subsystem, us);

  const seen = new Set();
  for (const n of stackOf(id)) {
    const key = label(n);
    if (!seen.has(key)) {
      seen.add(key);
      add(inclusive, key, us);
    }
  }

  if (opts.callers) {
    let inside = false;
    let owner;
    for (const n of stackOf(id)) {
      if (n.callFrame.functionName === opts.callers) inside = true;
      if (inside && isCode(area(n))) {
        owner = area(n);
        break;
      }
    }
    if (inside) {
      add(callers, owner ?? '(node internals only)', us);
      underCallers += us;
    }
  }
}

const window = `${FROM_MS} ms – ${TO_MS === Infinity ? 'end' : `${TO_MS} ms`}`;
console.log(`${file}\n${(totalUs / 1e6).toFixed(2)} s sampled (${window})${EXCLUDE.size ? `, excluding ${[...EXCLUDE].join(', ')}` : ''}${PER_REQUEST ? `, ${PER_REQUEST} requests` : ''}`);
table('By subsystem (each sample charged to the nearest package/app frame on its stack)', bySubsystem);
table('Self time by area (package / source file)', byArea);
table('Self time by function', byFunction);
const focused = opts.focus ? new Map([...inclusive].filter(([k]) => k.includes(opts.focus))) : inclusive;
table(`Inclusive time${opts.focus ? ` (functions matching "${opts.focus}")` : ''}`, focused);
if (opts.callers) table(`Time inside ${opts.callers} (${fmt(underCallers).trim()}), by the package/app code it served`, callers);

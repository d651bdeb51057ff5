#!/usr/bin/env node
// Benchmark: `x-hub/workspace.secrets.get` and `x-hub/workspace.secrets.set` through the whole hub
// (HTTP gateway → gRPC secrets service → gRPC ResolveAccess on the workspace service →
// PostgreSQL; AES-256-GCM unwrap + open per get, seal + outbox row per set), against
// `x-hub/workspace.get` measured in the same run on the same hub. The issue's target: secrets.get
// within 10% of workspace.get (ratio ≥ 0.9), i.e. the crypto is not the bottleneck.
//
//   npm run build && node bench/secrets.js
//   BENCH_DURATION=20 node bench/secrets.js
//
// Settings (environment):
//   BENCH_DURATION     measured seconds per run (default 10)
//   BENCH_WARMUP       warm-up seconds before each run, not measured (default 3)
//   BENCH_CONNECTIONS  concurrent keep-alive connections (default 32)
//   BENCH_ROUNDS       workspace.get and secrets.get are measured alternately this many times
//                      each, and averaged, so drift on a shared machine hits both alike (default 2)
//   BENCH_VALUE_BYTES  size of the secret value (default 64); sets cycle over 32 keys
//   BENCH_PG_URL       PostgreSQL admin URL (default postgres://postgres@127.0.0.1:5432/postgres)
//   BENCH_REDIS_URL    Redis URL (default redis://127.0.0.1:6379)
//   BENCH_HUB_ENV      extra hub settings, "NAME=value NAME=value"
//
// The hub runs as its own node process (`agenthub serve all`) on a fresh database and Redis
// prefix, both removed afterwards. Results go to bench/results/secrets.json.
// Exit status: 0 when every run measured cleanly, whatever the ratio (PASS or BELOW TARGET is
// printed); 1 when a run had failures or setup failed; 2 when PostgreSQL or Redis is unreachable.

import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { envNumber, fmt, freshHubSettings, log, parseHubEnv, processTicks, round, rpc, runBench, startHubProcess, TICKS_PER_SECOND } from './lib.js';

const require = createRequire(import.meta.url);
const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');
const RESULTS_DIR = join(HERE, 'results');
const TARGET_RATIO = 0.9;
const SET_KEYS = 32;


function settings() {
  const hubEnv = parseHubEnv();
  return {
    duration: envNumber('BENCH_DURATION', 10, 1),
    warmup: envNumber('BENCH_WARMUP', 3, 0),
    connections: Math.round(envNumber('BENCH_CONNECTIONS', 32, 1)),
    rounds: Math.round(envNumber('BENCH_ROUNDS', 2, 1)),
    valueBytes: Math.round(envNumber('BENCH_VALUE_BYTES', 64, 1)),
    hubEnv,
    pgUrl: process.env.BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
    redisUrl: process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379',
  };
}

async function run(cleanups) {
  const opts = settings();
  log('AgentHub benchmark: x-hub/workspace.secrets.get and .set vs x-hub/workspace.get, same hub, same run');
  log(`  ${opts.connections} connections, ${opts.warmup} s warm-up + ${opts.duration} s measured per run, ${opts.rounds} round(s); node ${process.version}, ${cpus().length} CPUs`);
  const { id, adminToken, env } = await freshHubSettings(cleanups, opts);
  const hub = await startHubProcess(ROOT, { ...env, HUB_ADMIN_TOKEN: adminToken, ...opts.hubEnv });
  cleanups.push(() => hub.stop());
  log(`  hub up at ${hub.url}`);

  // An agent, its workspace and one secret.
  const agent = await rpc(hub.url, '/admin', adminToken, 'agents.create', { tenant_id: `bench-${id}`, name: 'bench agent', create_tenant: true });
  if (agent.error) throw new Error(`agents.create failed: ${JSON.stringify(agent.error)}`);
  const apiKey = agent.result.api_key;
  const created = await rpc(hub.url, '/a2a', apiKey, 'x-hub/workspace.create', { name: 'bench workspace' });
  if (created.error) throw new Error(`x-hub/workspace.create failed: ${JSON.stringify(created.error)}`);
  const workspaceId = created.result.workspace.id;
  const value = randomBytes(opts.valueBytes).toString('base64').slice(0, opts.valueBytes);
  const body = (method, params) => JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
  const scenarios = {
    'workspace.get': body('x-hub/workspace.get', { workspace_id: workspaceId }),
    'secrets.get': body('x-hub/workspace.secrets.get', { workspace_id: workspaceId, key: 'BENCH_SECRET' }),
    'secrets.set': body('x-hub/workspace.secrets.set', { workspace_id: workspaceId, key: 'BENCH_SECRET', value }),
  };
  // Sets spread over SET_KEYS keys, one per connection at a time, so the run measures the write
  // path rather than 32 writers queueing for one row's lock.
  const setBodies = Array.from({ length: SET_KEYS }, (_, i) =>
    body('x-hub/workspace.secrets.set', { workspace_id: workspaceId, key: `BENCH_SET_${i}`, value }),
  );
  for (const name of ['secrets.set', 'secrets.get', 'workspace.get']) {
    const check = await rpc(hub.url, '/a2a', apiKey, null, null, scenarios[name]);
    if (check.error || !check.result) throw new Error(`a single ${name} through the hub failed: ${JSON.stringify(check)}`);
  }
  const got = await rpc(hub.url, '/a2a', apiKey, null, null, scenarios['secrets.get']);
  if (got.result.value !== value) throw new Error('secrets.get did not return the value that was set');
  log(`  workspace ${workspaceId}, secret BENCH_SECRET of ${opts.valueBytes} bytes`);

  // workspace.get and secrets.get alternate, so a busy neighbour skews both alike; set goes last
  // (each one adds an outbox row).
  const runs = { 'workspace.get': [], 'secrets.get': [], 'secrets.set': [] };
  for (let round = 1; round <= opts.rounds; round += 1) {
    for (const name of ['workspace.get', 'secrets.get']) {
      runs[name].push(await measure(`${name} #${round}`, hub, apiKey, scenarios[name], opts));
    }
  }
  runs['secrets.set'].push(await measure('secrets.set', hub, apiKey, setBodies, opts));

  const summary = Object.fromEntries(Object.entries(runs).map(([name, list]) => [name, combine(list)]));
  const ws = summary['workspace.get'];
  const get = summary['secrets.get'];
  const valid = Object.values(summary).every((s) => s.valid);
  const ratio = ws.valid && get.valid ? get.requestsPerSec / ws.requestsPerSec : null;
  const cpuRatio = ws.cpuMsPerRequest && get.cpuMsPerRequest ? ws.cpuMsPerRequest / get.cpuMsPerRequest : null;

  const rows = [
    ['', 'req/s', 'p50 ms', 'p99 ms', 'requests', 'failed', 'hub CPU ms/req'],
    ...Object.entries(summary).map(([name, s]) => [
      `x-hub/${name.startsWith('secrets') ? `workspace.${name}` : name}`,
      s.valid ? fmt(s.requestsPerSec) : 'INVALID',
      s.valid ? s.p50.toFixed(2) : '-',
      s.valid ? s.p99.toFixed(2) : '-',
      fmt(s.requests),
      fmt(s.failed),
      s.cpuMsPerRequest == null ? '-' : s.cpuMsPerRequest.toFixed(3),
    ]),
  ];
  const widths = rows[0].map((_, c) => Math.max(...rows.map((row) => String(row[c]).length)));
  const line = (row) => row.map((cell, c) => (c === 0 ? String(cell).padEnd(widths[c]) : String(cell).padStart(widths[c]))).join('   ');
  log('');
  log(line(rows[0]));
  log(widths.map((w) => '-'.repeat(w)).join('   '));
  for (const row of rows.slice(1)) log(line(row));
  log('');
  if (ratio !== null) {
    log(`ratio secrets.get/workspace.get = ${ratio.toFixed(3)}   target ≥ ${TARGET_RATIO}   ${ratio >= TARGET_RATIO ? 'PASS' : 'BELOW TARGET'}`);
    if (cpuRatio !== null) log(`hub CPU per request, workspace.get/secrets.get = ${cpuRatio.toFixed(3)} (1.0 = same cost; machine load affects it less than req/s)`);
  } else {
    log('ratio: not computed (a run was invalid)');
  }

  const report = {
    benchmark: 'secrets',
    date: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
    connections: opts.connections,
    warmupSeconds: opts.warmup,
    durationSeconds: opts.duration,
    rounds: opts.rounds,
    valueBytes: opts.valueBytes,
    hubEnv: opts.hubEnv,
    results: summary,
    runs,
    ratio,
    cpuRatio,
    target: TARGET_RATIO,
    verdict: ratio === null ? 'INVALID' : ratio >= TARGET_RATIO ? 'PASS' : 'BELOW TARGET',
  };
  await mkdir(RESULTS_DIR, { recursive: true });
  await writeFile(join(RESULTS_DIR, 'secrets.json'), `${JSON.stringify(report, null, 2)}\n`);
  log(`Results written to ${join('bench', 'results', 'secrets.json')}`);
  if (!valid) for (const l of hub.logTail()) console.error(`  hub log: ${l}`);
  return valid ? 0 : 1;
}

/** Averages the rounds of one scenario; invalid if any round was. */
function combine(list) {
  const valid = list.every((r) => r.valid);
  const mean = (pick) => round(list.reduce((sum, r) => sum + (pick(r) ?? 0), 0) / list.length, 3);
  return {
    valid,
    requests: list.reduce((sum, r) => sum + r.requests, 0),
    failed: list.reduce((sum, r) => sum + r.failed, 0),
    requestsPerSec: round(mean((r) => r.requestsPerSec), 0),
    p50: mean((r) => r.p50),
    p99: mean((r) => r.p99),
    cpuMsPerRequest: list.every((r) => r.cpuMsPerRequest != null) ? mean((r) => r.cpuMsPerRequest) : null,
  };
}

/** `body` is one request body, or several sent in turn by each connection. */
async function measure(label, hub, apiKey, body, opts) {
  const autocannon = require('autocannon');
  const bodies = Array.isArray(body) ? body : [body];
  const once = (seconds) =>
    new Promise((ok, fail) => {
      autocannon(
        {
          url: `${hub.url}/a2a`,
          method: 'POST',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          body: bodies[0],
          ...(bodies.length > 1 ? { requests: bodies.map((b) => ({ method: 'POST', body: b })) } : {}),
          connections: opts.connections,
          pipelining: 1,
          duration: seconds,
          timeout: 10,
          // A JSON-RPC error comes back with HTTP 200: count it as a mismatch, not a success.
          verifyBody: (text) => text.startsWith('{"jsonrpc":"2.0","id":1,"result":'),
        },
        (err, result) => (err ? fail(err) : ok(result)),
      );
    });
  if (opts.warmup > 0) await once(opts.warmup);
  log(`[${label}] measuring ${opts.duration} s…`);
  const before = processTicks(hub.pid);
  const result = await once(opts.duration);
  const ticks = processTicks(hub.pid) - before;
  const ok = result['2xx'] - result.mismatches;
  const failed = result.errors + result.timeouts + result.non2xx + result.mismatches;
  const summary = {
    valid: failed === 0 && ok > 0,
    requests: result.requests.total,
    failed,
    requestsPerSec: round(ok / result.duration, 0),
    p50: result.latency.p50,
    p99: result.latency.p99,
    cpuMsPerRequest: ticks > 0 && ok > 0 ? round((ticks * 1000) / TICKS_PER_SECOND / ok, 3) : null,
  };
  log(`[${label}] ${summary.valid ? `${fmt(summary.requestsPerSec)} req/s, p50 ${summary.p50} ms, p99 ${summary.p99} ms` : `INVALID RUN: ${failed} failed`}`);
  return summary;
}

await runBench(run);

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

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { checkRedis, clearRedisPrefix, createDatabase, dropDatabase, fmt, log, round, rpc, Unreachable, UsageError } from './lib.js';

const require = createRequire(import.meta.url);
const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');
const RESULTS_DIR = join(HERE, 'results');
const TARGET_RATIO = 0.9;
const SET_KEYS = 32;


function settings() {
  const number = (name, fallback, min) => {
    const raw = process.env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isFinite(value) || value < min) throw new UsageError(`${name} must be a number ≥ ${min} (got "${raw}")`);
    return value;
  };
  const hubEnv = {};
  for (const pair of (process.env.BENCH_HUB_ENV || '').split(/\s+/).filter(Boolean)) {
    const at = pair.indexOf('=');
    if (at < 1) throw new UsageError(`BENCH_HUB_ENV entries must be NAME=value (got "${pair}")`);
    hubEnv[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return {
    duration: number('BENCH_DURATION', 10, 1),
    warmup: number('BENCH_WARMUP', 3, 0),
    connections: Math.round(number('BENCH_CONNECTIONS', 32, 1)),
    rounds: Math.round(number('BENCH_ROUNDS', 2, 1)),
    valueBytes: Math.round(number('BENCH_VALUE_BYTES', 64, 1)),
    hubEnv,
    pgUrl: process.env.BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
    redisUrl: process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379',
  };
}

async function main() {
  let opts;
  try {
    opts = settings();
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`bench: ${err.message}`);
    process.exit(1);
  }
  const cleanups = [];
  const cleanup = async () => {
    while (cleanups.length) {
      try {
        await cleanups.pop()();
      } catch (err) {
        console.error(`bench: cleanup step failed: ${err?.message ?? err}`);
      }
    }
  };
  let interrupted = false;
  const onSignal = (signal) => {
    if (interrupted) return;
    interrupted = true;
    console.error(`\nbench: ${signal}, cleaning up…`);
    cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  let exitCode = 0;
  try {
    exitCode = await run(opts, cleanups);
  } catch (err) {
    if (err instanceof Unreachable) {
      console.error(`bench: ${err.message}`);
      exitCode = 2;
    } else {
      console.error(`bench: FAILED: ${err?.stack ?? err}`);
      exitCode = 1;
    }
  } finally {
    await cleanup();
  }
  process.exit(exitCode);
}

async function run(opts, cleanups) {
  const id = randomBytes(5).toString('hex');
  const dbName = `agenthub_bench_${id}`;
  const redisPrefix = `agenthub_bench_${id}:`;
  log('AgentHub benchmark: x-hub/workspace.secrets.get and .set vs x-hub/workspace.get, same hub, same run');
  log(`  ${opts.connections} connections, ${opts.warmup} s warm-up + ${opts.duration} s measured per run, ${opts.rounds} round(s); node ${process.version}, ${cpus().length} CPUs`);

  const pg = (await import('pg')).default;
  await checkRedis(opts.redisUrl);
  const databaseUrl = await createDatabase(pg, opts.pgUrl, dbName);
  cleanups.push(() => dropDatabase(pg, opts.pgUrl, dbName));
  cleanups.push(() => clearRedisPrefix(opts.redisUrl, redisPrefix));
  const dataDir = await mkdtemp(join(tmpdir(), 'agenthub-bench-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  log(`  database ${dbName}, Redis prefix ${redisPrefix}`);

  const adminToken = `bench-admin-${randomBytes(16).toString('hex')}`;
  const hub = await startHub({
    HUB_HOST: '127.0.0.1',
    HUB_PORT: '0',
    HUB_DATA_DIR: dataDir,
    HUB_ADMIN_TOKEN: adminToken,
    HUB_KEKS: `v1:${randomBytes(32).toString('base64')}`,
    DATABASE_URL: databaseUrl,
    REDIS_URL: opts.redisUrl,
    REDIS_PREFIX: redisPrefix,
    LOG_LEVEL: 'warn',
    HUB_METRICS: 'false',
    HUB_SHUTDOWN_GRACE_MS: '2000',
    ...opts.hubEnv,
  });
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
    cpuMsPerRequest: ticks > 0 && ok > 0 ? round((ticks * 1000) / ticksPerSecond() / ok, 3) : null,
  };
  log(`[${label}] ${summary.valid ? `${fmt(summary.requestsPerSec)} req/s, p50 ${summary.p50} ms, p99 ${summary.p99} ms` : `INVALID RUN: ${failed} failed`}`);
  return summary;
}

// ---------------------------------------------------------------------------------------------
// The hub process

async function startHub(env) {
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(HUB_|DATABASE_|REDIS_|LOG_LEVEL$|GRPC_|IDENTITY_ADDR$|WORKSPACE_ADDR$|SECRETS_ADDR$|NODE_OPTIONS$)/.test(k)),
  );
  const child = spawn(process.execPath, [join(ROOT, 'services/hub/bin/agenthub.js'), 'serve', 'all'], {
    cwd: ROOT,
    env: { ...inherited, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const tail = [];
  const keep = (line) => {
    tail.push(line);
    if (tail.length > 20) tail.shift();
  };
  let exited = false;
  const exit = new Promise((ok) => child.once('exit', (code, signal) => { exited = true; ok({ code, signal }); }));
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const url = await new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`the hub did not start within 60 s:\n${tail.join('\n')}`)), 60_000);
    createInterface({ input: child.stdout }).on('line', (line) => {
      const match = /AgentHub is listening on (\S+)/.exec(line);
      if (match) {
        clearTimeout(timer);
        ok(match[1]);
      } else keep(line);
    });
    createInterface({ input: child.stderr }).on('line', keep);
    exit.then(({ code, signal }) => {
      clearTimeout(timer);
      fail(new Error(`the hub exited (code ${code}, signal ${signal}) before it was ready:\n${tail.join('\n')}`));
    });
  });
  return {
    url,
    pid: child.pid,
    logTail: () => [...tail],
    async stop() {
      process.removeListener('exit', killOnExit);
      if (exited) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exit;
      clearTimeout(timer);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Backends





// ---------------------------------------------------------------------------------------------
// Helpers

/** CPU time (user + system) of a process in clock ticks, from /proc; 0 where there is none. */
function processTicks(pid) {
  if (!existsSync(`/proc/${pid}/stat`)) return 0;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}

function ticksPerSecond() {
  // Linux's USER_HZ is 100 on every mainstream architecture.
  return 100;
}





await main();

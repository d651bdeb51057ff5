#!/usr/bin/env node
// Benchmark: `x-hub/workspace.get` through the whole hub (HTTP gateway → gRPC workspace service →
// PostgreSQL, API key resolved through the auth cache) against its floor (bench/floor.js: Koa, a
// Map of keys, one loopback grpc-js call, one PostgreSQL query) under the same autocannon load, in
// the same run. See bench/README.md.
//
//   npm run bench                                   (builds first, `prebench`; runs every benchmark)
//   npm run build && node bench/workspace-get.js    (this one only)
//   BENCH_DURATION=20 node bench/workspace-get.js   (measured seconds per server; default 16)
//
// Settings (environment):
//   BENCH_DURATION     measured seconds per server (default 16), split over the rounds
//   BENCH_ROUNDS       interleaved slices per server (default 4): hub, floor, floor, hub, …
//   BENCH_WARMUP       warm-up seconds per server, not measured (default 10)
//   BENCH_CONNECTIONS  concurrent keep-alive connections (default 32)
//   BENCH_MODE         child (default): hub and floor each run as their own node process;
//                      inprocess: both run inside this process, sharing autocannon's event loop
//   BENCH_PG_URL       PostgreSQL admin URL (default postgres://postgres@127.0.0.1:5432/postgres)
//   BENCH_REDIS_URL    Redis URL (default redis://127.0.0.1:6379)
//   BENCH_HUB_ENV      extra hub settings, "NAME=value NAME=value" (e.g. "HUB_AUTH_CACHE_MS=0")
//   BENCH_PROFILE      1: run the children with --cpu-prof into bench/results/profiles/
//                      (child mode only); summarise with `node bench/profile-summary.js <file>`
//   BENCH_ONLY         hub | floor: measure one side only (no ratio; for profiling)
//   BENCH_RPC_FLOOR    1: also measure the floor with the hub's RPC layer in place of bare grpc-js
//                      (bench/floor.js, FLOOR_RPC=hub) in the same rounds, and print how much of
//                      the hub's gap to the floor its internal calls account for
//   BENCH_HUB_DIR      the hub package to run (default services/hub): point it at another build,
//                      e.g. a patched copy, to A/B an optimisation against the same load
//
// Exit status: 0 when the benchmark ran and measured cleanly, whatever the ratio (PASS or BELOW
// TARGET is printed); 1 when a run had errors (no throughput is claimed) or setup failed; 2 when
// PostgreSQL or Redis is unreachable.

import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startFloor } from './floor.js';
import { backendPids, checkRedis, clearRedisPrefix, createDatabase, dropDatabase, envNumber, fmt, hubNodeArgs, log, ownProcessTicks, parseHubEnv, processTicks, round, rpc, runBench, ticksSince, UNLIMITED, UsageError } from './lib.js';

const require = createRequire(import.meta.url);
const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');
const RESULTS_DIR = join(HERE, 'results');
const TARGET_RATIO = 0.9;
/** Other processes' CPU (% of one core) above which a run is flagged as disturbed. */
const BACKGROUND_WARN_PERCENT = 15;

// ---------------------------------------------------------------------------------------------

function settings() {
  const mode = process.env.BENCH_MODE || 'child';
  if (mode !== 'child' && mode !== 'inprocess') throw new UsageError(`BENCH_MODE must be child or inprocess (got "${mode}")`);
  const only = process.env.BENCH_ONLY || '';
  if (only && only !== 'hub' && only !== 'floor') throw new UsageError(`BENCH_ONLY must be hub or floor (got "${only}")`);
  const hubEnv = parseHubEnv();
  const profile = process.env.BENCH_PROFILE === '1';
  if (profile && mode !== 'child') throw new UsageError('BENCH_PROFILE=1 needs BENCH_MODE=child');
  return {
    duration: envNumber('BENCH_DURATION', 16, 1),
    rounds: Math.round(envNumber('BENCH_ROUNDS', 4, 1)),
    warmup: envNumber('BENCH_WARMUP', 10, 0),
    connections: Math.round(envNumber('BENCH_CONNECTIONS', 32, 1)),
    mode,
    only,
    profile,
    rpcFloor: process.env.BENCH_RPC_FLOOR === '1',
    hubEnv,
    hubDir: resolve(ROOT, process.env.BENCH_HUB_DIR || 'services/hub'),
    pgUrl: process.env.BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
    redisUrl: process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379',
  };
}


async function run(cleanups) {
  const opts = settings();
  const id = randomBytes(5).toString('hex');
  const dbName = `agenthub_bench_${id}`;
  const redisPrefix = `agenthub_bench_${id}:`;

  log(`AgentHub benchmark: x-hub/workspace.get vs its floor (${opts.mode === 'child' ? 'each server in its own process' : 'servers in this process'})`);
  if (opts.hubDir !== join(ROOT, 'services/hub')) log(`  hub from ${opts.hubDir}`);
  log(`  ${opts.connections} connections, ${opts.warmup} s warm-up + ${opts.duration} s measured per server; node ${process.version}, ${cpus().length} CPUs`);

  // 1. Backends: a fresh database and a unique Redis prefix.
  const pg = (await import('pg')).default;
  await checkRedis(opts.redisUrl);
  const databaseUrl = await createDatabase(pg, opts.pgUrl, dbName);
  cleanups.push(() => dropDatabase(pg, opts.pgUrl, dbName));
  cleanups.push(() => clearRedisPrefix(opts.redisUrl, redisPrefix));
  log(`  database ${dbName}, Redis prefix ${redisPrefix}`);

  const dataDir = await mkdtemp(join(tmpdir(), 'agenthub-bench-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));

  // 2. The hub.
  const adminToken = `bench-admin-${randomBytes(16).toString('hex')}`;
  const hubSettings = {
    HUB_HOST: '127.0.0.1',
    HUB_PORT: '0',
    HUB_DATA_DIR: dataDir,
    HUB_ADMIN_TOKEN: adminToken,
    DATABASE_URL: databaseUrl,
    REDIS_URL: opts.redisUrl,
    REDIS_PREFIX: redisPrefix,
    LOG_LEVEL: 'warn',
    HUB_METRICS: 'false',
    HUB_SHUTDOWN_GRACE_MS: '2000',
    ...UNLIMITED,
    ...opts.hubEnv,
  };
  const profileDir = join(RESULTS_DIR, 'profiles');
  if (opts.profile) await mkdir(profileDir, { recursive: true });
  const nodeArgs = (name) => (opts.profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=${name}-${id}.cpuprofile`] : []);

  const started = Date.now();
  let hub;
  if (opts.mode === 'child') {
    hub = await startChild('hub', [...hubNodeArgs(), ...nodeArgs('hub'), join(opts.hubDir, 'bin/agenthub.js'), 'serve', 'all'], hubSettings, /AgentHub is listening on (\S+)/);
  } else {
    const { startHub } = await import(pathToFileURL(join(opts.hubDir, 'dist/index.js')).href);
    const { loadConfig, createLogger } = await import('../libs/runtime/dist/index.js');
    const config = loadConfig(hubSettings);
    const running = await startHub(config, createLogger({ level: config.LOG_LEVEL }));
    hub = { url: running.url, pid: process.pid, stop: () => running.stop(), logTail: () => [], warnings: () => 0 };
  }
  cleanups.push(() => hub.stop());
  log(`  hub up at ${hub.url} in ${Date.now() - started} ms`);

  // 3. An agent and its workspace.
  const admin = await rpc(hub.url, '/admin', adminToken, 'agents.create', { tenant_id: `bench-${id}`, name: 'bench agent', create_tenant: true });
  if (admin.error) throw new Error(`agents.create failed: ${JSON.stringify(admin.error)}`);
  const apiKey = admin.result.api_key;
  const created = await rpc(hub.url, '/a2a', apiKey, 'x-hub/workspace.create', { name: 'bench workspace' });
  if (created.error) throw new Error(`x-hub/workspace.create failed: ${JSON.stringify(created.error)}`);
  const workspaceId = created.result.workspace.id;

  // The one request both servers get, byte for byte.
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'x-hub/workspace.get', params: { workspace_id: workspaceId } });
  const check = await rpc(hub.url, '/a2a', apiKey, null, null, body);
  if (check.error || !check.result?.workspace || check.result.workspace.id !== workspaceId) {
    throw new Error(`a single x-hub/workspace.get through the hub did not return the workspace: ${JSON.stringify(check)}`);
  }
  log(`  agent ${admin.result.agent.id}, workspace ${workspaceId}: workspace.get answers role=${check.result.role}, member_count=${check.result.member_count}`);

  // 4. The floor, run the same way as the hub, on the same database, key and workspace; with
  // BENCH_RPC_FLOOR=1 also the floor whose call goes through the hub's RPC layer.
  const startFloorServer = async (name, rpcLayer) => {
    const settings = { shape: 'read', pgUrl: databaseUrl, keys: { [apiKey]: admin.result.agent.id }, seed: { workspaceId, agentId: admin.result.agent.id }, rpc: rpcLayer };
    const server = opts.mode === 'child'
      ? await startChild(name, [...nodeArgs(name), join(HERE, 'floor.js')], { FLOOR_SHAPE: 'read', FLOOR_RPC: rpcLayer, FLOOR_PG_URL: databaseUrl, FLOOR_KEYS: JSON.stringify(settings.keys), FLOOR_SEED: JSON.stringify(settings.seed) }, /FLOOR listening on (\S+)/)
      : { ...(await startFloor(settings)), pid: process.pid };
    cleanups.push(() => server.stop());
    const answered = await rpc(server.url, '/a2a', apiKey, null, null, body);
    if (answered.error || answered.result?.workspace?.id !== workspaceId) throw new Error(`${name} answered ${JSON.stringify(answered)}`);
    return server;
  };
  const floor = opts.only !== 'hub' ? await startFloorServer('floor', 'grpc-js') : undefined;
  const rpcFloor = opts.rpcFloor && opts.only !== 'hub' ? await startFloorServer('floor-rpc', 'hub') : undefined;

  // 5. Load: warm-up, then the measured run, one server at a time.
  const load = { body, apiKey, connections: opts.connections, dbName };
  const results = {};
  // Interleaved in BENCH_ROUNDS slices so that a change in the machine's load during the run hits
  // both alike; each side's figure combines its slices. Every other round runs in reverse order
  // (hub, floor, floor, hub, …): the machine speeds up over a run's first minute or so (both
  // servers gain 5–10% from their second slice to their last), and a side always measured first
  // in its round would meet that drift a slice earlier than the other on every round.
  const slices = { hub: [], floor: [], rpcFloor: [] };
  const sides = [
    opts.only !== 'floor' && { name: 'hub', server: hub, into: slices.hub },
    floor && { name: 'floor', server: floor, into: slices.floor },
    rpcFloor && { name: 'floor-rpc', server: rpcFloor, into: slices.rpcFloor },
  ].filter(Boolean);
  const warmed = new Set();
  const warningsBefore = hub.warnings(); // start-up warnings (e.g. about configuration) do not count
  for (let r = 0; r < opts.rounds; r += 1) {
    for (const side of r % 2 === 0 ? sides : [...sides].reverse()) {
      const slice = { ...opts, warmup: warmed.has(side.name) ? 0 : opts.warmup, duration: opts.duration / opts.rounds };
      warmed.add(side.name);
      side.into.push(await measure(side.name, side.server, load, slice));
    }
  }
  if (slices.hub.length) {
    results.hub = combine(slices.hub);
    results.hub.hubLogWarnings = hub.warnings() - warningsBefore;
    if (results.hub.hubLogWarnings) log(`[hub] the hub logged ${results.hub.hubLogWarnings} warning/error lines during the runs`);
  }
  if (slices.floor.length) results.floor = combine(slices.floor);
  if (slices.rpcFloor.length) results.rpcFloor = combine(slices.rpcFloor);

  // 6. Report.
  const ratio = results.hub?.valid && results.floor?.valid ? results.hub.requestsPerSec / results.floor.requestsPerSec : null;
  printTable(results, ratio);
  const report = {
    benchmark: 'workspace-get',
    date: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
    mode: opts.mode,
    connections: opts.connections,
    warmupSeconds: opts.warmup,
    durationSeconds: opts.duration,
    requestBytes: Buffer.byteLength(body),
    hubEnv: opts.hubEnv,
    hub: results.hub ?? null,
    floor: results.floor ?? null,
    ...(results.rpcFloor ? { rpcFloor: results.rpcFloor, rpcFloorRatio: round(rpcFloorRatio(results), 3) } : {}),
    ratio: round(ratio, 3),
    target: TARGET_RATIO,
    verdict: !(results.hub && results.floor) ? 'N/A' : ratio === null ? 'INVALID' : ratio >= TARGET_RATIO ? 'PASS' : 'BELOW TARGET',
    disturbed: Object.values(results).some((r) => r.disturbed),
  };
  await mkdir(RESULTS_DIR, { recursive: true });
  // One file per transport, so `npm run bench` keeps both the gRPC and the in-process figures.
  const resultsFile = opts.hubEnv.HUB_TRANSPORT === 'inproc' ? 'workspace-get-inproc.json' : 'workspace-get.json';
  await writeFile(join(RESULTS_DIR, resultsFile), `${JSON.stringify(report, null, 2)}\n`);
  log(`\nResults written to ${join('bench', 'results', resultsFile)}`);
  if (opts.profile) {
    log(`CPU profiles (written when the children exit) in ${join('bench', 'results', 'profiles')}; to read the measured window:`);
    for (const [name, server] of [['hub', hub], ['floor', floor], ['floor-rpc', rpcFloor]]) {
      if (server?.profileHint) log(`  node bench/profile-summary.js bench/results/profiles/${name}-${id}.cpuprofile ${server.profileHint}`);
    }
  }

  const invalid = Object.entries(results).filter(([, r]) => !r.valid);
  if (invalid.length) {
    for (const [name] of invalid) {
      if (name === 'hub') for (const line of hub.logTail()) console.error(`  hub log: ${line}`);
    }
    return 1;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Load generation

async function measure(name, server, load, opts) {
  const autocannon = require('autocannon');
  const url = server.url;
  const expectPrefix = '{"jsonrpc":"2.0","id":1,"result":';
  const runOnce = (seconds, record) =>
    new Promise((ok, fail) => {
      const instance = autocannon(
        {
          url: `${url}/a2a`,
          method: 'POST',
          headers: { authorization: `Bearer ${load.apiKey}`, 'content-type': 'application/json' },
          body: load.body,
          connections: load.connections,
          pipelining: 1,
          duration: seconds,
          timeout: 10,
          // A JSON-RPC error comes back with HTTP 200: count it as a mismatch, not a success.
          verifyBody: (text) => text.startsWith(expectPrefix),
        },
        (err, result) => (err ? fail(err) : ok(result)),
      );
      // autocannon's own histogram keeps whole milliseconds; keep exact latencies as well.
      if (record) instance.on('response', (_client, _status, _bytes, ms) => record(ms));
    });

  if (opts.warmup > 0) {
    log(`\n[${name}] warm-up ${opts.warmup} s…`);
    const warm = await runOnce(opts.warmup);
    const bad = warm.errors + warm.non2xx + warm.mismatches;
    if (bad) log(`[${name}] warm-up had ${bad} failed responses (errors ${warm.errors}, non-2xx ${warm.non2xx}, JSON-RPC errors ${warm.mismatches})`);
  }
  log(`[${name}] measuring ${opts.duration} s…`);
  let latencies = new Float64Array(1 << 16);
  let count = 0;
  const record = (ms) => {
    if (count === latencies.length) {
      const grown = new Float64Array(latencies.length * 2);
      grown.set(latencies);
      latencies = grown;
    }
    latencies[count++] = ms;
  };
  const before = cpuSnapshot(server.pid, load.dbName);
  const measuredFrom = performance.now();
  const result = await runOnce(opts.duration, record);
  const measuredTo = performance.now();
  const cpu = cpuUsage(before, cpuSnapshot(server.pid, load.dbName), opts.mode);
  const sorted = latencies.subarray(0, count).sort();
  const pct = (p) => (count ? sorted[Math.min(count - 1, Math.ceil((p / 100) * count) - 1)] : null);

  const failures = { errors: result.errors, timeouts: result.timeouts, non2xx: result.non2xx, jsonRpcErrors: result.mismatches };
  const valid = result.errors === 0 && result.timeouts === 0 && result.non2xx === 0 && result.mismatches === 0 && result['2xx'] > 0;
  const seconds = result.duration;
  if (opts.profile && server.spawnedAt !== undefined) {
    // The child's profile starts about when it was spawned; leave a margin at both ends.
    const from = Math.round(measuredFrom - server.spawnedAt + 1000);
    const to = Math.round(measuredTo - server.spawnedAt - 500);
    const requests = Math.round((result['2xx'] / result.duration) * ((to - from) / 1000));
    server.profileHint = `--from ${from} --to ${to} --per-request ${requests}`;
  }
  const summary = {
    valid,
    // Other processes took a noticeable share of the CPUs: the figures are not representative.
    disturbed: Boolean(cpu && cpu.backgroundPercent > BACKGROUND_WARN_PERCENT),
    requests: result.requests.total,
    ok: result['2xx'] - result.mismatches,
    ...failures,
    seconds: round(seconds, 2),
    requestsPerSec: round((result['2xx'] - result.mismatches) / seconds, 0),
    latencyMs: { p50: round(pct(50), 2), p90: round(pct(90), 2), p99: round(pct(99), 2), max: round(count ? sorted[count - 1] : null, 2), mean: round(sorted.reduce((a, b) => a + b, 0) / (count || 1), 2) },
    cpu: cpu && {
      ...cpu,
      serverCpuMsPerRequest: result['2xx'] && cpu.serverPercent !== null ? round((cpu.serverPercent * 10 * seconds) / result['2xx'], 3) : null,
      backendsCpuMsPerRequest: result['2xx'] ? round((cpu.backendsPercent * 10 * seconds) / result['2xx'], 3) : null,
    },
    autocannon: { requestsPerSecAverage: result.requests.average, latencyP50: result.latency.p50, latencyP99: result.latency.p99 },
  };
  if (cpu) {
    log(`[${name}] CPU (% of one core): server ${cpu.serverPercent === null ? '(exited)' : `${cpu.serverPercent}%`}${cpu.startedProcessesPercent ? ` (the processes it started: ${cpu.startedProcessesPercent}%)` : ''}${opts.mode === 'child' ? `, load generator ${cpu.loadGeneratorPercent}%` : ' (with the load generator)'}, PostgreSQL+Redis ${cpu.backendsPercent}%, other processes ${cpu.backgroundPercent}%, machine idle ${cpu.idlePercent}%`);
    if (cpu.backgroundPercent > BACKGROUND_WARN_PERCENT) {
      log(`[${name}] WARNING: other processes used ${cpu.backgroundPercent}% of a core during this run; the figures are skewed by a busy machine`);
    }
  }
  log(`[${name}] ${valid ? `${fmt(summary.requestsPerSec)} req/s, p50 ${summary.latencyMs.p50} ms, p99 ${summary.latencyMs.p99} ms` : `INVALID RUN: ${JSON.stringify(failures)}`}`);
  return summary;
}

/** One figure from a server's slices: rates averaged, the median slice's p50, the worst p99, CPU per request averaged. */
function combine(slices) {
  if (slices.length === 1) return slices[0];
  const sum = (f) => slices.reduce((n, x) => n + f(x), 0);
  const mid = (f) => slices.map(f).sort((a, b) => a - b)[Math.floor(slices.length / 2)];
  const cpuMs = slices.map((x) => x.cpu?.serverCpuMsPerRequest).filter((x) => x != null);
  return {
    valid: slices.every((x) => x.valid),
    disturbed: slices.some((x) => x.disturbed),
    requests: sum((x) => x.requests),
    ok: sum((x) => x.ok),
    errors: sum((x) => x.errors),
    timeouts: sum((x) => x.timeouts),
    non2xx: sum((x) => x.non2xx),
    jsonRpcErrors: sum((x) => x.jsonRpcErrors),
    seconds: round(sum((x) => x.seconds), 2),
    requestsPerSec: round(sum((x) => x.requestsPerSec) / slices.length, 0),
    latencyMs: { p50: mid((x) => x.latencyMs.p50), p99: Math.max(...slices.map((x) => x.latencyMs.p99)) },
    cpu: { serverCpuMsPerRequest: cpuMs.length ? round(cpuMs.reduce((a, b) => a + b, 0) / cpuMs.length, 3) : null },
    slices: slices.map((x) => ({ requestsPerSec: x.requestsPerSec, p50: x.latencyMs.p50, cpu: x.cpu })),
  };
}

function printTable(results, ratio) {
  const rows = [
    ['', 'req/s', 'p50 ms', 'p99 ms', 'requests', 'failed', 'server CPU ms/req'],
    ...[
      ['hub  (x-hub/workspace.get)', results.hub],
      ['floor (bench/floor.js)', results.floor],
      ['floor, hub RPC (FLOOR_RPC=hub)', results.rpcFloor],
    ]
      .filter(([, r]) => r)
      .map(([label, r]) => [
        label,
        r.valid ? fmt(r.requestsPerSec) : 'INVALID',
        r.valid ? r.latencyMs.p50.toFixed(2) : '-',
        r.valid ? r.latencyMs.p99.toFixed(2) : '-',
        fmt(r.requests),
        fmt(r.errors + r.non2xx + r.jsonRpcErrors),
        !r.valid || r.cpu?.serverCpuMsPerRequest == null ? '-' : r.cpu.serverCpuMsPerRequest.toFixed(3),
      ]),
  ];
  const widths = rows[0].map((_, c) => Math.max(...rows.map((row) => String(row[c]).length)));
  const line = (row) => row.map((cell, c) => (c === 0 ? String(cell).padEnd(widths[c]) : String(cell).padStart(widths[c]))).join('   ');
  log('');
  log(line(rows[0]));
  log(widths.map((w) => '-'.repeat(w)).join('   '));
  for (const row of rows.slice(1)) log(line(row));
  log('');
  for (const [name, r] of Object.entries(results)) {
    if (!r.valid) log(`${name}: run had failures (errors ${r.errors}, timeouts ${r.timeouts}, non-2xx ${r.non2xx}, JSON-RPC errors ${r.jsonRpcErrors}): no throughput claimed`);
  }
  const disturbed = Object.entries(results).filter(([, r]) => r.disturbed).map(([name]) => name);
  if (disturbed.length) {
    log(`NOTE: other processes were busy during the ${disturbed.join(' and ')} run${disturbed.length > 1 ? 's' : ''} (see "other processes" above); rerun on a quiet machine for figures to compare.`);
  }
  if (ratio !== null) {
    log(`ratio hub/floor = ${ratio.toFixed(3)}   target ≥ ${TARGET_RATIO}   ${ratio >= TARGET_RATIO ? 'PASS' : 'BELOW TARGET'}`);
  } else if (results.hub && results.floor) {
    log('ratio hub/floor: not computed (a run was invalid)');
  }
  const rpcRatio = rpcFloorRatio(results);
  if (rpcRatio !== null) {
    log(`ratio floor with the hub's RPC layer/floor = ${rpcRatio.toFixed(3)}: its internal calls alone, without the gateway's and the service's own work`);
    if (ratio !== null) log(`ratio hub/(floor with the hub's RPC layer) = ${(ratio / rpcRatio).toFixed(3)}: the rest of the hub`);
  }
}

/** The floor with the hub's RPC layer against the plain floor, when both ran cleanly. */
function rpcFloorRatio(results) {
  return results.rpcFloor?.valid && results.floor?.valid ? results.rpcFloor.requestsPerSec / results.floor.requestsPerSec : null;
}

// ---------------------------------------------------------------------------------------------
// Processes

/** Spawns `node args…` with `env` over a scrubbed copy of ours; resolves once `ready` matches a line. */
async function startChild(name, args, env, ready) {
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(HUB_|DATABASE_|REDIS_|LOG_LEVEL$|GRPC_|IDENTITY_ADDR$|WORKSPACE_ADDR$|NODE_OPTIONS$)/.test(k)),
  );
  const spawnedAt = performance.now();
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...inherited, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const tail = [];
  let warnings = 0;
  const keep = (line) => {
    tail.push(line);
    if (tail.length > 20) tail.shift();
  };
  let exited = false;
  const exit = new Promise((ok) =>
    child.once('exit', (code, signal) => {
      exited = true;
      ok({ code, signal });
    }),
  );
  // A child left behind if this process dies unexpectedly.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);

  const url = await new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`${name} did not start within 30 s:\n${tail.join('\n')}`)), 30_000);
    createInterface({ input: child.stdout }).on('line', (line) => {
      const match = ready.exec(line);
      if (match) {
        clearTimeout(timer);
        ok(match[1]);
      } else {
        // pino lines at warn (40) and above
        if (/"level":\s*([4-9]\d)/.test(line)) warnings++;
        keep(line);
      }
    });
    createInterface({ input: child.stderr }).on('line', (line) => {
      warnings++;
      keep(line);
    });
    exit.then(({ code, signal }) => {
      clearTimeout(timer);
      fail(new Error(`${name} exited (code ${code}, signal ${signal}) before it was ready:\n${tail.join('\n')}`));
    });
  });
  return {
    url,
    pid: child.pid,
    spawnedAt,
    logTail: () => [...tail],
    warnings: () => warnings,
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
// CPU accounting (Linux /proc; skipped elsewhere): who used the CPUs during a measured run.

let clockTicks;
function ticksPerSecond() {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** processTicks of the hub and its gateway process; null once the server is gone. */
function serverTicks(pid) {
  return existsSync(`/proc/${pid}`) ? processTicks(pid) : null;
}

function cpuSnapshot(serverPid, dbName) {
  if (!existsSync('/proc/stat')) return null;
  const cpuLine = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
  const [user, nice, system, idle, iowait, irq, softirq, steal] = cpuLine;
  const backends = backendPids(dbName, { redis: true });
  return {
    at: performance.now(),
    busy: user + nice + system + irq + softirq,
    idle: idle + iowait,
    steal,
    server: serverTicks(serverPid),
    serverOwn: serverPid === process.pid ? null : ownProcessTicks(serverPid),
    self: serverPid === process.pid ? 0 : ownProcessTicks(process.pid),
    backends: new Map(backends.map((pid) => [pid, serverTicks(pid)])),
  };
}

function cpuUsage(a, b, mode) {
  if (!a || !b) return null;
  const seconds = (b.at - a.at) / 1000;
  const percent = (ticks) => round((100 * ticks) / ticksPerSecond() / seconds, 1);
  const backends = ticksSince(a.backends, b.backends);
  // A server that died during the run has no figure (its CPU is then counted as background).
  const server = a.server === null || b.server === null ? null : b.server - a.server;
  // `serve all` in two processes: the services' process and the gateway's process it started.
  const started = server === null || a.serverOwn === null ? null : server - (b.serverOwn - a.serverOwn);
  const self = b.self - a.self;
  const busy = b.busy - a.busy;
  return {
    serverPercent: server === null ? null : percent(server),
    startedProcessesPercent: started ? percent(started) : null,
    loadGeneratorPercent: mode === 'child' ? percent(self) : null,
    backendsPercent: percent(backends),
    backgroundPercent: percent(Math.max(0, busy - (server ?? 0) - self - backends)),
    idlePercent: percent(b.idle - a.idle),
    stealPercent: percent(b.steal - a.steal),
  };
}

// ---------------------------------------------------------------------------------------------
// Helpers





// ---------------------------------------------------------------------------------------------
// Entry.

await runBench(run);

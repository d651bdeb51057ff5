// Helpers shared by the benchmark scripts: backends, JSON-RPC calls and output.

import { createHmac, timingSafeEqual } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';

export class UsageError extends Error {}
export class Unreachable extends Error {}

export async function checkRedis(redisUrl) {
  const { createClient } = await import('redis');
  const client = createClient({ url: redisUrl, socket: { connectTimeout: 3000, reconnectStrategy: false } });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.ping();
  } catch (err) {
    throw new Unreachable(`Redis is not reachable at ${redisUrl} (${err?.message || err?.code || err}). Start it, or set BENCH_REDIS_URL.`);
  } finally {
    await client.quit().catch(() => client.disconnect().catch(() => undefined));
  }
}

export async function createDatabase(pg, adminUrl, name) {
  const admin = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 3000 });
  try {
    await admin.connect();
  } catch (err) {
    throw new Unreachable(`PostgreSQL is not reachable at ${adminUrl} (${err?.message || err?.code || err}). Start it, or set BENCH_PG_URL.`);
  }
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function dropDatabase(pg, adminUrl, name) {
  const admin = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 3000 });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

export async function clearRedisPrefix(redisUrl, prefix) {
  const { createClient } = await import('redis');
  const client = createClient({ url: redisUrl, socket: { connectTimeout: 3000, reconnectStrategy: false } });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const keys = [];
    for await (const batch of client.scanIterator({ MATCH: `${prefix}*`, COUNT: 500 })) keys.push(...(Array.isArray(batch) ? batch : [batch]));
    if (keys.length) await client.del(keys);
  } finally {
    await client.quit().catch(() => undefined);
  }
}

/** One JSON-RPC call; `rawBody` is sent as is when given. */
export async function rpc(baseUrl, path, bearer, method, params, rawBody) {
  const response = await fetch(`${baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${bearer}` },
    body: rawBody ?? JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const text = await response.text();
  try {
    return JSON.parse(text);
  } catch {
    return { error: { status: response.status, body: text } };
  }
}

/** One JSON-RPC call that must succeed: its result, or an Error naming the method and the reply. */
export async function okRpc(baseUrl, bearer, method, params) {
  const reply = await rpc(baseUrl, '/a2a', bearer, method, params);
  if (reply.error || !reply.result) throw new Error(`${method} failed: ${JSON.stringify(reply.error ?? reply)}`);
  return reply.result;
}

/** A new agent (and its tenant) made by the operator; resolves with its API key. */
export async function createAgentKey(baseUrl, adminToken, tenantId, name) {
  const agent = await rpc(baseUrl, '/admin', adminToken, 'agents.create', { tenant_id: tenantId, name, create_tenant: true });
  if (agent.error) throw new Error(`agents.create failed: ${JSON.stringify(agent.error)}`);
  return agent.result.api_key;
}

export function round(value, digits) {
  if (value === null || value === undefined || !Number.isFinite(value)) return null;
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

export function fmt(n) {
  return Number(n).toLocaleString('en-US');
}

export function log(line) {
  process.stdout.write(`${line}\n`);
}

/**
 * Runs a benchmark's `run(cleanups)` with the shared exit protocol: cleanups run in reverse on
 * success, failure and Ctrl-C; exit 0 when it measured cleanly (whatever the verdict), 1 on a
 * failed run, 2 when PostgreSQL or Redis is unreachable.
 */
export async function runBench(run) {
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
    exitCode = await run(cleanups);
  } catch (err) {
    if (err instanceof Unreachable) {
      console.error(`bench: ${err.message}`);
      exitCode = 2;
    } else if (err instanceof UsageError) {
      console.error(`bench: ${err.message}`);
      exitCode = 1;
    } else {
      console.error(`bench: FAILED: ${err?.stack ?? err}`);
      exitCode = 1;
    }
  } finally {
    await cleanup();
  }
  process.exit(exitCode);
}

/** A number from the environment, or `fallback`; a UsageError names a bad one. */
export function envNumber(name, fallback, min) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min) throw new UsageError(`${name} must be a number ≥ ${min} (got "${raw}")`);
  return value;
}

/**
 * A fresh PostgreSQL database, Redis prefix and data directory for one hub, all removed by the
 * cleanups; returns the hub settings that point at them.
 */
export async function freshHubSettings(cleanups, { pgUrl, redisUrl }) {
  const { randomBytes } = await import('node:crypto');
  const { mkdtemp, rm } = await import('node:fs/promises');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const id = randomBytes(5).toString('hex');
  const dbName = `agenthub_bench_${id}`;
  const redisPrefix = `agenthub_bench_${id}:`;
  const pg = (await import('pg')).default;
  await checkRedis(redisUrl);
  const databaseUrl = await createDatabase(pg, pgUrl, dbName);
  cleanups.push(() => dropDatabase(pg, pgUrl, dbName));
  cleanups.push(() => clearRedisPrefix(redisUrl, redisPrefix));
  const dataDir = await mkdtemp(join(tmpdir(), 'agenthub-bench-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  return {
    id,
    adminToken: `bench-admin-${randomBytes(16).toString('hex')}`,
    env: {
      HUB_HOST: '127.0.0.1',
      HUB_PORT: '0',
      HUB_DATA_DIR: dataDir,
      HUB_KEKS: `v1:${randomBytes(32).toString('base64')}`,
      DATABASE_URL: databaseUrl,
      REDIS_URL: redisUrl,
      REDIS_PREFIX: redisPrefix,
      LOG_LEVEL: 'warn',
      HUB_METRICS: 'false',
      HUB_SHUTDOWN_GRACE_MS: '2000',
      ...UNLIMITED,
    },
  };
}

/**
 * The benchmarks measure the hub's path, not its refusals: one key sends far past the per-key and
 * per-tenant rates and the tasks-in-flight and queued-deliveries quotas (0 turns each off).
 */
export const UNLIMITED = {
  HUB_RATE_KEY_PER_SEC: '0',
  HUB_RATE_TENANT_PER_SEC: '0',
  HUB_QUOTA_TASKS_IN_FLIGHT_PER_SENDER: '0',
  HUB_QUOTA_QUEUED_DELIVERIES_PER_AGENT: '0',
};

/**
 * `agenthub serve all` as a child process (with `nodeArgs`, e.g. --cpu-prof, after those of
 * BENCH_HUB_NODE_ARGS); resolves once it listens.
 */
export async function startHubProcess(root, env, nodeArgs = []) {
  const { spawn } = await import('node:child_process');
  const { createInterface } = await import('node:readline');
  const { join } = await import('node:path');
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(HUB_|DATABASE_|REDIS_|LOG_LEVEL$|GRPC_|[A-Z]+_ADDR$|KAFKA_|WEBHOOK_|NODE_OPTIONS$)/.test(k)),
  );
  const startedAt = performance.now();
  const child = spawn(process.execPath, [...hubNodeArgs(), ...nodeArgs, join(root, 'services/hub/bin/agenthub.js'), 'serve', 'all'], {
    cwd: root,
    env: { ...inherited, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const tail = [];
  // BENCH_HUB_LOG names a file that gets every line the hub writes (the tail keeps 20).
  const { appendFileSync } = await import('node:fs');
  const keep = (line) => {
    if (process.env.BENCH_HUB_LOG) appendFileSync(process.env.BENCH_HUB_LOG, `${child.pid} ${line}\n`);
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
    /** performance.now() when the process was spawned, to place log lines in time. */
    startedAt,
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

/** The foundation's baseline: a bare Koa app answering every POST with {jsonrpc, id, result: params}. */
export async function startEchoServer() {
  const { default: Koa } = await import('koa');
  const { createServer } = await import('node:http');
  const app = new Koa();
  app.silent = true;
  app.use(async (ctx) => {
    const chunks = [];
    for await (const chunk of ctx.req) chunks.push(chunk);
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      ctx.body = { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } };
      return;
    }
    ctx.body = { jsonrpc: '2.0', id: body.id ?? null, result: body.params };
  });
  const server = createServer(app.callback());
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  await new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', ok);
  });
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    stop: () =>
      new Promise((ok) => {
        server.close(() => ok());
        server.closeAllConnections();
      }),
  };
}

/** Percentile of sorted numbers (nearest rank). */
export function percentile(sorted, p) {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** BENCH_HUB_NODE_ARGS: node flags for the hub's processes, space-separated. */
export function hubNodeArgs(raw = process.env.BENCH_HUB_NODE_ARGS || '') {
  return raw.split(' ').filter(Boolean);
}

/** BENCH_HUB_ENV, "NAME=value NAME=value", as an object of extra hub settings. */
export function parseHubEnv(raw = process.env.BENCH_HUB_ENV || '') {
  const hubEnv = {};
  for (const pair of raw.split(/\s+/).filter(Boolean)) {
    const at = pair.indexOf('=');
    if (at < 1) throw new UsageError(`BENCH_HUB_ENV entries must be NAME=value (got "${pair}")`);
    hubEnv[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return hubEnv;
}

/**
 * CPU time (user + system) in clock ticks of a process and the processes it started (`serve all`
 * runs its gateway in a child process where it has two cores), from /proc; 0 where there is none.
 */
export function processTicks(pid) {
  return childPids(pid).reduce((sum, child) => sum + processTicks(child), ownProcessTicks(pid));
}

/** CPU time (user + system) in clock ticks of the process alone, from /proc; 0 where there is none. */
export function ownProcessTicks(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}

/** The live children of a process (the main thread's; node starts its children from it). */
export function childPids(pid) {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** Linux's USER_HZ: 100 on every mainstream architecture. */
export const TICKS_PER_SECOND = 100;

/**
 * The PostgreSQL backends serving database `dbName`, with `redis` the Redis server as well (from
 * /proc; none where there is no /proc).
 */
export function backendPids(dbName, { redis = false } = {}) {
  const pids = [];
  let entries = [];
  try {
    entries = readdirSync('/proc');
  } catch {
    return pids;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if ((cmd.startsWith('postgres:') && cmd.includes(` ${dbName} `)) || (redis && cmd.startsWith('redis-server'))) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/**
 * Clock ticks the processes of `after` (pid → ticks, null once gone) spent since `before`. A
 * process missing from `before` started in between (a pool opened a backend) and spent all of
 * its time since; one gone at either end counts nothing.
 */
export function ticksSince(before, after) {
  let sum = 0;
  for (const [pid, ticks] of after) {
    const then = before.get(pid);
    if (ticks !== null && then !== null) sum += Math.max(0, ticks - (then ?? 0));
  }
  return sum;
}

/** Clock ticks so far of each process backendPids finds, by pid: what ticksSince compares. */
export function backendTicks(dbName, { redis = false } = {}) {
  return new Map(backendPids(dbName, { redis }).map((pid) => [pid, processTicks(pid)]));
}

/**
 * CPU time (ms) the hub and the database's PostgreSQL backends spend while `work` runs: on a
 * loaded machine, per-operation CPU holds steadier than wall-clock latency.
 */
export async function cpuDuring(hubPid, dbName, work) {
  const before = { hub: processTicks(hubPid), pg: backendTicks(dbName) };
  const result = await work();
  const pg = ticksSince(before.pg, backendTicks(dbName));
  return { result, hubMs: ((processTicks(hubPid) - before.hub) * 1000) / TICKS_PER_SECOND, pgMs: (pg * 1000) / TICKS_PER_SECOND };
}

/**
 * `node args…` as a child process (cwd the project root, `env` over ours); resolves with the first
 * stdout line's match of `ready` once it prints it, and registers its stop in `cleanups`.
 */
export async function startNodeProcess(cleanups, root, args, env, ready) {
  const { spawn } = await import('node:child_process');
  const { createInterface } = await import('node:readline');
  const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const tail = [];
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const exited = new Promise((ok) => child.once('exit', ok));
  cleanups.push(async () => {
    process.removeListener('exit', killOnExit);
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  });
  const match = await new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`${args.join(' ')} did not start within 30 s:\n${tail.join('\n')}`)), 30_000);
    createInterface({ input: child.stdout }).on('line', (line) => {
      const found = ready.exec(line);
      if (found) {
        clearTimeout(timer);
        ok(found);
      } else tail.push(line);
    });
    createInterface({ input: child.stderr }).on('line', (line) => tail.push(line));
    exited.then((code) => {
      clearTimeout(timer);
      fail(new Error(`${args.join(' ')} exited (${code}):\n${tail.join('\n')}`));
    });
  });
  return { match, pid: child.pid };
}

/** RSS of a process and the processes it started, in MiB from /proc; null where there is none. */
export function processRssMiB(pid) {
  const kib = treeRssKiB(pid);
  return kib === null ? null : round(kib / 1024, 1);
}

/** With the processes it started (`serve all`'s gateway process), as processTicks counts CPU. */
function treeRssKiB(pid) {
  const own = ownRssKiB(pid);
  return own === null ? null : childPids(pid).reduce((sum, child) => sum + (treeRssKiB(child) ?? 0), own);
}

function ownRssKiB(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]);
    return Number.isFinite(kb) ? kb : null;
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------------
// The webhook receiver of bench/webhooks.js and bench/kafka-cluster.js: records each webhook-id's first arrival per path and verifies every signature.

export async function startReceiver() {
  const paths = new Map(); // path → { first: Map<id, {at, body}>, count, last }
  const secrets = new Map(); // path → whsec_…
  const waiters = new Set();
  let held = new Set(); // paths whose first request is held unanswered
  const holding = []; // answers held back
  let verified = 0;
  let bad = 0;
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      const raw = Buffer.concat(chunks).toString('utf8');
      const path = req.url ?? '/';
      res.statusCode = 204;
      if (held.has(path)) {
        held.delete(path);
        holding.push(res);
      } else res.end();
      const secret = secrets.get(path);
      if (secret && verify(secret, req.headers, raw)) verified += 1;
      else bad += 1;
      let entry = paths.get(path);
      if (!entry) paths.set(path, (entry = { first: new Map(), count: 0, last: 0 }));
      entry.count += 1;
      const id = req.headers['webhook-id'];
      if (!entry.first.has(id)) {
        let body;
        try {
          body = JSON.parse(raw);
        } catch {
          body = undefined;
        }
        entry.first.set(id, { at, body });
        entry.last = at;
        for (const waiter of waiters) waiter(path, body, at);
      }
    });
  });
  server.keepAliveTimeout = 5000;
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const port = server.address().port;
  return {
    secrets,
    url: (path) => `http://127.0.0.1:${port}${path}`,
    distinct: (path) => paths.get(path)?.first.size ?? 0,
    /** Each distinct webhook-id's first arrival on `path` ({at, body}), in arrival order. */
    arrivals: (path) => [...(paths.get(path)?.first.values() ?? [])],
    count: (path) => paths.get(path)?.count ?? 0,
    lastArrival: (path) => paths.get(path)?.last ?? 0,
    verified: () => verified,
    badSignatures: () => bad,
    /** Holds the next request on each of `list` unanswered until `release()`. */
    hold(list) {
      held = new Set(list);
    },
    release() {
      held = new Set();
      for (const res of holding.splice(0)) res.end();
    },
    /** performance.now() of the first webhook on `path` whose body matches (already arrived or next). */
    arrival(path, match, timeoutMs) {
      for (const { at, body } of paths.get(path)?.first.values() ?? []) if (match(body)) return Promise.resolve(at);
      return new Promise((ok, fail) => {
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          fail(new Error(`no webhook on ${path} within ${timeoutMs} ms`));
        }, timeoutMs);
        const waiter = (p, body, at) => {
          if (p !== path || !match(body)) return;
          clearTimeout(timer);
          waiters.delete(waiter);
          ok(at);
        };
        waiters.add(waiter);
      });
    },
    close: () =>
      new Promise((ok) => {
        server.close(() => ok());
        server.closeAllConnections();
      }),
  };
}

/** Standard Webhooks: HMAC-SHA256 over "<id>.<timestamp>.<body>" keyed by the secret's base64 part. */
function verify(secret, headers, raw) {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const header = headers['webhook-signature'];
  if (!id || !timestamp || !header) return false;
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > 300) return false;
  const expected = createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64')).update(`${id}.${timestamp}.${raw}`).digest();
  return header.split(' ').some((entry) => {
    const [version, value] = entry.split(',');
    if (version !== 'v1' || !value) return false;
    const given = Buffer.from(value, 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

/**
 * A connected echo agent on the SSE inbox (`x-hub/inbox.stream`, as `@agenthub/client`'s serve()
 * holds it): each delivery's task is completed with the delivered parts as an artifact (which
 * removes the delivery: no ack), up to `concurrency` at once.
 */
export async function startStreamingEchoAgent(hubUrl, apiKey, concurrency) {
  const { HubClient } = await import('@agenthub/client');
  const client = new HubClient({ url: hubUrl, apiKey });
  const stop = new AbortController();
  let failures = 0;
  const running = new Set();
  const loop = (async () => {
    while (!stop.signal.aborted) {
      try {
        for await (const { result: d } of client.stream('x-hub/inbox.stream', { max: concurrency }, { signal: stop.signal })) {
          const done = rpc(hubUrl, '/a2a', apiKey, 'x-hub/tasks.update', { task_id: d.task_id, state: 'completed', artifacts: [{ name: 'echo', parts: d.message.parts }] })
            .then((r) => {
              if (r.error) failures += 1;
            })
            .finally(() => running.delete(done));
          running.add(done);
          if (running.size >= concurrency) await Promise.race(running);
        }
      } catch {
        if (!stop.signal.aborted) failures += 1;
      }
    }
  })();
  return {
    failures: () => failures,
    stop: async () => {
      stop.abort();
      await loop;
      await Promise.all(running);
    },
  };
}

/**
 * Waits until the hub whose database is at `databaseUrl` has no work it accepted but has not
 * finished: outbox events not yet on the embedded event log, and messages of that log a consumer
 * group has not handled yet. So what it left behind from one measurement is not paid by the next.
 * Resolves with what there was at first and how long it took.
 */
export async function drainHub(databaseUrl, { timeoutMs = 300_000, pollMs = 200 } = {}) {
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 3000 });
  await client.connect();
  try {
    // The floor's own outbox, in that database too, has no `published_at`: nothing publishes it.
    const { rows: relayed } = await client.query(`SELECT table_schema AS schema FROM information_schema.columns WHERE table_name = 'outbox' AND column_name = 'published_at'`);
    const unpublished = relayed.map(({ schema }) => `(SELECT count(*) FROM "${schema}".outbox WHERE published_at IS NULL)`).join(' + ') || '0';
    const backlog = async () => {
      const { rows: [counts] } = await client.query(
        `SELECT (${unpublished})::int AS outbox,
                (SELECT coalesce(sum((SELECT count(*) FROM bus.messages m WHERE m.topic = o.topic AND m."offset" > o.committed)), 0) FROM bus.group_offsets o)::int AS log`,
      );
      return counts;
    };
    const started = performance.now();
    const first = await backlog();
    for (let now = first; now.outbox + now.log > 0; now = await backlog()) {
      if (performance.now() - started > timeoutMs) throw new Error(`the hub still had ${now.outbox} outbox events and ${now.log} log messages to handle after ${timeoutMs / 1000} s`);
      await new Promise((ok) => setTimeout(ok, pollMs));
    }
    return { ...first, seconds: round((performance.now() - started) / 1000, 1) };
  } finally {
    await client.end();
  }
}

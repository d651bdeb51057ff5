#!/usr/bin/env node
// Benchmark: one echo exchange (a blocking A2A 1.0 SendMessage with one text part, answered with a
// completed task carrying the text back as an artifact), sent by the `@a2a-js/sdk` client
//   - through AgentHub: SDK client → the hub's strict endpoint (from the agent's card) → a
//     connected echo agent on the SSE inbox (`x-hub/inbox.stream`, or long-polling
//     `x-hub/inbox.poll` with BENCH_AGENT=poll) answering with `x-hub/tasks.update`;
//   - through AgentHub to a push agent: SDK client → the hub → that same `@a2a-js/sdk` server,
//     registered as the agent's endpoint (the hub forwards with the SDK's client);
//   - directly: SDK client → an `@a2a-js/sdk` express server running the same echo executor.
// Same request count and concurrency for both, in one run. Prints throughput, p50/p99 latency, the
// CPU per exchange of the hub, the agent and PostgreSQL and Redis (from /proc), and the hub/direct
// throughput ratio against the target (≥ 0.5).
//
//   npm run bench:a2a                          (after `npm run build`; `npm run bench` builds first)
//   BENCH_REQUESTS=5000 node bench/a2a.js
//
// Settings (environment):
//   BENCH_REQUESTS     measured exchanges per path (default 2000)
//   BENCH_WARMUP       unmeasured exchanges per path first (default 200)
//   BENCH_CONCURRENCY  exchanges in flight (default 16)
//   BENCH_PG_URL       PostgreSQL admin URL (default postgres://postgres@127.0.0.1:5432/postgres)
//   BENCH_REDIS_URL    Redis URL (default redis://127.0.0.1:6379)
//   BENCH_HUB_ENV      extra hub settings, "NAME=value NAME=value"
//   BENCH_PATHS        which paths to measure, comma-separated: hub, push (default both; direct always runs)
//   BENCH_AGENT        stream (default): the connected agent holds x-hub/inbox.stream (SSE), as
//                      `@agenthub/client`'s serve() does; poll: it long-polls x-hub/inbox.poll
//   BENCH_PROFILE      1: the hub runs with --cpu-prof; read it with bench/profile-summary.js
//
// The hub, the connected agent and the direct server each run as their own node process (this
// file in another role), so the load generator shares its event loop with neither side.
//
// Exit status: 0 when both paths were measured without errors, whatever the ratio; 1 when an
// exchange failed or setup failed; 2 when PostgreSQL or Redis is unreachable.

import { mkdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { backendTicks, drainHub, envNumber, fmt, freshHubSettings, log, parseHubEnv, processTicks, round, rpc, runBench, startHubProcess, startNodeProcess, startStreamingEchoAgent, ticksSince, TICKS_PER_SECOND, UsageError } from './lib.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');
const TARGET_RATIO = 0.5;
const TEXT = 'echo this back, please';

// ---------------------------------------------------------------------------------------------
// Roles run as child processes.

/** The direct path: an `@a2a-js/sdk` express server with the echo executor; prints its URL. */
async function serveDirect() {
  const { default: express } = await import('express');
  const { AgentCard, TaskState } = await import('@a2a-js/sdk');
  const { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } = await import('@a2a-js/sdk/server');
  const { agentCardHandler, jsonRpcHandler, UserBuilder } = await import('@a2a-js/sdk/server/express');
  const app = express();
  const server = await new Promise((ok) => {
    const listening = app.listen(0, '127.0.0.1', () => ok(listening));
  });
  server.keepAliveTimeout = 65_000;
  const base = `http://127.0.0.1:${server.address().port}`;
  const card = AgentCard.fromJSON({
    name: 'echo',
    description: 'Echoes its input',
    version: '1.0.0',
    supportedInterfaces: [{ url: `${base}/a2a`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
    capabilities: { streaming: true, pushNotifications: false },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [{ id: 'echo', name: 'Echo', description: 'Echoes its input', tags: ['echo'] }],
  });
  // The same answer the connected agent gives: the task, an artifact echoing the parts, completed.
  const executor = {
    cancelTask: async () => undefined,
    async execute(ctx, bus) {
      const m = ctx.userMessage;
      const ids = { taskId: ctx.taskId, contextId: ctx.contextId };
      const status = (state) => ({ state, message: undefined, timestamp: new Date().toISOString() });
      if (!ctx.task) bus.publish(AgentEvent.task({ id: ctx.taskId, contextId: ctx.contextId, status: status(TaskState.TASK_STATE_SUBMITTED), artifacts: [], history: [m], metadata: undefined }));
      bus.publish(AgentEvent.artifactUpdate({ ...ids, artifact: { artifactId: `${m.messageId}:echo`, name: 'echo', description: '', parts: m.parts, metadata: undefined, extensions: [] }, append: false, lastChunk: true, metadata: undefined }));
      bus.publish(AgentEvent.statusUpdate({ ...ids, status: status(TaskState.TASK_STATE_COMPLETED), metadata: undefined }));
      bus.finished();
    },
  };
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
  app.use('/a2a', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  process.stdout.write(`direct A2A server listening on ${base}\n`);
}

/**
 * The hub path's recipient: a connected agent that holds the SSE inbox (`shape` stream) or
 * long-polls it (poll) and answers every delivery with the same echo (completed, artifact = the
 * parts received); completing removes the delivery.
 */
async function connectedAgent(hubUrl, apiKey, shape, concurrency) {
  if (shape === 'stream') {
    await startStreamingEchoAgent(hubUrl, apiKey, concurrency);
    process.stdout.write('connected agent streaming\n');
    return;
  }
  const pollers = Math.max(2, Math.ceil(concurrency / 8));
  const call = async (method, params) => {
    const reply = await rpc(hubUrl, '/a2a', apiKey, method, params);
    if (reply.error) throw new Error(`${method}: ${JSON.stringify(reply.error)}`);
    return reply.result;
  };
  process.stdout.write('connected agent polling\n');
  await Promise.all(
    Array.from({ length: pollers }, async () => {
      for (;;) {
        const { deliveries } = await call('x-hub/inbox.poll', { wait_ms: 25_000, max: 50 });
        // Completing a task removes its delivery: the answer is the only call per exchange.
        await Promise.all(
          deliveries.map((d) =>
            call('x-hub/tasks.update', { task_id: d.task_id, state: 'completed', artifacts: [{ name: 'echo', parts: d.message.parts }] }),
          ),
        );
      }
    }),
  );
}

/** Runs this file in `role` as a child (stopped by `cleanups`); resolves with the first stdout line matching `ready`. */
function startRole(cleanups, role, args, ready) {
  return startNodeProcess(cleanups, ROOT, [fileURLToPath(import.meta.url), role, ...args], {}, ready);
}

// ---------------------------------------------------------------------------------------------

function settings() {
  return {
    requests: Math.round(envNumber('BENCH_REQUESTS', 2000, 1)),
    warmup: Math.round(envNumber('BENCH_WARMUP', 200, 0)),
    concurrency: Math.round(envNumber('BENCH_CONCURRENCY', 16, 1)),
    hubEnv: parseHubEnv(),
    pgUrl: process.env.BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
    redisUrl: process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379',
    paths: paths(),
    agent: agentShape(),
    profile: process.env.BENCH_PROFILE === '1',
  };
}

function agentShape() {
  const shape = process.env.BENCH_AGENT || 'stream';
  if (shape !== 'stream' && shape !== 'poll') throw new UsageError(`BENCH_AGENT must be stream or poll (got "${shape}")`);
  return shape;
}

function paths() {
  const named = (process.env.BENCH_PATHS || 'hub,push').split(',').map((p) => p.trim()).filter(Boolean);
  const unknown = named.filter((p) => p !== 'hub' && p !== 'push');
  if (unknown.length || !named.length) throw new UsageError(`BENCH_PATHS: expected hub and/or push, got "${process.env.BENCH_PATHS}"`);
  return new Set(named);
}

/** An SDK client built the way a user would: from the card URL, with a fetch adding the key. */
async function sdkClient(cardUrl, apiKey) {
  const { ClientFactory, JsonRpcTransportFactory } = await import('@a2a-js/sdk/client');
  const fetchImpl = apiKey
    ? (input, init) => {
        const headers = new Headers(init?.headers);
        headers.set('Authorization', `Bearer ${apiKey}`);
        return fetch(input, { ...init, headers });
      }
    : undefined;
  return new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl })] }).createFromUrl(cardUrl, '');
}

/** `count` blocking echo exchanges, `concurrency` at a time; latencies in ms, errors counted. */
async function exchanges(client, count, concurrency) {
  const { Role, TaskState } = await import('@a2a-js/sdk');
  const latencies = [];
  let errors = 0;
  let firstError;
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) {
        const n = next++;
        const t0 = performance.now();
        try {
          const task = await client.sendMessage({
            tenant: '',
            message: {
              messageId: `bench-${process.pid}-${n}-${Math.random().toString(36).slice(2)}`,
              contextId: '',
              taskId: '',
              role: Role.ROLE_USER,
              parts: [{ content: { $case: 'text', value: TEXT }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
              metadata: undefined,
              extensions: [],
              referenceTaskIds: [],
            },
            configuration: undefined,
            metadata: undefined,
          });
          const echoed = task.artifacts?.[0]?.parts?.[0]?.content?.value;
          if (task.status?.state !== TaskState.TASK_STATE_COMPLETED || echoed !== TEXT) throw new Error(`unexpected answer: ${JSON.stringify(task)}`);
          latencies.push(performance.now() - t0);
        } catch (err) {
          errors += 1;
          firstError ??= err;
        }
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
  return { count, errors, firstError, seconds, throughput: latencies.length / seconds, p50: at(0.5), p99: at(0.99) };
}

/**
 * Measures one path; `processes` names the processes whose CPU per exchange is shown (the hub, the
 * agent), besides the database's PostgreSQL backends and Redis, all read from /proc.
 */
async function measure(name, client, opts, processes) {
  if (opts.warmup) await exchanges(client, opts.warmup, opts.concurrency);
  const ticks = () => ({
    own: processes.map(([, pid]) => processTicks(pid)),
    data: backendTicks(opts.dbName, { redis: true }),
  });
  const before = ticks();
  const result = await exchanges(client, opts.requests, opts.concurrency);
  const after = ticks();
  const ms = (t) => round((t * 1000) / TICKS_PER_SECOND / opts.requests, 2);
  result.cpuMs = Object.fromEntries([...processes.map(([label], i) => [label, ms(after.own[i] - before.own[i])]), ['PostgreSQL and Redis', ms(ticksSince(before.data, after.data))]]);
  log(`  ${name.padEnd(8)} ${fmt(round(result.throughput, 1))} exchanges/s   p50 ${round(result.p50, 2)} ms   p99 ${round(result.p99, 2)} ms   (${fmt(opts.requests)} in ${round(result.seconds, 2)} s, ${result.errors} errors)`);
  log(`           CPU per exchange: ${Object.entries(result.cpuMs).map(([label, x]) => `${label} ${x} ms`).join(', ')}`);
  if (result.errors) log(`           first error: ${result.firstError?.message ?? result.firstError}`);
  return result;
}

async function run(cleanups) {
  const opts = settings();
  log(`A2A echo exchange (blocking SendMessage, one text part): AgentHub vs a direct @a2a-js/sdk server`);
  log(`  ${fmt(opts.requests)} exchanges per path after ${fmt(opts.warmup)} warm-up, ${opts.concurrency} in flight; connected agent on the ${opts.agent === 'stream' ? 'SSE inbox (x-hub/inbox.stream)' : 'long-polled inbox (x-hub/inbox.poll)'}`);

  const { id, adminToken, env } = await freshHubSettings(cleanups, opts);
  // The push agent is the SDK server on loopback: the egress guard lets the hub reach it only so.
  const profileDir = join(HERE, 'results', 'profiles');
  if (opts.profile) await mkdir(profileDir, { recursive: true });
  const nodeArgs = opts.profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=a2a-hub-${id}.cpuprofile`] : [];
  const hub = await startHubProcess(ROOT, { ...env, HUB_ADMIN_TOKEN: adminToken, HUB_EGRESS_ALLOW_PRIVATE: 'true', ...opts.hubEnv }, nodeArgs);
  if (opts.profile) log(`  CPU profile of the hub: bench/results/profiles/a2a-hub-${id}.cpuprofile (written when it exits; times below are ms since it started)`);
  cleanups.push(() => hub.stop());
  const since = () => Math.round(performance.now() - hub.startedAt);
  const admin = async (method, params) => {
    const reply = await rpc(hub.url, '/admin', adminToken, method, params);
    if (reply.error) throw new UsageError(`${method}: ${JSON.stringify(reply.error)}`);
    return reply.result;
  };
  const tenant = `bench-${id}`;
  const sender = await admin('agents.create', { tenant_id: tenant, name: 'sender', create_tenant: true });
  const echo = await admin('agents.create', { tenant_id: tenant, name: 'echo', create_tenant: true, description: 'Echoes its input' });
  const connected = await startRole(cleanups, 'connected-agent', [hub.url, echo.api_key, opts.agent, String(opts.concurrency)], /connected agent (polling|streaming)/);
  const direct = await startRole(cleanups, 'direct-server', [], /listening on (\S+)/);

  // The push shape: the hub forwards to the very server the direct path measures.
  const pushAgent = await admin('agents.create', { tenant_id: tenant, name: 'push echo', create_tenant: true, endpoint_url: `${direct.match[1]}/a2a` });

  const measureOpts = { ...opts, dbName: new URL(env.DATABASE_URL).pathname.slice(1) };
  const measured = async (name, cardUrl, apiKey, agentPid) => {
    const client = await sdkClient(cardUrl, apiKey);
    const from = since();
    const result = await measure(name, client, measureOpts, [['hub', hub.pid], ['agent', agentPid]]);
    if (opts.profile) log(`           hub profile window (warm-up included): --from ${from} --to ${since()}`);
    // What the hub left behind would otherwise slow the path measured next, the direct one last.
    const left = await drainHub(env.DATABASE_URL);
    log(`           left behind: ${left.outbox} outbox events, ${left.log} event log messages; handled in ${left.seconds} s`);
    return result;
  };
  const viaHub = opts.paths.has('hub') ? await measured('AgentHub', `${hub.url}/agents/${echo.agent.id}/.well-known/agent-card.json`, sender.api_key, connected.pid) : undefined;
  const viaPush = opts.paths.has('push') ? await measured('push', `${hub.url}/agents/${pushAgent.agent.id}/.well-known/agent-card.json`, sender.api_key, direct.pid) : undefined;
  const viaDirect = await measure('direct', await sdkClient(`${direct.match[1]}/.well-known/agent-card.json`), measureOpts, [['server', direct.pid]]);

  if (viaHub?.errors || viaPush?.errors || viaDirect.errors) {
    log('  FAILED: exchanges failed; no throughput is claimed');
    return 1;
  }
  const verdict = (r) => `${round(r, 3)} of the direct throughput (target ≥ ${TARGET_RATIO}): ${r >= TARGET_RATIO ? 'PASS' : 'BELOW TARGET'}`;
  if (viaHub) log(`  ratio    hub → connected agent ${verdict(viaHub.throughput / viaDirect.throughput)}`);
  if (viaPush) log(`  ratio    hub → push agent (the direct server) ${verdict(viaPush.throughput / viaDirect.throughput)}`);
  return 0;
}

const [role, ...args] = process.argv.slice(2);
if (role === 'direct-server') await serveDirect();
else if (role === 'connected-agent') await connectedAgent(args[0], args[1], args[2], Number(args[3]));
else await runBench(run);

#!/usr/bin/env node
// The floor a hub path is measured against: the fewest parts the architecture must pay for, in one
// node process and nothing else. Koa reads and parses the JSON-RPC body, the bearer key is looked
// up (SHA-256) in a process-local Map, one grpc-js unary call goes over loopback to a handler that
// runs one PostgreSQL statement and answers; Koa writes the JSON answer. No validation, metrics,
// logging, error mapping or revocation. Two shapes:
//   read  the authenticated read: the workspace joined with the caller's membership and the member
//         count, in one query (what `x-hub/workspace.get` must at least do);
//   send  the durable send: one CTE inserts the task, its delivery and its outbox event (one round
//         trip, one commit; what a durable non-blocking `SendMessage` must at least do).
// The tables live in their own schema (`bench_floor_<random>`) of the database it is given, and
// are dropped on SIGTERM. Used by the benchmarks as a child process:
//
//   node bench/floor.js   with FLOOR_SHAPE=read|send, FLOOR_PG_URL, FLOOR_KEYS (JSON
//                         {"<bearer key>": "<agent id>"}), FLOOR_SEED (JSON {workspaceId, agentId}
//                         for read), FLOOR_RPC (below); prints "FLOOR listening on <url>" once ready.
//
// FLOOR_RPC=hub (read shape only) makes the one call through the hub's own RPC layer instead of
// bare grpc-js with JSON: `createClient` and `GrpcServer` from libs/runtime on the workspace
// service's `GetWorkspace` (protobuf, the principal and expiry signed with the internal key, a
// deadline, the retry service config, gRPC metrics). Everything else stays the floor's, so its
// ratio to the floor is what the hub's internal calls cost on their own.

import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

const hashKey = (key) => createHash('sha256').update(key).digest('hex');

/**
 * Starts a floor in this process. `keys` maps bearer keys to agent ids; `seed` names the workspace
 * and member the read shape answers for. Resolves to `{ url, stop }`.
 */
export async function startFloor({ shape, pgUrl, keys, seed, rpc = 'grpc-js' }) {
  if (rpc !== 'grpc-js' && rpc !== 'hub') throw new Error(`FLOOR_RPC must be grpc-js or hub (got "${rpc}")`);
  if (rpc === 'hub' && shape !== 'read') throw new Error('FLOOR_RPC=hub has the read shape only');
  const Koa = require('koa');
  const grpc = require('@grpc/grpc-js');
  const pg = require('pg');
  const pool = new pg.Pool({ connectionString: pgUrl, max: 10 });
  const schema = `bench_floor_${randomBytes(4).toString('hex')}`;
  await pool.query(`CREATE SCHEMA ${schema}`);
  await pool.query(`CREATE TABLE ${schema}.workspaces (id text PRIMARY KEY, name text, description text, owner text, created_at bigint)`);
  await pool.query(`CREATE TABLE ${schema}.members (workspace_id text, agent_id text, role text, added_at bigint, PRIMARY KEY (workspace_id, agent_id))`);
  await pool.query(`CREATE TABLE ${schema}.tasks (id text PRIMARY KEY, sender text, recipient text, state text, message jsonb, created_at timestamptz DEFAULT now())`);
  await pool.query(`CREATE TABLE ${schema}.deliveries (id text PRIMARY KEY, task_id text, recipient text, created_at timestamptz DEFAULT now())`);
  await pool.query(`CREATE TABLE ${schema}.outbox (id bigserial PRIMARY KEY, topic text, payload jsonb)`);
  if (seed) {
    await pool.query(`INSERT INTO ${schema}.workspaces VALUES ($1, 'bench workspace', '', $2, 1)`, [seed.workspaceId, seed.agentId]);
    await pool.query(`INSERT INTO ${schema}.members VALUES ($1, $2, 'admin', 1)`, [seed.workspaceId, seed.agentId]);
  }

  let seq = 0;
  const statements = {
    read: (req) => ({
      text: `SELECT w.id, w.name, w.description, w.owner, w.created_at, m.role,
               (SELECT count(*) FROM ${schema}.members c WHERE c.workspace_id = w.id) AS member_count
             FROM ${schema}.workspaces w JOIN ${schema}.members m ON m.workspace_id = w.id AND m.agent_id = $2
             WHERE w.id = $1`,
      values: [req.params?.workspace_id, req.agent],
    }),
    send: (req) => ({
      text: `WITH t AS (INSERT INTO ${schema}.tasks (id, sender, recipient, state, message) VALUES ($1, $2, $3, 'submitted', $4) RETURNING id),
               d AS (INSERT INTO ${schema}.deliveries (id, task_id, recipient) SELECT 'dlv_' || id, id, $3 FROM t RETURNING id)
             INSERT INTO ${schema}.outbox (topic, payload) SELECT 'task.created', jsonb_build_object('id', t.id) FROM t, d RETURNING (SELECT id FROM t) AS id`,
      values: [`task_${process.pid}_${++seq}`, req.agent, req.params?.configuration?.agentId ?? '', JSON.stringify(req.params?.message ?? {})],
    }),
  };
  const statement = statements[shape];
  if (!statement) throw new Error(`FLOOR_SHAPE must be read or send (got "${shape}")`);

  const json = { serialize: (o) => Buffer.from(JSON.stringify(o)), deserialize: (b) => JSON.parse(b.toString()) };
  const service = {
    call: { path: '/bench.Floor/Call', requestStream: false, responseStream: false, requestSerialize: json.serialize, requestDeserialize: json.deserialize, responseSerialize: json.serialize, responseDeserialize: json.deserialize },
  };
  const server = new grpc.Server();
  server.addService(service, {
    call: (call, callback) => {
      pool.query(statement(call.request)).then((r) => callback(null, r.rows[0] ?? null), (err) => callback(err));
    },
  });
  const grpcPort = await new Promise((ok, fail) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => (err ? fail(err) : ok(port))));
  const Client = grpc.makeGenericClientConstructor(service, 'Floor');
  const client = new Client(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure());
  const hubRpc = rpc === 'hub' ? await startHubRpc(pool, statement) : undefined;
  const call = hubRpc
    ? hubRpc.call
    : (agent, params) => new Promise((ok, fail) => client.call({ agent, params }, { deadline: Date.now() + 10_000 }, (err, r) => (err ? fail(err) : ok(r))));

  const agents = new Map(Object.entries(keys).map(([key, agent]) => [hashKey(key), agent]));
  const app = new Koa();
  app.silent = true;
  app.use(async (ctx) => {
    let body = '';
    for await (const chunk of ctx.req) body += chunk;
    const req = JSON.parse(body);
    const agent = agents.get(hashKey((ctx.get('authorization') || '').replace(/^Bearer /, '')));
    if (!agent) {
      ctx.status = 401;
      ctx.body = { jsonrpc: '2.0', id: req.id, error: { code: -32001, message: 'Unauthorized' } };
      return;
    }
    const row = await call(agent, req.params);
    ctx.body = { jsonrpc: '2.0', id: req.id, result: shape === 'read' ? { workspace: row } : { task: row } };
  });
  const http = createServer(app.callback());
  http.keepAliveTimeout = 65_000;
  http.headersTimeout = 66_000;
  await new Promise((ok, fail) => {
    http.once('error', fail);
    http.listen(0, '127.0.0.1', ok);
  });
  return {
    url: `http://127.0.0.1:${http.address().port}`,
    async stop() {
      http.closeAllConnections();
      await new Promise((ok) => http.close(() => ok()));
      client.close();
      server.forceShutdown();
      await hubRpc?.stop();
      await pool.query(`DROP SCHEMA ${schema} CASCADE`).catch(() => undefined);
      await pool.end();
    },
  };
}

/**
 * The read shape's call through the hub's RPC layer (see FLOOR_RPC above): the same statement,
 * answered as the workspace service's GetWorkspace and turned back into the floor's row.
 */
async function startHubRpc(pool, statement) {
  const { createClient, createLogger, GrpcServer, InternalKey, Metrics } = await import('@agenthub/runtime');
  const { workspacev1 } = await import('@agenthub/proto');
  const { WorkspaceService } = workspacev1;
  // Only the one method, so the server has no other handlers to stub.
  const service = { typeName: WorkspaceService.typeName, methods: [WorkspaceService.method.getWorkspace] };
  const internalKey = InternalKey.generate();
  const metrics = new Metrics();
  const server = new GrpcServer({ log: createLogger({ level: 'warn' }), metrics, internalKey });
  server.add(service, {
    getWorkspace: async (request, ctx) => {
      const { rows } = await pool.query(statement({ agent: ctx.principal.agentId, params: { workspace_id: request.workspaceId } }));
      const row = rows[0];
      if (!row) return {};
      return {
        workspace: { id: row.id, name: row.name, description: row.description, ownerAgentId: row.owner, createdAt: BigInt(row.created_at) },
        role: row.role === 'admin' ? workspacev1.Role.ADMIN : workspacev1.Role.READ,
        memberCount: Number(row.member_count),
      };
    },
  });
  const port = await server.listen('127.0.0.1:0');
  const client = createClient(service, `127.0.0.1:${port}`, { metrics, defaultTimeoutMs: 10_000, internalKey });
  return {
    async call(agent, params) {
      const answer = await client.getWorkspace({ workspaceId: params?.workspace_id ?? '' }, { principal: { kind: 'agent', agentId: agent, tenantId: 'floor' } });
      const { workspace } = answer;
      if (!workspace) return null;
      return { id: workspace.id, name: workspace.name, description: workspace.description, owner: workspace.ownerAgentId, created_at: String(workspace.createdAt), role: answer.role === workspacev1.Role.ADMIN ? 'admin' : 'read', member_count: String(answer.memberCount) };
    },
    async stop() {
      client.close();
      await server.shutdown(0);
    },
  };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].replace(/^.*\//, '/'))) {
  const floor = await startFloor({
    shape: process.env.FLOOR_SHAPE || 'read',
    pgUrl: process.env.FLOOR_PG_URL,
    keys: JSON.parse(process.env.FLOOR_KEYS || '{}'),
    seed: process.env.FLOOR_SEED ? JSON.parse(process.env.FLOOR_SEED) : undefined,
    rpc: process.env.FLOOR_RPC || undefined,
  });
  process.stdout.write(`FLOOR listening on ${floor.url}\n`);
  const stop = () => floor.stop().then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

import { eventsv1 } from '@agenthub/proto';
import { callerOf, checkTargetUrl, HubError, newId, Reason, type CallContext } from '@agenthub/runtime';
import { a2aNameOf, stateOfWord } from '@agenthub/tasks';
import type { EventsEnv } from './env.js';
import { newSigningSecret } from './signing.js';

/**
 * A2A task push notification configs. Each is a webhooks row bound to one task (workspace_id
 * `task:<id>`), so it shares the delivery queue, signing, retries, order and replay of webhooks;
 * every transition of the task is delivered as an A2A StreamResponse `statusUpdate`, with the
 * config's token and authentication as headers. The gateway has checked that the task is the
 * caller's; each agent sees only the configs it created.
 */

/** Most configs one agent keeps on one task. */
export const MAX_CONFIGS_PER_TASK = 10;
const TASK_EVENT = 'messaging.task.transitioned';
const TASK_SCOPE = 'task:';
const scopeOf = (taskId: string) => `${TASK_SCOPE}${taskId}`;
/** Whether a webhook's scope (its workspace_id column) is a task push config's. */
export const isTaskScope = (scope: string) => scope.startsWith(TASK_SCOPE);

interface ConfigRow {
  push_config_id: string;
  workspace_id: string;
  url: string;
  push_token: string | null;
  push_auth_scheme: string | null;
  push_auth_credentials: string | null;
  created_at: number | string;
}

const COLUMNS = 'push_config_id, workspace_id, url, push_token, push_auth_scheme, push_auth_credentials, created_at';

function toConfig(row: ConfigRow): eventsv1.TaskPushConfig {
  return {
    $typeName: 'agenthub.events.v1.TaskPushConfig',
    id: row.push_config_id,
    taskId: row.workspace_id.slice(TASK_SCOPE.length),
    url: row.url,
    token: row.push_token ?? '',
    authScheme: row.push_auth_scheme ?? '',
    authCredentials: row.push_auth_credentials ?? '',
    createdAt: BigInt(row.created_at),
  };
}

function bounded(value: string, field: string, max: number, required = false): string {
  if (required && !value) throw HubError.invalidParams(field, 'is required');
  if (value.length > max) throw HubError.invalidParams(field, `must be at most ${max} characters`);
  return value;
}

function notFound(): HubError {
  return new HubError(Reason.NOT_FOUND, 'Push notification config not found', { field: 'id' });
}

export async function createTaskPushConfig(env: EventsEnv, ctx: CallContext, request: eventsv1.CreateTaskPushConfigRequest) {
  const caller = callerOf(ctx);
  const c = request.config;
  if (!c) throw HubError.invalidParams('config', 'is required');
  const taskId = bounded(c.taskId, 'taskId', 128, true);
  const id = bounded(c.id, 'id', 128) || newId('pnc');
  const token = bounded(c.token, 'token', 1024);
  const scheme = bounded(c.authScheme, 'authentication.scheme', 64);
  const credentials = bounded(c.authCredentials, 'authentication.credentials', 4096);
  if (credentials && !scheme) throw HubError.invalidParams('authentication.scheme', 'is required with credentials');
  const url = await checkTargetUrl(c.url, 'url', env.policy);
  const secret = newSigningSecret();
  const now = env.clock();
  const config = await env.db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`push:${caller.agentId}:${taskId}`]);
    const { rows: counted } = await tx.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM webhooks WHERE workspace_id = $1 AND created_by = $2 AND push_config_id <> $3',
      [scopeOf(taskId), caller.agentId, id],
    );
    if ((counted[0]?.n ?? 0) >= MAX_CONFIGS_PER_TASK) {
      throw new HubError(Reason.LIMIT_EXCEEDED, `A task holds at most ${MAX_CONFIGS_PER_TASK} push notification configs per agent`, { field: 'taskId' });
    }
    // The same id again replaces the config (A2A: the client names its configs).
    const { rows } = await tx.query<ConfigRow>(
      `INSERT INTO webhooks (id, workspace_id, url, event_types, description, secret, created_at, created_by, agent_tenant_id,
                             push_config_id, push_token, push_auth_scheme, push_auth_credentials)
       VALUES ($1, $2, $3, $4, '', $5, $6, $7, $8, $9, $10, $11, $12)
       ON CONFLICT (workspace_id, created_by, push_config_id) WHERE push_config_id IS NOT NULL
       DO UPDATE SET url = EXCLUDED.url, secret = EXCLUDED.secret, push_token = EXCLUDED.push_token,
         push_auth_scheme = EXCLUDED.push_auth_scheme, push_auth_credentials = EXCLUDED.push_auth_credentials,
         enabled = true, disabled_reason = NULL, disabled_at = NULL
       RETURNING ${COLUMNS}`,
      [newId('wh'), scopeOf(taskId), url, [TASK_EVENT], secret, now, caller.agentId, caller.tenantId, id, token || null, scheme || null, credentials || null],
    );
    return toConfig(rows[0]!);
  }, ctx.signal);
  ctx.log.info({ task_id: taskId }, 'task push notification config created');
  return { config, signingSecret: secret };
}

async function find(env: EventsEnv, signal: AbortSignal, agentId: string, taskId: string, id: string): Promise<eventsv1.TaskPushConfig | undefined> {
  const { rows } = await env.db.query<ConfigRow>(
    `SELECT ${COLUMNS} FROM webhooks WHERE workspace_id = $1 AND created_by = $2 AND push_config_id = $3`,
    [scopeOf(taskId), agentId, id],
    signal,
  );
  return rows[0] && toConfig(rows[0]);
}

export async function getTaskPushConfig(env: EventsEnv, ctx: CallContext, request: eventsv1.GetTaskPushConfigRequest) {
  const caller = callerOf(ctx);
  const config = await find(env, ctx.signal, caller.agentId, bounded(request.taskId, 'taskId', 128, true), bounded(request.id, 'id', 128, true));
  if (!config) throw notFound();
  return { config };
}

export async function listTaskPushConfigs(env: EventsEnv, ctx: CallContext, request: eventsv1.ListTaskPushConfigsRequest) {
  const caller = callerOf(ctx);
  const taskId = bounded(request.taskId, 'taskId', 128, true);
  const { rows } = await env.db.query<ConfigRow>(
    `SELECT ${COLUMNS} FROM webhooks WHERE workspace_id = $1 AND created_by = $2 AND push_config_id IS NOT NULL ORDER BY seq`,
    [scopeOf(taskId), caller.agentId],
    ctx.signal,
  );
  return { configs: rows.map(toConfig) };
}

export async function deleteTaskPushConfig(env: EventsEnv, ctx: CallContext, request: eventsv1.DeleteTaskPushConfigRequest) {
  const caller = callerOf(ctx);
  const taskId = bounded(request.taskId, 'taskId', 128, true);
  const id = bounded(request.id, 'id', 128, true);
  const { rowCount } = await env.db.query(
    'DELETE FROM webhooks WHERE workspace_id = $1 AND created_by = $2 AND push_config_id = $3',
    [scopeOf(taskId), caller.agentId, id],
    ctx.signal,
  );
  if (rowCount === 0) throw notFound();
  return {};
}

/**
 * Queues a task transition for the task's push configs, as the A2A StreamResponse a push
 * notification carries; idempotent like every intake.
 */
export async function intakeTaskEvent(
  env: EventsEnv,
  event: { eventId: string; type: string; payload: string; occurredAt: number | undefined },
  signal: AbortSignal,
): Promise<string[]> {
  if (event.type !== TASK_EVENT) return [];
  const { timestamp, data } = JSON.parse(event.payload) as { timestamp?: string; data?: { task_id?: string; context_id?: string; state?: string } };
  if (!data?.task_id) return [];
  const { rows } = await env.db.query<{ id: string }>(
    `SELECT id FROM webhooks WHERE workspace_id = $1 AND enabled AND ($2::bigint IS NULL OR created_at <= $2::bigint) ORDER BY seq`,
    [scopeOf(data.task_id), event.occurredAt ?? null],
    signal,
  );
  if (rows.length === 0) return [];
  const state = stateOfWord(data.state ?? '');
  const payload = JSON.stringify({
    statusUpdate: {
      taskId: data.task_id,
      contextId: data.context_id ?? '',
      status: { state: state === undefined ? 'TASK_STATE_UNSPECIFIED' : a2aNameOf(state), ...(timestamp ? { timestamp } : {}) },
    },
  });
  return env.deliveries.intakeFor(signal, rows.map((r) => r.id), { eventId: event.eventId, type: event.type, payload }, env.clock());
}

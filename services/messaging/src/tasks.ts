import { fromJson, toJson } from '@bufbuild/protobuf';
import { identityv1, messagingv1 } from '@agenthub/proto';
import { detachedSignal, HubError, newId, Reason, waitSignal, type CallContext, type Caller } from '@agenthub/runtime';
import { onlineKey, type MessagingEnv, type MessagingLimits } from './env.js';
import { announce, listenForSettled, waitForSettled } from './lifecycle.js';
import type { Listener } from './wake.js';
import { acceptsAny, FINAL, stateOfWord, UPDATABLE, UPDATE_TARGETS, wordOf } from '@agenthub/tasks';
import type { GrowthCheck, NewDelivery, TaskRecord } from './task-store.js';
import type { ItemSelection } from './task-items.js';
import type { NewTaskRows } from './send-batch.js';

const { TaskState } = messagingv1;
type TaskState = messagingv1.TaskState;

/**
 * Refuses a change that would grow the task past `maxTaskItems` messages or artifacts or
 * `maxTaskBytes`; the store calls it before writing, so a refused change commits nothing.
 */
export function taskGrowthCheck(limits: MessagingLimits): GrowthCheck {
  return (task, growth) => {
    const max = limits.maxTaskItems;
    if (task.messageCount + growth.messages > max) {
      throw new HubError(Reason.LIMIT_EXCEEDED, `The task holds its maximum of ${max} messages; continue in a new task`, { field: 'message' });
    }
    if (task.artifactCount + growth.artifacts > max) {
      throw new HubError(Reason.LIMIT_EXCEEDED, `The task holds its maximum of ${max} artifacts`, { field: 'artifacts' });
    }
    if (task.bytes + growth.bytes > limits.maxTaskBytes) {
      throw new HubError(
        Reason.LIMIT_EXCEEDED,
        `The task would pass its maximum of ${limits.maxTaskBytes} bytes of messages and artifacts (MESSAGING_TASK_MAX_BYTES; it holds ${task.bytes}); continue in a new task`,
        { field: growth.messages ? 'message' : 'artifacts' },
      );
    }
  };
}

/**
 * Refuses a new task to a recipient whose inbox holds its quota of undelivered deliveries (the
 * recipient's tenant's override, else HUB_QUOTA_QUEUED_DELIVERIES_PER_AGENT); see InboxRoom for
 * how closely it holds.
 */
async function requireInboxRoom(env: MessagingEnv, ctx: CallContext, agent: identityv1.Agent): Promise<void> {
  const max = await env.overrides.limit(agent.tenantId, 'queued_deliveries_per_agent', env.limits.maxQueuedDeliveriesPerAgent, ctx);
  if (Number.isFinite(max) && !(await env.inboxRoom.take(ctx.signal, agent.id, max))) {
    throw HubError.quotaExceeded('queued_deliveries_per_agent', `Quota exceeded: the recipient has ${max} deliveries waiting in its inbox; try again once it has taken some`);
  }
}

const messageJson = (message: messagingv1.Message) => toJson(messagingv1.MessageSchema, message);
const artifactJson = (artifact: messagingv1.Artifact) => toJson(messagingv1.ArtifactSchema, artifact);

/** The wire task, history limited to the last `historyLength` messages (absent: all). */
export function taskView(task: TaskRecord, historyLength?: number): messagingv1.Task {
  const shown = historyLength === undefined ? task.messages : historyLength <= 0 ? [] : task.messages.slice(-historyLength);
  return {
    $typeName: 'agenthub.messaging.v1.Task',
    id: task.id,
    contextId: task.contextId,
    state: stateOfWord(task.state)!,
    updatedAt: BigInt(task.updatedAt),
    createdAt: BigInt(task.createdAt),
    messages: shown.map((m) => fromJson(messagingv1.MessageSchema, m as never)),
    artifacts: task.artifacts.map((a) => fromJson(messagingv1.ArtifactSchema, a as never)),
    senderAgentId: task.senderAgentId,
    recipientAgentId: task.recipientAgentId,
    version: BigInt(task.version),
  };
}

/** Largest inline `data` of a file part, in base64 characters (512 KiB decoded), as the gateway bounds sends. */
export const MAX_INLINE_DATA_CHARS = 4 * Math.ceil((512 * 1024) / 3);

/** Checks every part, naming the first bad one as `<prefix>[i].<field>`. */
export function validateParts(parts: messagingv1.Part[], prefix: string, maxParts: number): void {
  if (parts.length === 0) throw HubError.invalidParams(prefix, 'must have at least 1 items');
  if (parts.length > maxParts) throw HubError.invalidParams(prefix, `must have at most ${maxParts} items`);
  parts.forEach((part, i) => {
    const at = `${prefix}[${i}]`;
    const c = part.content;
    switch (c.case) {
      case 'text':
        return;
      case 'file':
        if (!c.value.mimeType) throw HubError.invalidParams(`${at}.mimeType`, 'is required');
        if (!c.value.data === !c.value.uri) throw HubError.invalidParams(`${at}.data`, 'or uri is required (exactly one)');
        if (c.value.data.length > MAX_INLINE_DATA_CHARS) {
          throw HubError.invalidParams(`${at}.data`, `must be at most ${MAX_INLINE_DATA_CHARS} base64 characters; send a uri for larger files`);
        }
        return;
      case 'data':
        if (!c.value.mimeType) throw HubError.invalidParams(`${at}.mimeType`, 'is required');
        return;
      default:
        throw HubError.invalidParams(`${at}.kind`, 'must be one of text, file, data');
    }
  });
}

function taskNotFound(): HubError {
  return new HubError(Reason.TASK_NOT_FOUND, 'Task not found');
}

/**
 * The task if the caller is its sender or recipient; TASK_NOT_FOUND otherwise. With the items
 * `load` selects (default none).
 */
export async function visibleTask(env: MessagingEnv, signal: AbortSignal, caller: Caller, taskId: string, load: ItemSelection | false = false): Promise<TaskRecord> {
  if (!taskId) throw HubError.invalidParams('id', 'is required');
  const task = await env.tasks.getTask(signal, taskId, load);
  if (!task || (task.senderAgentId !== caller.agentId && task.recipientAgentId !== caller.agentId)) throw taskNotFound();
  return task;
}

function newDelivery(message: messagingv1.Message, ttlSeconds: number, now: number, recipientTenantId: string): NewDelivery {
  return { id: newId('dlv'), message: messageJson(message), expiresAt: now + ttlSeconds * 1000, recipientTenantId };
}

/**
 * Across tenants, an approved grant between the two agents, asked of identity on every call (never
 * cached): a revoked grant refuses the very next send, continuation or update.
 */
async function requireGrant(env: MessagingEnv, ctx: CallContext, caller: Caller, other: { id: string; tenantId: string }) {
  if (other.tenantId === caller.tenantId) return;
  const grant = await env.identity.checkGrant({ agentId: caller.agentId, otherAgentId: other.id }, { parent: ctx });
  if (!grant.approved) throw HubError.grantRequired();
}

async function isOnline(env: MessagingEnv, signal: AbortSignal, agentId: string): Promise<boolean> {
  return (await env.kv.get(onlineKey(agentId), signal)) !== undefined;
}

/**
 * A send. A new task may come with its idempotency key (`key`, send-once.ts): it is claimed with
 * the task's rows, and when an earlier send holds it nothing is written and the answer is
 * 'key-taken'.
 */
export async function sendMessage(env: MessagingEnv, ctx: CallContext, caller: Caller, request: messagingv1.SendMessageRequest): Promise<{ task: messagingv1.Task }>;
export async function sendMessage(
  env: MessagingEnv,
  ctx: CallContext,
  caller: Caller,
  request: messagingv1.SendMessageRequest,
  newTask: { id: string; key: NewTaskRows['key'] },
): Promise<{ task: messagingv1.Task } | 'key-taken'>;
export async function sendMessage(
  env: MessagingEnv,
  ctx: CallContext,
  caller: Caller,
  request: messagingv1.SendMessageRequest,
  newTask: { id?: string; key?: NewTaskRows['key'] } = {},
): Promise<{ task: messagingv1.Task } | 'key-taken'> {
  const message = request.message;
  if (!message) throw HubError.invalidParams('message', 'is required');
  validateParts(message.parts, 'message.parts', env.limits.maxParts);
  if (request.historyLength !== undefined && request.historyLength < 0) {
    throw HubError.invalidParams('configuration.historyLength', 'must be at least 0');
  }
  const ttl = request.ttlSeconds === undefined ? env.limits.defaultTtlSeconds : Number(request.ttlSeconds);
  if (ttl < 0) throw HubError.invalidParams('configuration.x-ttl', 'must be at least 0');
  const stored: messagingv1.Message = { ...message, role: message.role || 'user', messageId: message.messageId || newId('msg') };

  let task: TaskRecord;
  let subscribed: Listener | undefined;
  if (request.taskId) {
    // Continuation: only the task's sender answers it; it must be waiting for input.
    const current = await visibleTask(env, ctx.signal, caller, request.taskId);
    if (current.senderAgentId !== caller.agentId) throw taskNotFound();
    if (request.recipientAgentId && request.recipientAgentId !== current.recipientAgentId) {
      throw HubError.invalidParams('configuration.agentId', 'does not match the task\'s recipient');
    }
    // The grant that allowed the first send must still hold for every later one.
    const recipient = await env.recipients.get(current.recipientAgentId, ctx);
    if (recipient) await requireGrant(env, ctx, caller, recipient);
    const now = env.now();
    const moved = await env.tasks.transition(
      ctx.signal,
      current.id,
      (t) => {
        if (!UPDATABLE.has(t.state)) {
          throw HubError.invalidOperation(`Task is ${t.state}; only a task in input-required can be continued`);
        }
        return {
          next: { state: 'submitted', updatedAt: now },
          append: { messages: [messageJson(stored)] },
          // A recipient identity no longer knows has no tenant to count its delivery under.
          delivery: newDelivery(stored, ttl, now, recipient?.tenantId ?? ''),
        };
      },
      { check: taskGrowthCheck(env.limits), load: { historyLength: request.historyLength, artifacts: true }, current },
    );
    if (!moved) throw taskNotFound();
    task = moved.after;
    await announce(env, task, ctx);
  } else {
    const recipientId = request.recipientAgentId;
    if (!recipientId) throw HubError.invalidParams('configuration.agentId', 'is required');
    const agent = await env.recipients.get(recipientId, ctx);
    if (!agent) throw new HubError(Reason.NOT_FOUND, 'Agent not found', { field: 'configuration.agentId' });
    await requireGrant(env, ctx, caller, agent);
    const accepted = request.acceptedOutputModes;
    if (!acceptsAny(accepted, agent.outputModes)) {
      throw new HubError(
        Reason.CONTENT_TYPE_NOT_SUPPORTED,
        `Content type not supported: the agent produces ${agent.outputModes.join(', ')}`,
        { field: 'configuration.acceptedOutputModes' },
      );
    }
    const now = env.now();
    const offlineNoQueue = ttl === 0 && !(await isOnline(env, ctx.signal, agent.id));
    const taskId = newTask.id ?? newId('task');
    task = {
      id: taskId,
      contextId: request.contextId || newId('ctx'),
      senderAgentId: caller.agentId,
      senderTenantId: caller.tenantId,
      recipientAgentId: agent.id,
      state: offlineNoQueue ? 'failed' : 'submitted',
      messages: [messageJson(stored)],
      artifacts: [],
      createdAt: now,
      updatedAt: now,
      // Counted (and checked against the limits) by createTask.
      messageCount: 0,
      artifactCount: 0,
      bytes: 0,
      version: 1,
    };
    // x-ttl 0 to an online agent still queues: it has until its next poll (claim window) to take it.
    const delivery = offlineNoQueue ? undefined : newDelivery(stored, ttl === 0 ? env.limits.onlineMs / 1000 : ttl, now, agent.tenantId);
    // A push agent's deliveries are forwarded by the push worker (push.ts), which needs its endpoint.
    if (agent.endpointUrl) await env.pushes.recordPushAgent(ctx.signal, agent.id, agent.endpointUrl, agent.tenantId);
    // A blocking send subscribes before its task exists: no transition can come before the
    // subscription, so its wait reads nothing first (a Redis round trip instead of a query).
    // Nothing between here and the try below can fail and leave the subscription open.
    if (request.blocking && !offlineNoQueue) subscribed = await listenForSettled(env, taskId, waitSignal(ctx));
    const max = env.limits.maxTasksInFlightPerSender;
    let inserted: Awaited<ReturnType<typeof env.tasks.createTask>>;
    try {
      if (delivery) await requireInboxRoom(env, ctx, agent);
      inserted = await env.tasks.createTask(ctx.signal, task, delivery, { check: taskGrowthCheck(env.limits), maxInFlight: max, key: newTask.key });
    } catch (err) {
      void subscribed?.close();
      throw err;
    }
    if (!inserted.created) {
      void subscribed?.close();
      if (inserted.refused === 'key-taken') return 'key-taken';
      throw HubError.quotaExceeded('tasks_in_flight_per_sender', `Quota exceeded: an agent may have at most ${max} tasks submitted or working; wait for some to finish`);
    }
    task = inserted.created;
  }
  // Not awaited: the delivery is committed, and a recipient that misses the wake claims it on its
  // next poll; the sender need not wait for the publish (coalesced per recipient, wake.ts).
  if (task.state === 'submitted') env.wakes.wake(task.recipientAgentId, ctx.log);

  if (request.blocking && !FINAL.has(task.state)) {
    env.settled.expect(task.id);
    let handed: TaskRecord | undefined;
    try {
      await waitForSettled(env, ctx.signal, task.id, env.limits.blockingMs, subscribed ?? listenForSettled(env, task.id, waitSignal(ctx)), subscribed !== undefined);
    } finally {
      handed = env.settled.take(task.id);
    }
    task = handed ?? (await env.tasks.getTask(ctx.signal, task.id, { historyLength: request.historyLength, artifacts: true })) ?? task;
  } else {
    void subscribed?.close();
  }
  return { task: taskView(task, request.historyLength) };
}

export async function getTask(env: MessagingEnv, ctx: CallContext, caller: Caller, request: messagingv1.GetTaskRequest) {
  if (request.historyLength !== undefined && request.historyLength < 0) throw HubError.invalidParams('historyLength', 'must be at least 0');
  const task = await visibleTask(env, ctx.signal, caller, request.taskId, { historyLength: request.historyLength, artifacts: true });
  return { task: taskView(task, request.historyLength) };
}

const DEFAULT_PAGE = 50;
const MAX_PAGE = 100;

/** Opaque to callers: the (updatedAt, id) of the last task of the previous page. */
function pageToken(task: TaskRecord): string {
  return Buffer.from(JSON.stringify([task.updatedAt, task.id])).toString('base64url');
}

function pageCursor(token: string): { updatedAt: number; id: string } {
  try {
    const [updatedAt, id] = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as unknown[];
    // Decoded text is the caller's: only what we could have issued goes on to the query.
    if (Number.isSafeInteger(updatedAt) && (updatedAt as number) >= 0 && typeof id === 'string' && /^[\w-]{1,128}$/.test(id)) {
      return { updatedAt: updatedAt as number, id };
    }
  } catch {
    // Falls through to the refusal: a token we did not issue.
  }
  throw HubError.invalidParams('pageToken', 'is not a token from a previous page');
}

export async function listTasks(env: MessagingEnv, ctx: CallContext, caller: Caller, request: messagingv1.ListTasksRequest) {
  if (request.pageSize < 0 || request.pageSize > MAX_PAGE) throw HubError.invalidParams('pageSize', `must be between 1 and ${MAX_PAGE}`);
  if (request.historyLength !== undefined && request.historyLength < 0) throw HubError.invalidParams('historyLength', 'must be at least 0');
  const state = request.state === TaskState.UNSPECIFIED ? undefined : wordOf(request.state);
  if (request.state !== TaskState.UNSPECIFIED && !state) throw HubError.invalidParams('status', 'is not a task state');
  const size = request.pageSize || DEFAULT_PAGE;
  const { tasks, total } = await env.tasks.listTasks(
    ctx.signal,
    caller.agentId,
    {
      contextId: request.contextId || undefined,
      peerAgentId: request.peerAgentId || undefined,
      state,
      updatedAfter: request.updatedAfter ? Number(request.updatedAfter) : undefined,
      after: request.pageToken ? pageCursor(request.pageToken) : undefined,
    },
    size + 1,
  );
  // A page also ends before the tasks it returns would pass maxTaskBytes (their stored size, an
  // upper bound of what they show), so one answer always fits a gRPC message; the first always goes.
  const shows = request.historyLength !== 0 || request.includeArtifacts;
  let bytes = 0;
  let end = 0;
  while (end < Math.min(size, tasks.length)) {
    bytes += shows ? tasks[end]!.bytes : 0;
    if (end > 0 && bytes > env.limits.maxTaskBytes) break;
    end += 1;
  }
  const page = await env.tasks.withItems(ctx.signal, tasks.slice(0, end), { historyLength: request.historyLength, artifacts: request.includeArtifacts });
  return {
    tasks: page.map((t) => taskView(t, request.historyLength)),
    nextPageToken: tasks.length > end ? pageToken(page.at(-1)!) : '',
    totalSize: total,
  };
}

export async function cancelTask(env: MessagingEnv, ctx: CallContext, caller: Caller, request: messagingv1.CancelTaskRequest) {
  const task = await visibleTask(env, ctx.signal, caller, request.taskId);
  const now = env.now();
  const moved = await env.tasks.transition(ctx.signal, task.id, (t) => {
    if (!UPDATABLE.has(t.state)) {
      throw new HubError(Reason.TASK_NOT_CANCELABLE, `Task cannot be canceled: it is ${t.state}`);
    }
    return { next: { state: 'canceled', updatedAt: now }, purge: true };
  });
  if (!moved) throw taskNotFound();
  // A push agent's own task is canceled too, best effort, by the push worker (asked even if this
  // caller left: the cancel is committed).
  await env.pushes.requestPushCancel(detachedSignal(), task.id);
  await announce(env, moved.after, ctx);
  return { task: taskView(moved.after) };
}

export async function updateTask(env: MessagingEnv, ctx: CallContext, caller: Caller, request: messagingv1.UpdateTaskRequest) {
  const task = await visibleTask(env, ctx.signal, caller, request.taskId);
  if (task.recipientAgentId !== caller.agentId) {
    throw new HubError(Reason.ACCESS_DENIED, 'Only the task\'s recipient can update it');
  }
  const to = wordOf(request.state);
  if (!to || !UPDATE_TARGETS.has(to)) {
    throw HubError.invalidParams('state', `must be one of ${[...UPDATE_TARGETS].join(', ')}`);
  }
  if (request.message) validateParts(request.message.parts, 'message.parts', env.limits.maxParts);
  request.artifacts.forEach((artifact, i) => validateParts(artifact.parts, `artifacts[${i}].parts`, env.limits.maxParts));
  // Across tenants the recipient answers only while the grant holds (its sender's side may revoke).
  await requireGrant(env, ctx, caller, { id: task.senderAgentId, tenantId: task.senderTenantId });
  const now = env.now();
  const messages = request.message
    ? [messageJson({ ...request.message, role: request.message.role || 'agent', messageId: request.message.messageId || newId('msg') })]
    : [];
  const artifacts = request.artifacts.map((a) => artifactJson({ ...a, id: a.id || newId('art') }));
  const moved = await env.tasks.transition(
    ctx.signal,
    task.id,
    (t) => {
      if (!UPDATABLE.has(t.state)) throw HubError.invalidOperation(`Task is ${t.state}; it can no longer change`);
      // A finished task needs none of its queued deliveries (nor their acks): they go with it.
      return { next: { state: to, updatedAt: now }, append: { messages, artifacts }, purge: FINAL.has(to) };
    },
    { check: taskGrowthCheck(env.limits), current: task },
  );
  if (!moved) throw taskNotFound();
  // Loaded with every item (transition's default), as a handed-over task must be.
  env.settled.offer(moved.after);
  await announce(env, moved.after, ctx);
  return { task: taskView(moved.after) };
}

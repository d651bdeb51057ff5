import { fromJson, toJson } from '@bufbuild/protobuf';
import { identityv1, messagingv1 } from '@agenthub/proto';
import { HubError, newId, Reason, waitSignal, type CallContext, type Caller, type Client, type Kv } from '@agenthub/runtime';
import type { Recipients } from './recipients.js';
import { listen } from './wake.js';
import { acceptsAny, FINAL, isSettled, stateOfWord, UPDATABLE, UPDATE_TARGETS, wordOf } from '@agenthub/tasks';
import type { MessagingStore, NewDelivery, StateName, TaskRecord } from './store.js';

export { callerOf, type Caller } from '@agenthub/runtime';

const { TaskState } = messagingv1;
type TaskState = messagingv1.TaskState;

/** The part of the identity service this one calls. */
export type IdentityClient = Pick<Client<typeof identityv1.IdentityService.method>, 'getAgent' | 'checkGrant'>;

export interface MessagingLimits {
  /** Quota: tasks one agent has sent that are still submitted or working (HUB_QUOTA_TASKS_IN_FLIGHT_PER_SENDER). */
  maxTasksInFlightPerSender: number;
  /** Longest SendMessage blocking wait (the interface's 60 s). */
  blockingMs: number;
  /** A connected agent counts as online this long after its last inbox poll. */
  onlineMs: number;
  /** Longest inbox long-poll wait. */
  maxPollWaitMs: number;
  /** How long a polled, unacknowledged delivery stays hidden before it is handed out again. */
  claimMs: number;
  /** x-ttl when the sender gives none: 30 days. */
  defaultTtlSeconds: number;
  /** Messages and parts per message. */
  maxParts: number;
  /**
   * Messages, and artifacts, one task may hold: both live in the task row, so an endless
   * conversation on one task would make every read of it slower. Continue in a new task instead.
   */
  maxTaskItems: number;
}

export const DEFAULT_LIMITS: MessagingLimits = {
  blockingMs: 60_000,
  onlineMs: 60_000,
  maxPollWaitMs: 30_000,
  claimMs: 30_000,
  defaultTtlSeconds: 30 * 24 * 3600,
  maxParts: 100,
  maxTaskItems: 1000,
  maxTasksInFlightPerSender: 1000,
};

/** Refuses a change that would grow the task past `maxTaskItems` messages or artifacts. */
function checkTaskSize(env: MessagingEnv, task: TaskRecord, addedMessages: number, addedArtifacts: number): void {
  const max = env.limits.maxTaskItems;
  if (task.messages.length + addedMessages > max) {
    throw new HubError(Reason.LIMIT_EXCEEDED, `The task holds its maximum of ${max} messages; continue in a new task`, { field: 'message' });
  }
  if (task.artifacts.length + addedArtifacts > max) {
    throw new HubError(Reason.LIMIT_EXCEEDED, `The task holds its maximum of ${max} artifacts`, { field: 'artifacts' });
  }
}

export interface MessagingEnv {
  store: MessagingStore;
  identity: IdentityClient;
  recipients: Recipients;
  kv: Kv;
  limits: MessagingLimits;
  /** Epoch milliseconds; injectable so tests move time without sleeping. */
  now: () => number;
}

/** Kv channel announcing a task's transitions (heard by blocking sends on every replica). */
export const taskChannel = (taskId: string) => `messaging:task:${taskId}`;
/** Kv channel waking long-polls of an agent's inbox. */
export const inboxChannel = (agentId: string) => `messaging:inbox:${agentId}`;
/** Kv key present while the agent has polled within `onlineMs`. */
export const onlineKey = (agentId: string) => `messaging:online:${agentId}`;

const messageJson = (message: messagingv1.Message) => toJson(messagingv1.MessageSchema, message);
const artifactJson = (artifact: messagingv1.Artifact) => toJson(messagingv1.ArtifactSchema, artifact);

/** The wire task, history limited to the last `historyLength` messages (absent: all). */
export function taskView(task: TaskRecord, historyLength?: number): messagingv1.Task {
  const messages = task.messages.map((m) => fromJson(messagingv1.MessageSchema, m as never));
  const kept = historyLength === undefined ? messages : historyLength <= 0 ? [] : messages.slice(-historyLength);
  return {
    $typeName: 'agenthub.messaging.v1.Task',
    id: task.id,
    contextId: task.contextId,
    state: stateOfWord(task.state)!,
    updatedAt: BigInt(task.updatedAt),
    createdAt: BigInt(task.createdAt),
    messages: kept,
    artifacts: task.artifacts.map((a) => fromJson(messagingv1.ArtifactSchema, a as never)),
    senderAgentId: task.senderAgentId,
    recipientAgentId: task.recipientAgentId,
    version: BigInt(task.version),
  };
}

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

/** The task if the caller is its sender or recipient; TASK_NOT_FOUND otherwise. */
export async function visibleTask(env: MessagingEnv, caller: Caller, taskId: string): Promise<TaskRecord> {
  if (!taskId) throw HubError.invalidParams('id', 'is required');
  const task = await env.store.getTask(taskId);
  if (!task || (task.senderAgentId !== caller.agentId && task.recipientAgentId !== caller.agentId)) throw taskNotFound();
  return task;
}

export async function announce(env: MessagingEnv, task: TaskRecord, ctx: CallContext) {
  try {
    await env.kv.publish(taskChannel(task.id), task.state);
  } catch (err) {
    ctx.log.warn({ err, task_id: task.id }, 'could not announce a task transition');
  }
}

async function wakeInbox(env: MessagingEnv, agentId: string, ctx: CallContext) {
  try {
    await env.kv.publish(inboxChannel(agentId), '1');
  } catch (err) {
    ctx.log.warn({ err, agent_id: agentId }, 'could not wake an inbox');
  }
}

function newDelivery(env: MessagingEnv, message: messagingv1.Message, ttlSeconds: number, now: number): NewDelivery {
  return { id: newId('dlv'), message: messageJson(message), expiresAt: now + ttlSeconds * 1000 };
}

/** Waits until the task reaches a terminal or input-required state, or `ms` pass. */
async function waitForSettled(env: MessagingEnv, taskId: string, ms: number, signal: AbortSignal): Promise<void> {
  const settled = (state: string) => isSettled(state as StateName);
  const listener = await listen(env.kv, taskChannel(taskId), signal, settled);
  try {
    const task = await env.store.getTask(taskId);
    if (!task || settled(task.state)) return;
    await listener.wait(ms);
  } finally {
    await listener.close();
  }
}

async function isOnline(env: MessagingEnv, agentId: string): Promise<boolean> {
  return (await env.kv.get(onlineKey(agentId))) !== undefined;
}

export async function sendMessage(env: MessagingEnv, ctx: CallContext, caller: Caller, request: messagingv1.SendMessageRequest) {
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
  if (request.taskId) {
    // Continuation: only the task's sender answers it; it must be waiting for input.
    const current = await visibleTask(env, caller, request.taskId);
    if (current.senderAgentId !== caller.agentId) throw taskNotFound();
    if (request.recipientAgentId && request.recipientAgentId !== current.recipientAgentId) {
      throw HubError.invalidParams('configuration.agentId', 'does not match the task\'s recipient');
    }
    const now = env.now();
    const moved = await env.store.transition(current.id, (t) => {
      if (!UPDATABLE.has(t.state)) {
        throw HubError.invalidOperation(`Task is ${t.state}; only a task in input-required can be continued`);
      }
      checkTaskSize(env, t, 1, 0);
      return {
        next: { ...t, state: 'submitted', messages: [...t.messages, messageJson(stored)], updatedAt: now },
        delivery: newDelivery(env, stored, ttl, now),
      };
    });
    if (!moved) throw taskNotFound();
    task = moved.after;
    await announce(env, task, ctx);
  } else {
    const recipientId = request.recipientAgentId;
    if (!recipientId) throw HubError.invalidParams('configuration.agentId', 'is required');
    const agent = await env.recipients.get(recipientId, ctx);
    if (!agent) throw new HubError(Reason.NOT_FOUND, 'Agent not found', { field: 'configuration.agentId' });
    if (agent.tenantId !== caller.tenantId) {
      const grant = await env.identity.checkGrant({ agentId: caller.agentId, otherAgentId: agent.id }, { parent: ctx });
      if (!grant.approved) throw HubError.grantRequired();
    }
    const accepted = request.acceptedOutputModes;
    if (!acceptsAny(accepted, agent.outputModes)) {
      throw new HubError(
        Reason.CONTENT_TYPE_NOT_SUPPORTED,
        `Content type not supported: the agent produces ${agent.outputModes.join(', ')}`,
        { field: 'configuration.acceptedOutputModes' },
      );
    }
    const now = env.now();
    const offlineNoQueue = ttl === 0 && !(await isOnline(env, agent.id));
    task = {
      id: newId('task'),
      contextId: request.contextId || newId('ctx'),
      senderAgentId: caller.agentId,
      senderTenantId: caller.tenantId,
      recipientAgentId: agent.id,
      state: offlineNoQueue ? 'failed' : 'submitted',
      messages: [messageJson(stored)],
      artifacts: [],
      createdAt: now,
      updatedAt: now,
      version: 1,
    };
    // x-ttl 0 to an online agent still queues: it has until its next poll (claim window) to take it.
    const delivery = offlineNoQueue ? undefined : newDelivery(env, stored, ttl === 0 ? env.limits.onlineMs / 1000 : ttl, now);
    // A push agent's deliveries are forwarded by the push worker (push.ts), which needs its endpoint.
    if (agent.endpointUrl) await env.store.recordPushAgent(agent.id, agent.endpointUrl);
    const max = env.limits.maxTasksInFlightPerSender;
    if (!(await env.store.createTask(task, delivery, max))) {
      throw HubError.quotaExceeded('tasks_in_flight_per_sender', `Quota exceeded: an agent may have at most ${max} tasks submitted or working; wait for some to finish`);
    }
  }
  if (task.state === 'submitted') await wakeInbox(env, task.recipientAgentId, ctx);

  if (request.blocking && !FINAL.has(task.state)) {
    await waitForSettled(env, task.id, env.limits.blockingMs, waitSignal(ctx));
    task = (await env.store.getTask(task.id)) ?? task;
  }
  return { task: taskView(task, request.historyLength) };
}

export async function getTask(env: MessagingEnv, _ctx: CallContext, caller: Caller, request: messagingv1.GetTaskRequest) {
  if (request.historyLength !== undefined && request.historyLength < 0) throw HubError.invalidParams('historyLength', 'must be at least 0');
  return { task: taskView(await visibleTask(env, caller, request.taskId), request.historyLength) };
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
    if (typeof updatedAt === 'number' && typeof id === 'string') return { updatedAt, id };
  } catch {
    // Falls through to the refusal: a token we did not issue.
  }
  throw HubError.invalidParams('pageToken', 'is not a token from a previous page');
}

export async function listTasks(env: MessagingEnv, _ctx: CallContext, caller: Caller, request: messagingv1.ListTasksRequest) {
  if (request.pageSize < 0 || request.pageSize > MAX_PAGE) throw HubError.invalidParams('pageSize', `must be between 1 and ${MAX_PAGE}`);
  if (request.historyLength !== undefined && request.historyLength < 0) throw HubError.invalidParams('historyLength', 'must be at least 0');
  const state = request.state === TaskState.UNSPECIFIED ? undefined : wordOf(request.state);
  if (request.state !== TaskState.UNSPECIFIED && !state) throw HubError.invalidParams('status', 'is not a task state');
  const size = request.pageSize || DEFAULT_PAGE;
  const { tasks, total } = await env.store.listTasks(
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
  const page = tasks.slice(0, size);
  return {
    tasks: page.map((t) => {
      const view = taskView(t, request.historyLength);
      return request.includeArtifacts ? view : { ...view, artifacts: [] };
    }),
    nextPageToken: tasks.length > size ? pageToken(page.at(-1)!) : '',
    totalSize: total,
  };
}

export async function cancelTask(env: MessagingEnv, ctx: CallContext, caller: Caller, request: messagingv1.CancelTaskRequest) {
  const task = await visibleTask(env, caller, request.taskId);
  const now = env.now();
  const moved = await env.store.transition(task.id, (t) => {
    if (!UPDATABLE.has(t.state)) {
      throw new HubError(Reason.TASK_NOT_CANCELABLE, `Task cannot be canceled: it is ${t.state}`);
    }
    return { next: { ...t, state: 'canceled', updatedAt: now }, purge: true };
  });
  if (!moved) throw taskNotFound();
  // A push agent's own task is canceled too, best effort, by the push worker.
  await env.store.requestPushCancel(task.id);
  await announce(env, moved.after, ctx);
  return { task: taskView(moved.after) };
}

export async function updateTask(env: MessagingEnv, ctx: CallContext, caller: Caller, request: messagingv1.UpdateTaskRequest) {
  const task = await visibleTask(env, caller, request.taskId);
  if (task.recipientAgentId !== caller.agentId) {
    throw new HubError(Reason.ACCESS_DENIED, 'Only the task\'s recipient can update it');
  }
  const to = wordOf(request.state);
  if (!to || !UPDATE_TARGETS.has(to)) {
    throw HubError.invalidParams('state', `must be one of ${[...UPDATE_TARGETS].join(', ')}`);
  }
  if (request.message) validateParts(request.message.parts, 'message.parts', env.limits.maxParts);
  request.artifacts.forEach((artifact, i) => validateParts(artifact.parts, `artifacts[${i}].parts`, env.limits.maxParts));
  const now = env.now();
  const moved = await env.store.transition(task.id, (t) => {
    if (!UPDATABLE.has(t.state)) throw HubError.invalidOperation(`Task is ${t.state}; it can no longer change`);
    checkTaskSize(env, t, request.message ? 1 : 0, request.artifacts.length);
    const messages = request.message
      ? [...t.messages, messageJson({ ...request.message, role: request.message.role || 'agent', messageId: request.message.messageId || newId('msg') })]
      : t.messages;
    const artifacts = [
      ...t.artifacts,
      ...request.artifacts.map((a) => artifactJson({ ...a, id: a.id || newId('art') })),
    ];
    // A finished task needs none of its queued deliveries (nor their acks): they go with it.
    return { next: { ...t, state: to, messages, artifacts, updatedAt: now }, purge: FINAL.has(to) };
  });
  if (!moved) throw taskNotFound();
  await announce(env, moved.after, ctx);
  return { task: taskView(moved.after) };
}

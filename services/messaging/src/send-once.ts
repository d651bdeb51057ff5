import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { toJson } from '@bufbuild/protobuf';
import { messagingv1 } from '@agenthub/proto';
import { detachedSignal, HubError, newId, Reason, waitSignal, type CallContext, type Caller } from '@agenthub/runtime';
import { FINAL } from '@agenthub/tasks';
import type { MessagingEnv } from './env.js';
import { listenForSettled, waitForSettled } from './lifecycle.js';
import type { SendKey } from './send-key-store.js';
import { sendMessage, taskView } from './tasks.js';

/**
 * SendMessage as DESIGN.md states it: a conversation (`contextId`) belongs to the agents whose
 * tasks are in it, and a repeated `messageId` from the same sender within the idempotency window
 * is the same send, answered with the first send's task.
 */

/** How long a repeat waits for the first send's task to be written before giving up. */
const IN_FLIGHT_WAIT_MS = 10_000;
const IN_FLIGHT_POLL_MS = 50;

/** What makes two sends with one messageId the same send: the message and where it goes. */
function bodyHash(request: messagingv1.SendMessageRequest): string {
  const message = request.message!;
  const body = [request.recipientAgentId, request.taskId, request.contextId, toJson(messagingv1.MessageSchema, { ...message, role: message.role || 'user' })];
  return createHash('sha256').update(JSON.stringify(body)).digest('base64url');
}

/**
 * Refuses a new task in a context the caller has no task in while others do, with the error of a
 * task that does not exist: the refusal says nothing about who talks there or about what. A
 * context id nobody has used yet starts a new conversation and is the caller's from then on.
 */
export async function checkContext(env: MessagingEnv, signal: AbortSignal, caller: Caller, contextId: string): Promise<void> {
  const keys = env.sendKeys;
  const { tasks, member } = await keys.contextMembership(signal, contextId, caller.agentId);
  if (member) return;
  if (!tasks && (await keys.claimContext(signal, contextId, caller.agentId, env.now())) === caller.agentId) return;
  throw new HubError(Reason.TASK_NOT_FOUND, 'Context not found', { field: 'message.contextId' });
}

export async function sendMessageOnce(env: MessagingEnv, ctx: CallContext, caller: Caller, request: messagingv1.SendMessageRequest) {
  if (request.message && !request.taskId && request.contextId) await checkContext(env, ctx.signal, caller, request.contextId);
  const messageId = request.message?.messageId;
  if (!messageId) return sendMessage(env, ctx, caller, request);

  const hash = bodyHash(request);
  const giveUpAt = Date.now() + IN_FLIGHT_WAIT_MS;
  for (;;) {
    const answer = request.taskId ? await followUpOnce(env, ctx, caller, request, messageId, hash) : await newTaskOnce(env, ctx, caller, request, messageId, hash);
    if (answer) return answer;
    // The first send is still writing its task, or failed and is giving its key back.
    if (Date.now() > giveUpAt) throw new HubError(Reason.UNAVAILABLE, 'The first send with this messageId has not finished; try again');
    await sleep(IN_FLIGHT_POLL_MS);
  }
}

/**
 * A new task claims its key in the statement that writes it (send-batch.ts), so a key held by a
 * new task always has its task. Undefined: the key's holder was not found; try again.
 */
async function newTaskOnce(env: MessagingEnv, ctx: CallContext, caller: Caller, request: messagingv1.SendMessageRequest, messageId: string, hash: string) {
  const taskId = newId('task');
  let sent: Awaited<ReturnType<typeof sendMessage>>;
  try {
    sent = await sendMessage(env, ctx, caller, request, { id: taskId, key: { messageId, bodyHash: hash } });
  } catch (err) {
    // A repeat of a send that was made is that send, even when something would refuse it now
    // (a full inbox, a revoked grant): the send it repeats was accepted.
    const earlier = await env.sendKeys.get(ctx.signal, caller.agentId, messageId).catch(() => undefined);
    if (!earlier || earlier.taskId === taskId) throw err;
    return asEarlier(env, ctx, request, earlier, hash);
  }
  if (sent !== 'key-taken') return sent;
  const earlier = await env.sendKeys.get(ctx.signal, caller.agentId, messageId);
  return earlier && asEarlier(env, ctx, request, earlier, hash);
}

/** A follow-up reserves its key before it writes its message into the task. */
async function followUpOnce(env: MessagingEnv, ctx: CallContext, caller: Caller, request: messagingv1.SendMessageRequest, messageId: string, hash: string) {
  const keys = env.sendKeys;
  const taskId = request.taskId;
  const earlier = await keys.reserve(ctx.signal, caller.agentId, messageId, { taskId, bodyHash: hash, createdAt: env.now() });
  if (earlier) return asEarlier(env, ctx, request, earlier, hash);
  try {
    return await sendMessage(env, ctx, caller, request);
  } catch (err) {
    // A send that got as far as writing its message (then e.g. lost its blocking wait) keeps the key.
    const detached = detachedSignal();
    const written = await env.tasks.getTask(detached, taskId);
    if (!written?.messages.some((m) => (m as { messageId?: string }).messageId === messageId)) {
      await keys.release(detached, caller.agentId, messageId, taskId);
    }
    throw err;
  }
}

/** The answer to a repeat: the earlier send's task (settled first, if the repeat blocks); undefined while that task is not there. */
async function asEarlier(env: MessagingEnv, ctx: CallContext, request: messagingv1.SendMessageRequest, earlier: SendKey, hash: string) {
  if (earlier.bodyHash !== hash) {
    throw HubError.invalidParams('message.messageId', 'was already used by this sender for a different message; use a new messageId');
  }
  const task = await env.tasks.getTask(ctx.signal, earlier.taskId);
  if (!task) return undefined;
  if (request.blocking && !FINAL.has(task.state)) await waitForSettled(env, ctx.signal, task.id, env.limits.blockingMs, listenForSettled(env, task.id, waitSignal(ctx)));
  return { task: taskView((await env.tasks.getTask(ctx.signal, task.id)) ?? task, request.historyLength) };
}

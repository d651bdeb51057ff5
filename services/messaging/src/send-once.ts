import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { toJson } from '@bufbuild/protobuf';
import { messagingv1 } from '@agenthub/proto';
import { detachedSignal, HubError, newId, Reason, waitSignal, type CallContext, type Caller } from '@agenthub/runtime';
import { FINAL } from '@agenthub/tasks';
import type { MessagingEnv } from './env.js';
import { listenForSettled, waitForSettled } from './lifecycle.js';
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

  const keys = env.sendKeys;
  const hash = bodyHash(request);
  const giveUpAt = Date.now() + IN_FLIGHT_WAIT_MS;
  for (;;) {
    const now = env.now();
    const taskId = request.taskId || newId('task');
    const earlier = await keys.reserve(ctx.signal, caller.agentId, messageId, { taskId, bodyHash: hash, createdAt: now });
    if (!earlier) {
      try {
        return await sendMessage(env, ctx, caller, request, taskId);
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
    if (earlier.bodyHash !== hash) {
      throw HubError.invalidParams('message.messageId', 'was already used by this sender for a different message; use a new messageId');
    }
    const task = await env.tasks.getTask(ctx.signal, earlier.taskId);
    if (task) {
      if (request.blocking && !FINAL.has(task.state)) await waitForSettled(env, ctx.signal, task.id, env.limits.blockingMs, listenForSettled(env, task.id, waitSignal(ctx)));
      return { task: taskView((await env.tasks.getTask(ctx.signal, task.id)) ?? task, request.historyLength) };
    }
    // The first send is still writing its task, or failed and is giving its key back.
    if (Date.now() > giveUpAt) throw new HubError(Reason.UNAVAILABLE, 'The first send with this messageId has not finished; try again');
    await sleep(IN_FLIGHT_POLL_MS);
  }
}

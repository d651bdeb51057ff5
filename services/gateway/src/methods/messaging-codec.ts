import { messagingv1 } from '@agenthub/proto';
import { partFromInterface, partToInterface, wordOf, type DecodeOptions } from '@agenthub/tasks';
import type { RpcContext } from '../jsonrpc.js';
import { bad, isObject, optionalBool, optionalInt, str, type Json } from '../fields.js';

/**
 * Messages, tasks and deliveries between the interface's dialect (A2A: camelCase, parts tagged by
 * `kind`, lowercase states, ISO timestamps) and the messaging service's messages.
 *
 * Params are checked here by hand so that each malformed part is named by index and field
 * (`message.parts[2].mimeType`); the messaging service checks them again.
 */

/** Largest inline `data` of a file part, in base64 characters (512 KiB decoded). */
export const MAX_INLINE_DATA_CHARS = 4 * Math.ceil((512 * 1024) / 3);
/** Parts per message or artifact. */
export const MAX_PARTS = 100;
/** Longest `x-ttl`, in seconds (ten years): a delivery may wait that long for an offline recipient. */
export const MAX_TTL_SECONDS = 10 * 365 * 24 * 3600;

export const stateWord = (state: messagingv1.TaskState) => wordOf(state) ?? 'unknown';

/** How the part decoders report a bad field: -32602 naming it. */
export const PART_DECODING: DecodeOptions = { invalid: bad, maxInlineChars: MAX_INLINE_DATA_CHARS };

const partIn = (raw: unknown, at: string) => partFromInterface(raw, at, PART_DECODING);

export function partsIn(raw: unknown, at: string): messagingv1.Part[] {
  if (!Array.isArray(raw)) throw bad(at, raw === undefined ? 'is required' : 'must be an array');
  if (raw.length === 0) throw bad(at, 'must have at least 1 items');
  if (raw.length > MAX_PARTS) throw bad(at, `must have at most ${MAX_PARTS} items`);
  return raw.map((part, i) => partIn(part, `${at}[${i}]`));
}

export function messageIn(raw: unknown, at: string, defaultRole: string): messagingv1.Message {
  if (!isObject(raw)) throw bad(at, raw === undefined ? 'is required' : 'must be an object');
  const role = str(raw, 'role', `${at}.`, false) ?? defaultRole;
  if (role !== 'user' && role !== 'agent') throw bad(`${at}.role`, 'must be one of user, agent');
  return {
    $typeName: 'agenthub.messaging.v1.Message',
    role,
    parts: partsIn(raw.parts, `${at}.parts`),
    messageId: str(raw, 'messageId', `${at}.`, false) ?? '',
  };
}

export function artifactOut(a: messagingv1.Artifact) {
  return {
    id: a.id,
    ...(a.name ? { name: a.name } : {}),
    ...(a.mimeType ? { mimeType: a.mimeType } : {}),
    parts: a.parts.map(partToInterface),
  };
}

export function messageOut(m: messagingv1.Message) {
  return { role: m.role, parts: m.parts.map(partToInterface), ...(m.messageId ? { messageId: m.messageId } : {}) };
}

/** A Task as the interface shows it; `messages` only where asked for (GetTask, blocking sends). */
export function taskOut(task: messagingv1.Task | undefined, options: { messages: boolean }) {
  if (!task) return undefined;
  return {
    id: task.id,
    contextId: task.contextId,
    status: { state: stateWord(task.state), timestamp: new Date(Number(task.updatedAt)).toISOString() },
    ...(options.messages ? { messages: task.messages.map(messageOut) } : {}),
    artifacts: task.artifacts.map(artifactOut),
  };
}

/** A SendMessage's params as the messaging service's request (the path's agent, when given, is the recipient). */
export function sendRequest(params: Json, ctx: RpcContext) {
  const message = messageIn(params.message, 'message', 'user');
  const raw = params.configuration ?? {};
  if (!isObject(raw)) throw bad('configuration', 'must be an object');
  const c = 'configuration.';
  const agentId = str(raw, 'agentId', c, false);
  const msg = params.message as Json;
  const contextId = str(raw, 'contextId', c, false) ?? str(msg, 'contextId', 'message.', false);
  const taskId = str(raw, 'taskId', c, false) ?? str(msg, 'taskId', 'message.', false);
  const target = ctx.targetAgentId ?? agentId;
  if (ctx.targetAgentId && agentId && agentId !== ctx.targetAgentId) throw bad(`${c}agentId`, 'must match the agent of the path');
  if (!target && !taskId) throw bad(`${c}agentId`, 'is required');
  const modes = raw.acceptedOutputModes;
  if (modes !== undefined && (!Array.isArray(modes) || modes.some((m) => typeof m !== 'string'))) {
    throw bad(`${c}acceptedOutputModes`, 'must be an array of strings');
  }
  const historyLength = optionalInt(raw, 'historyLength', c, 0);
  const ttl = optionalInt(raw, 'x-ttl', c, 0, MAX_TTL_SECONDS);
  return {
    recipientAgentId: target ?? '',
    message,
    contextId: contextId ?? '',
    taskId: taskId ?? '',
    historyLength,
    acceptedOutputModes: (modes as string[] | undefined) ?? [],
    blocking: optionalBool(raw, 'blocking', c) ?? false,
    ttlSeconds: ttl === undefined ? undefined : BigInt(ttl),
  };
}

/** A delivery as the inbox methods show it (snake_case fields, as the README documents them). */
export function deliveryOut(d: messagingv1.Delivery) {
  return {
    delivery_id: d.id,
    task_id: d.taskId,
    context_id: d.contextId,
    from_agent_id: d.senderAgentId,
    message: d.message ? messageOut(d.message) : undefined,
    created_at: Number(d.createdAt),
    attempt: d.attempt,
  };
}

import { create } from '@bufbuild/protobuf';
import { messagingv1 } from '@agenthub/proto';
import { A2A_STATE_NAMES, a2aNameOf, isSettled, partFromProtoJson, partToProtoJson, stateOfA2AName } from '@agenthub/tasks';
import { bad, isObject, str, type Json } from '../fields.js';
import { MAX_PARTS, PART_DECODING } from '../methods/messaging-codec.js';

/**
 * The hub's messages, artifacts and tasks (agenthub.messaging.v1) in A2A 1.0 ProtoJSON, the
 * dialect of standard clients such as `@a2a-js/sdk`: roles `ROLE_*`, states `TASK_STATE_*`, empty
 * fields omitted. Parts map through `@agenthub/tasks` (the table is in its `parts.ts`), as the
 * push worker's do, so a round trip through the hub gives back what was sent.
 */

/** `TASK_STATE_WORKING` for the hub's state. */
export const stateOut = a2aNameOf;

export function stateIn(name: string, field: string): messagingv1.TaskState {
  const state = stateOfA2AName(name);
  if (state === undefined) throw bad(field, `must be one of ${A2A_STATE_NAMES.join(', ')}`);
  return state;
}

/** Terminal states end a task's stream; A2A also ends it at input-required (an interrupted state). */
const streamEnds = isSettled;

const partIn = (raw: unknown, at: string) => partFromProtoJson(raw, at, PART_DECODING);

function partsIn(raw: unknown, at: string): messagingv1.Part[] {
  if (!Array.isArray(raw)) throw bad(at, raw === undefined ? 'is required' : 'must be an array');
  if (raw.length === 0) throw bad(at, 'must have at least 1 items');
  if (raw.length > MAX_PARTS) throw bad(at, `must have at most ${MAX_PARTS} items`);
  return raw.map((part, i) => partIn(part, `${at}[${i}]`));
}

/** The client's message; A2A requires `messageId` and a role, which here is the user's. */
export interface InboundMessage {
  message: messagingv1.Message;
  contextId: string;
  taskId: string;
}

export function messageIn(raw: unknown, at: string): InboundMessage {
  if (!isObject(raw)) throw bad(at, raw === undefined ? 'is required' : 'must be an object');
  const p = `${at}.`;
  const role = str(raw, 'role', p, true)!;
  if (role !== 'ROLE_USER') throw bad(`${at}.role`, 'must be ROLE_USER');
  return {
    message: create(messagingv1.MessageSchema, { role: 'user', messageId: str(raw, 'messageId', p, true)!, parts: partsIn(raw.parts, `${at}.parts`) }),
    contextId: str(raw, 'contextId', p, false) ?? '',
    taskId: str(raw, 'taskId', p, false) ?? '',
  };
}

const partsOut = (parts: messagingv1.Part[]) => parts.map(partToProtoJson).filter((p): p is Json => p !== undefined);

export function messageOut(m: messagingv1.Message, ids: { taskId: string; contextId: string }): Json {
  return {
    messageId: m.messageId,
    contextId: ids.contextId,
    taskId: ids.taskId,
    role: m.role === 'agent' ? 'ROLE_AGENT' : 'ROLE_USER',
    parts: partsOut(m.parts),
  };
}

export function artifactOut(a: messagingv1.Artifact): Json {
  return { artifactId: a.id, ...(a.name ? { name: a.name } : {}), parts: partsOut(a.parts) };
}

const iso = (ms: bigint) => new Date(Number(ms)).toISOString();

/** A Task; `history` and `artifacts` are omitted when empty (ProtoJSON) or not asked for. */
export function taskOut(task: messagingv1.Task, options: { artifacts: boolean } = { artifacts: true }): Json {
  const ids = { taskId: task.id, contextId: task.contextId };
  return {
    id: task.id,
    contextId: task.contextId,
    status: { state: stateOut(task.state), timestamp: iso(task.updatedAt) },
    ...(options.artifacts && task.artifacts.length ? { artifacts: task.artifacts.map(artifactOut) } : {}),
    ...(task.messages.length ? { history: task.messages.map((m) => messageOut(m, ids)) } : {}),
  };
}

/** One stream event: a StreamResponse holding a task, a status update or an artifact update. */
export interface StreamItem {
  /** The SSE id a client may resume after (the same scheme as the interface's dialect). */
  id: string;
  result: Json;
  /** The stream ends after this event. */
  last: boolean;
}

export function* streamItems(item: messagingv1.WatchTaskResponse): Iterable<StreamItem> {
  const e = item.event;
  if (e.case === 'task') {
    yield { id: String(e.value.version), result: { task: taskOut(e.value) }, last: streamEnds(e.value.state) };
  } else if (e.case === 'transition') {
    const t = e.value;
    const version = String(t.version);
    const ids = { taskId: t.taskId, contextId: t.contextId };
    for (const [i, artifact] of t.artifacts.entries()) {
      yield { id: `${version}.${i}`, result: { artifactUpdate: { ...ids, artifact: artifactOut(artifact), lastChunk: true } }, last: false };
    }
    yield {
      id: version,
      result: {
        statusUpdate: {
          ...ids,
          status: { state: stateOut(t.state), timestamp: iso(t.updatedAt), ...(t.message ? { message: messageOut(t.message, ids) } : {}) },
        },
      },
      last: t.final || streamEnds(t.state),
    };
  }
}

import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { messagingv1 } from '@agenthub/proto';
import { bad, isObject, str, type Json } from '../fields.js';
import { MAX_INLINE_DATA_CHARS, MAX_PARTS } from '../methods/messaging.js';

/**
 * The hub's messages, parts, artifacts and tasks (agenthub.messaging.v1) in A2A 1.0 ProtoJSON,
 * the dialect of standard clients such as `@a2a-js/sdk`: parts as a oneof (`text` | `raw` | `url`
 * | `data`) with `mediaType` and `filename`, roles `ROLE_*`, states `TASK_STATE_*`, empty fields
 * omitted. Parts map so that a round trip through the hub gives back what was sent:
 *
 * | A2A part | hub part |
 * |---|---|
 * | `text` (no mediaType, or text/plain) | text |
 * | `text` with another mediaType | data {mimeType, data: the text} |
 * | `raw` (base64) | file {name: filename, mimeType, data} |
 * | `url` | file {name: filename, mimeType, uri} |
 * | `data` (a JSON value) | data {mimeType (default application/json), data: serialized JSON} |
 *
 * and back: a hub data part of a JSON media type becomes `data`, of another type `text`.
 */

const { TaskState } = messagingv1;
type PartInit = MessageInitShape<typeof messagingv1.PartSchema>;

/** `TASK_STATE_WORKING` ↔ the hub's state; the names match, the numbers do not. */
export function stateOut(state: messagingv1.TaskState): string {
  return `TASK_STATE_${TaskState[state] ?? 'UNSPECIFIED'}`;
}

export function stateIn(name: string, field: string): messagingv1.TaskState {
  const hub = name.startsWith('TASK_STATE_') ? (TaskState as unknown as Record<string, number>)[name.slice('TASK_STATE_'.length)] : undefined;
  if (hub === undefined || hub === TaskState.UNSPECIFIED) {
    const names = Object.keys(TaskState).filter((k) => Number.isNaN(Number(k)) && k !== 'UNSPECIFIED').map((k) => `TASK_STATE_${k}`);
    throw bad(field, `must be one of ${names.join(', ')}`);
  }
  return hub;
}

/** Terminal states end a task's stream; A2A also ends it at input-required (an interrupted state). */
export const STREAM_ENDS = new Set<messagingv1.TaskState>([TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED, TaskState.INPUT_REQUIRED]);
export const TERMINAL = new Set<messagingv1.TaskState>([TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED]);

const isJsonType = (mediaType: string) => /^application\/([\w.+-]+\+)?json$/i.test(mediaType.split(';', 1)[0]!.trim());

/** ProtoJSON accepts standard or URL-safe base64, padded or not; the hub keeps standard, padded. */
function base64In(value: string, field: string): string {
  const standard = value.replace(/-/g, '+').replace(/_/g, '/');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(standard) || standard.replace(/=+$/, '').length % 4 === 1) throw bad(field, 'must be base64');
  const unpadded = standard.replace(/=+$/, '');
  const padded = unpadded + '='.repeat((4 - (unpadded.length % 4)) % 4);
  if (padded.length > MAX_INLINE_DATA_CHARS) throw bad(field, `must be at most ${MAX_INLINE_DATA_CHARS} base64 characters; send a url for larger files`);
  return padded;
}

function partIn(raw: unknown, at: string): PartInit {
  if (!isObject(raw)) throw bad(at, 'must be an object');
  const p = `${at}.`;
  const mediaType = str(raw, 'mediaType', p, false) ?? '';
  const filename = str(raw, 'filename', p, false) ?? '';
  const present = (['text', 'raw', 'url', 'data'] as const).filter((k) => raw[k] !== undefined && raw[k] !== null);
  if (present.length === 0) throw bad(`${p}text`, 'or raw, url or data is required');
  if (present.length > 1) throw bad(`${p}${present[1]}`, `must not be given together with ${present[0]}`);
  switch (present[0]!) {
    case 'text': {
      const text = str(raw, 'text', p, false)!;
      if (mediaType === '' || mediaType === 'text/plain') return { content: { case: 'text', value: { text } } };
      return { content: { case: 'data', value: { mimeType: mediaType, data: text } } };
    }
    case 'raw':
      return {
        content: {
          case: 'file',
          value: { name: filename, mimeType: mediaType || 'application/octet-stream', data: base64In(str(raw, 'raw', p, false)!, `${p}raw`) },
        },
      };
    case 'url': {
      const url = str(raw, 'url', p, false)!;
      if (!URL.canParse(url)) throw bad(`${p}url`, 'must be a URL');
      return { content: { case: 'file', value: { name: filename, mimeType: mediaType || 'application/octet-stream', uri: url } } };
    }
    case 'data':
      return { content: { case: 'data', value: { mimeType: mediaType || 'application/json', data: JSON.stringify(raw.data) } } };
  }
}

function partsIn(raw: unknown, at: string): PartInit[] {
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

function partOut(part: messagingv1.Part): Json | undefined {
  const c = part.content;
  switch (c.case) {
    case 'text':
      return { text: c.value.text, mediaType: 'text/plain' };
    case 'file': {
      const named = c.value.name ? { filename: c.value.name } : {};
      return c.value.uri ? { url: c.value.uri, ...named, mediaType: c.value.mimeType } : { raw: c.value.data, ...named, mediaType: c.value.mimeType };
    }
    case 'data':
      if (isJsonType(c.value.mimeType)) {
        try {
          return { data: JSON.parse(c.value.data) as unknown, mediaType: c.value.mimeType };
        } catch {
          // Declared JSON but is not: it still reaches the client, as text of its media type.
        }
      }
      return { text: c.value.data, mediaType: c.value.mimeType };
    default:
      return undefined;
  }
}

const partsOut = (parts: messagingv1.Part[]) => parts.map(partOut).filter((p): p is Json => p !== undefined);

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
    yield { id: String(e.value.version), result: { task: taskOut(e.value) }, last: STREAM_ENDS.has(e.value.state) };
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
      last: t.final || STREAM_ENDS.has(t.state),
    };
  }
}

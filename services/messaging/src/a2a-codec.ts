/**
 * The hub's messages, parts and artifacts (agenthub.messaging.v1, stored as proto JSON) as A2A 1.0
 * objects of `@a2a-js/sdk`, and back: what the push worker sends to an agent and what it keeps of
 * the answer.
 */
import { create, fromJson, toJson, type JsonValue, type MessageInitShape } from '@bufbuild/protobuf';
import { Role, TaskState, type Artifact, type Message, type Part } from '@a2a-js/sdk';
import { messagingv1 } from '@agenthub/proto';
import type { StateName } from './store.js';

type PartInit = MessageInitShape<typeof messagingv1.PartSchema>;

const isJsonType = (mediaType: string) => /^application\/([\w.+-]+\+)?json$/i.test(mediaType.split(';', 1)[0]!.trim());

function a2aPart(content: Part['content'], mediaType = '', filename = ''): Part {
  return { content, metadata: undefined, filename, mediaType };
}

/** A hub part as an A2A part: inline file data becomes `raw` bytes, a file uri `url`. */
function toA2APart(part: messagingv1.Part): Part | undefined {
  const c = part.content;
  switch (c.case) {
    case 'text':
      return a2aPart({ $case: 'text', value: c.value.text }, 'text/plain');
    case 'file':
      return c.value.uri
        ? a2aPart({ $case: 'url', value: c.value.uri }, c.value.mimeType, c.value.name)
        : a2aPart({ $case: 'raw', value: Buffer.from(c.value.data, 'base64') }, c.value.mimeType, c.value.name);
    case 'data': {
      // A hub data part is serialized text; A2A data is a JSON value, so only JSON crosses as data.
      if (isJsonType(c.value.mimeType)) {
        try {
          return a2aPart({ $case: 'data', value: JSON.parse(c.value.data) }, c.value.mimeType);
        } catch {
          // Not valid JSON after all: sent as text of its media type below.
        }
      }
      return a2aPart({ $case: 'text', value: c.value.data }, c.value.mimeType);
    }
    default:
      return undefined;
  }
}

/**
 * A stored hub message (proto JSON) as the A2A message sent to the agent: its messageId is the
 * hub's, so the agent recognises a redelivery; `taskId` is the agent's task when continuing one.
 */
export function toA2AMessage(stored: unknown, ids: { contextId: string; taskId: string }): Message {
  const message = fromJson(messagingv1.MessageSchema, stored as JsonValue);
  return {
    messageId: message.messageId,
    contextId: ids.contextId,
    taskId: ids.taskId,
    role: Role.ROLE_USER,
    parts: message.parts.map(toA2APart).filter((p): p is Part => p !== undefined),
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/** An A2A part as a hub part: `raw` → file data (base64), `url` → file uri, `data` → serialized JSON. */
function fromA2APart(part: Part): PartInit | undefined {
  const c = part.content;
  switch (c?.$case) {
    case 'text':
      return { content: { case: 'text', value: { text: c.value } } };
    case 'raw':
      return {
        content: {
          case: 'file',
          value: { name: part.filename, mimeType: part.mediaType || 'application/octet-stream', data: Buffer.from(c.value).toString('base64') },
        },
      };
    case 'url':
      return { content: { case: 'file', value: { name: part.filename, mimeType: part.mediaType || 'application/octet-stream', uri: c.value } } };
    case 'data':
      return { content: { case: 'data', value: { mimeType: part.mediaType || 'application/json', data: JSON.stringify(c.value ?? null) } } };
    default:
      return undefined;
  }
}

const fromA2AParts = (parts: Part[]) => parts.map(fromA2APart).filter((p): p is PartInit => p !== undefined);

/** An agent's A2A message as a stored hub message (role `agent`, the agent's messageId kept). */
export function fromA2AMessage(message: Message): unknown {
  return toJson(messagingv1.MessageSchema, create(messagingv1.MessageSchema, { role: 'agent', messageId: message.messageId, parts: fromA2AParts(message.parts) }));
}

/** An A2A artifact as a stored hub artifact; the artifact id is kept, so a later look replaces it. */
export function fromA2AArtifact(artifact: Artifact): unknown {
  const parts = fromA2AParts(artifact.parts);
  // The hub's artifact carries one media type: the parts' own when they agree.
  const types = new Set(artifact.parts.map((p) => p.mediaType).filter(Boolean));
  return toJson(
    messagingv1.ArtifactSchema,
    create(messagingv1.ArtifactSchema, {
      id: artifact.artifactId,
      name: artifact.name,
      mimeType: types.size === 1 ? [...types][0]! : '',
      parts,
    }),
  );
}

/**
 * The hub state for an agent's task state. Submitted at the agent means it took the message,
 * which the hub calls working; auth-required is the hub's input-required (the sender must act).
 */
export function hubState(state: TaskState): StateName {
  switch (state) {
    case TaskState.TASK_STATE_INPUT_REQUIRED:
    case TaskState.TASK_STATE_AUTH_REQUIRED:
      return 'input-required';
    case TaskState.TASK_STATE_COMPLETED:
      return 'completed';
    case TaskState.TASK_STATE_FAILED:
      return 'failed';
    case TaskState.TASK_STATE_CANCELED:
      return 'canceled';
    case TaskState.TASK_STATE_REJECTED:
      return 'rejected';
    default:
      return 'working';
  }
}

/** A hub message carrying one line of text from the agent's side (refusals). */
export function agentText(messageId: string, text: string): unknown {
  return toJson(messagingv1.MessageSchema, create(messagingv1.MessageSchema, { role: 'agent', messageId, parts: [{ content: { case: 'text', value: { text } } }] }));
}

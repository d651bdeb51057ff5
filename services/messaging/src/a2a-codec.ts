/**
 * The hub's messages, parts and artifacts (agenthub.messaging.v1, stored as proto JSON) as A2A 1.0
 * objects of `@a2a-js/sdk`, and back: what the push worker sends to an agent and what it keeps of
 * the answer. Parts map through `@agenthub/tasks`, as the gateway's do.
 */
import { create, fromJson, toJson, type JsonValue } from '@bufbuild/protobuf';
import { Role, type Artifact, type Message, type Part } from '@a2a-js/sdk';
import { messagingv1 } from '@agenthub/proto';
import { partFromSdk, partToSdk } from '@agenthub/tasks';

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
    parts: message.parts.map(partToSdk).filter((p): p is Part => p !== undefined),
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

const fromA2AParts = (parts: Part[]) => parts.map(partFromSdk).filter((p): p is messagingv1.Part => p !== undefined);

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

/** A hub message carrying one line of text from the agent's side (refusals). */
export function agentText(messageId: string, text: string): unknown {
  return toJson(messagingv1.MessageSchema, create(messagingv1.MessageSchema, { role: 'agent', messageId, parts: [{ content: { case: 'text', value: { text } } }] }));
}

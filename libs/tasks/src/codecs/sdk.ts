import { TaskState as SdkTaskState, type Part as SdkPart } from '@a2a-js/sdk';
import { fromA2A, toA2A, type A2APart, type Part } from '../parts.js';
import type { StateWord } from '../states.js';

/**
 * Parts as `@a2a-js/sdk` objects (`{content: {$case, value}, mediaType, filename}`, `raw` as
 * bytes): what the push worker sends an agent and reads back. Mapped to hub parts by `parts.ts`.
 */

/** An SDK part as A2A's; undefined when it has no content. */
export function a2aPartFromSdk(part: SdkPart): A2APart | undefined {
  const c = part.content;
  const meta = { mediaType: part.mediaType ?? '', filename: part.filename ?? '' };
  switch (c?.$case) {
    case 'text':
      return { content: { case: 'text', value: c.value }, ...meta };
    case 'raw':
      return { content: { case: 'raw', value: Buffer.from(c.value).toString('base64') }, ...meta };
    case 'url':
      return { content: { case: 'url', value: c.value }, ...meta };
    case 'data':
      return { content: { case: 'data', value: c.value }, ...meta };
    default:
      return undefined;
  }
}

/** An A2A part as an SDK object. */
export function a2aPartToSdk(part: A2APart): SdkPart {
  const c = part.content;
  const content: SdkPart['content'] =
    c.case === 'raw' ? { $case: 'raw', value: Buffer.from(c.value, 'base64') } : c.case === 'data' ? { $case: 'data', value: c.value as never } : { $case: c.case, value: c.value };
  return { content, metadata: undefined, filename: part.filename, mediaType: part.mediaType };
}

/** An SDK part as the hub's; undefined when it has no content. */
export function partFromSdk(part: SdkPart): Part | undefined {
  const a2a = a2aPartFromSdk(part);
  return a2a && fromA2A(a2a);
}

/** A hub part as an SDK object; undefined for a kind this build does not know. */
export function partToSdk(part: Part): SdkPart | undefined {
  const a2a = toA2A(part);
  return a2a && a2aPartToSdk(a2a);
}

/**
 * The hub state for an agent's own task state. Submitted at the agent means it took the message,
 * which the hub calls working; auth-required is the hub's input-required (the sender must act).
 */
export function stateFromAgent(state: SdkTaskState): StateWord {
  switch (state) {
    case SdkTaskState.TASK_STATE_INPUT_REQUIRED:
    case SdkTaskState.TASK_STATE_AUTH_REQUIRED:
      return 'input-required';
    case SdkTaskState.TASK_STATE_COMPLETED:
      return 'completed';
    case SdkTaskState.TASK_STATE_FAILED:
      return 'failed';
    case SdkTaskState.TASK_STATE_CANCELED:
      return 'canceled';
    case SdkTaskState.TASK_STATE_REJECTED:
      return 'rejected';
    default:
      return 'working';
  }
}

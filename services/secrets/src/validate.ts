import { HubError } from '@agenthub/runtime';

/** Same shape the workspace service accepts; whether it exists is the workspace service's to say. */
const WORKSPACE_ID = /^ws_[a-z0-9]{1,64}$/;
/** Secret keys: 1 to 128 characters of A-Z a-z 0-9 _ . - (environment-variable friendly). */
export const KEY_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;
export const KEY_MAX = 128;
/** Values: UTF-8 text of at most 64 KiB. */
export const VALUE_MAX_BYTES = 64 * 1024;

export function workspaceId(value: string): string {
  if (!WORKSPACE_ID.test(value)) throw HubError.invalidParams('workspace_id', 'must be a workspace id of the form ws_…');
  return value;
}

export function key(value: string): string {
  if (value.length === 0) throw HubError.invalidParams('key', 'is required');
  if (value.length > KEY_MAX) throw HubError.invalidParams('key', `must be at most ${KEY_MAX} characters`);
  if (!KEY_PATTERN.test(value)) throw HubError.invalidParams('key', 'may hold only letters, digits, and _ . -');
  return value;
}

/** The value is checked for size only, and never echoed in the message. */
export function value(text: string): string {
  if (Buffer.byteLength(text, 'utf8') > VALUE_MAX_BYTES) {
    throw HubError.invalidParams('value', `must be at most ${VALUE_MAX_BYTES} bytes of UTF-8`);
  }
  return text;
}

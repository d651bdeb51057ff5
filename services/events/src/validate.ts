import { HubError } from '@agenthub/runtime';

/** Same shape the workspace service accepts; whether it exists is the workspace service's to say. */
const WORKSPACE_ID = /^ws_[a-z0-9]{1,64}$/;
const WEBHOOK_ID = /^wh_[a-z0-9]{1,64}$/;

/** The workspace events of the interface (Events); a webhook's filter may name only these. */
export const EVENT_TYPES: readonly string[] = [
  'workspace.created',
  'workspace.deleted',
  'workspace.member.added',
  'workspace.member.removed',
  'workspace.memory.stored',
  'workspace.memory.updated',
  'workspace.memory.deleted',
  'workspace.secret.set',
  'workspace.secret.deleted',
];

export const DESCRIPTION_MAX = 500;
export const LIMIT_DEFAULT = 50;
export const LIMIT_MAX = 100;

export function workspaceId(value: string): string {
  if (!WORKSPACE_ID.test(value)) throw HubError.invalidParams('workspace_id', 'must be a workspace id of the form ws_…');
  return value;
}

/** A malformed id cannot name a webhook: the same answer as an unknown one. */
export function webhookId(value: string): string {
  if (value.length === 0) throw HubError.invalidParams('webhook_id', 'is required');
  if (!WEBHOOK_ID.test(value)) throw HubError.notFound('Webhook not found');
  return value;
}

/** Known names only, duplicates dropped, order kept; empty means every event. */
export function eventTypes(values: string[]): string[] {
  values.forEach((value, i) => {
    if (!EVENT_TYPES.includes(value)) throw HubError.invalidParams(`events[${i}]`, `must be one of ${EVENT_TYPES.join(', ')}`);
  });
  return [...new Set(values)];
}

export function description(value: string): string {
  if (value.length > DESCRIPTION_MAX) throw HubError.invalidParams('description', `must be at most ${DESCRIPTION_MAX} characters`);
  return value;
}

export function limit(value: number): number {
  if (value === 0) return LIMIT_DEFAULT;
  if (value < 1 || value > LIMIT_MAX) throw HubError.invalidParams('limit', `must be between 1 and ${LIMIT_MAX}`);
  return value;
}

import { workspacev1 } from '@agenthub/proto';
import { HubError } from '@agenthub/runtime';

const { Role } = workspacev1;
type Role = workspacev1.Role;

const WORKSPACE_ID = /^ws_[a-z0-9]{1,64}$/;
const NAME_MAX = 200;
const DESCRIPTION_MAX = 2000;

/** Length in characters as a person counts them (code points), not UTF-16 units. */
function length(value: string): number {
  return [...value].length;
}

/** A well-formed workspace id; whether it exists is the caller's next check. */
export function workspaceId(value: string): string {
  if (!WORKSPACE_ID.test(value)) throw HubError.invalidParams('workspace_id', 'must be a workspace id of the form ws_…');
  return value;
}

/** The name, trimmed: 1 to 200 characters. */
export function workspaceName(value: string): string {
  const name = value.trim();
  if (name.length === 0) throw HubError.invalidParams('name', 'is required');
  if (length(name) > NAME_MAX) throw HubError.invalidParams('name', `must be at most ${NAME_MAX} characters`);
  return name;
}

/** Optional: proto3 cannot tell an omitted description from an empty one, and both are fine. */
export function workspaceDescription(value: string): string {
  if (length(value) > DESCRIPTION_MAX) {
    throw HubError.invalidParams('description', `must be at most ${DESCRIPTION_MAX} characters`);
  }
  return value;
}

/** A non-empty agent id; whether the agent exists is identity's to say. */
export function agentId(value: string): string {
  if (value.length === 0) throw HubError.invalidParams('agent_id', 'is required');
  return value;
}

export function role(value: Role): Role {
  if (value !== Role.READ && value !== Role.WRITE && value !== Role.ADMIN) {
    throw HubError.invalidParams('role', 'must be one of read, write, admin');
  }
  return value;
}

import { identityv1 } from '@agenthub/proto';
import { HubError } from '@agenthub/runtime';
import type { AgentSkillRecord, StoredGrantStatus } from './store.js';

const TENANT_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;
// Agent ids appear in URL paths (`/agents/{agentId}/a2a`), so only path-safe characters.
const AGENT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
// Ids this service generates (`key_…`, `grt_…`); anything else cannot name a row.
const GENERATED_ID = /^[a-z]+_[a-z0-9]{1,64}$/;
// RFC 6838 restricted names, plus `*` wildcards as used in content negotiation.
const MIME_NAME = '[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}';
const MIME_TYPE = new RegExp(`^(\\*/\\*|${MIME_NAME}/(\\*|${MIME_NAME}))$`);
const CONTROL = /[\u0000-\u001f\u007f]/;

const NAME_MAX = 200;
const URL_MAX = 2048;
const OUTPUT_MODES_MAX = 32;

function required(value: string, field: string): string {
  if (value === '') throw HubError.invalidParams(field, 'is required');
  return value;
}

export function tenantId(value: string, field = 'tenant_id'): string {
  if (!TENANT_ID.test(required(value, field))) {
    throw HubError.invalidParams(field, 'must be 1-63 lowercase letters, digits or hyphens, starting with a letter or digit');
  }
  return value;
}

export function agentId(value: string, field = 'agent_id'): string {
  if (!AGENT_ID.test(required(value, field))) {
    throw HubError.invalidParams(field, 'must be 1-128 letters, digits, dots, underscores or hyphens, starting with a letter or digit');
  }
  return value;
}

/** Ids of keys and grants, which only this service mints. */
export function generatedId(value: string, field: string): string {
  if (!GENERATED_ID.test(required(value, field))) throw HubError.invalidParams(field, 'is not a valid id');
  return value;
}

function displayName(value: string, field: string): string {
  const name = value.trim();
  if (name.length > NAME_MAX) throw HubError.invalidParams(field, `must be at most ${NAME_MAX} characters`);
  if (CONTROL.test(name)) throw HubError.invalidParams(field, 'must not contain control characters');
  return name;
}

/** Optional; the tenant id stands in when it is blank. */
export function tenantName(value: string, id: string): string {
  return displayName(value, 'name') || id;
}

export function agentName(value: string): string {
  return required(displayName(value, 'name'), 'name');
}

/** Optional: empty means the agent connects to the hub rather than being pushed to. */
export function endpointUrl(value: string): string {
  const url = value.trim();
  if (url === '') return '';
  if (url.length > URL_MAX) throw HubError.invalidParams('endpoint_url', `must be at most ${URL_MAX} characters`);
  let protocol: string;
  try {
    protocol = new URL(url).protocol;
  } catch {
    throw HubError.invalidParams('endpoint_url', 'must be an absolute http or https URL');
  }
  if (protocol !== 'http:' && protocol !== 'https:') {
    throw HubError.invalidParams('endpoint_url', 'must be an absolute http or https URL');
  }
  return url;
}

/** MIME types, lowercased (they are case-insensitive) and deduplicated in order. */
export function outputModes(values: readonly string[]): string[] {
  if (values.length > OUTPUT_MODES_MAX) {
    throw HubError.invalidParams('output_modes', `must hold at most ${OUTPUT_MODES_MAX} entries`);
  }
  const modes = new Set<string>();
  values.forEach((value, i) => {
    if (!MIME_TYPE.test(value)) throw HubError.invalidParams(`output_modes.${i}`, 'must be a MIME type such as text/plain');
    modes.add(value.toLowerCase());
  });
  return [...modes];
}

const DESCRIPTION_MAX = 2000;
const SKILLS_MAX = 32;
const TAGS_MAX = 16;
const SKILL_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Optional free text for the agent's Agent Card. */
export function description(value: string, field = 'description'): string {
  const text = value.trim();
  if (text.length > DESCRIPTION_MAX) throw HubError.invalidParams(field, `must be at most ${DESCRIPTION_MAX} characters`);
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(text)) throw HubError.invalidParams(field, 'must not contain control characters');
  return text;
}

/** The skills of the agent's Agent Card: unique ids, a name each, short tags. */
export function skills(values: readonly identityv1.AgentSkill[]): AgentSkillRecord[] {
  if (values.length > SKILLS_MAX) throw HubError.invalidParams('skills', `must hold at most ${SKILLS_MAX} entries`);
  const seen = new Set<string>();
  return values.map((skill, i) => {
    const at = `skills.${i}`;
    if (!SKILL_ID.test(skill.id)) throw HubError.invalidParams(`${at}.id`, 'must be 1-64 letters, digits, dots, underscores or hyphens');
    if (seen.has(skill.id)) throw HubError.invalidParams(`${at}.id`, 'must be unique among the skills');
    seen.add(skill.id);
    if (skill.tags.length > TAGS_MAX) throw HubError.invalidParams(`${at}.tags`, `must hold at most ${TAGS_MAX} entries`);
    const tags = skill.tags.map((tag, j) => required(displayName(tag, `${at}.tags.${j}`), `${at}.tags.${j}`));
    return { id: skill.id, name: required(displayName(skill.name, `${at}.name`), `${at}.name`), description: description(skill.description, `${at}.description`), tags };
  });
}

/** A status filter; undefined means every status. */
export function grantStatusFilter(value: identityv1.GrantStatus): StoredGrantStatus | undefined {
  switch (value) {
    case identityv1.GrantStatus.UNSPECIFIED:
      return undefined;
    case identityv1.GrantStatus.PENDING:
    case identityv1.GrantStatus.APPROVED:
    case identityv1.GrantStatus.REVOKED:
      return value;
    default:
      throw HubError.invalidParams('status', 'must be PENDING, APPROVED or REVOKED');
  }
}

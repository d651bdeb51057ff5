import { z } from 'zod';
import { HubError } from '@agenthub/runtime';

/**
 * Parses `params` against a method's schema. The first problem becomes -32602 naming the field
 * (`Invalid params: name is required`), so a caller can fix the request without guessing.
 */
export function parseParams<T>(schema: z.ZodType<T>, params: unknown, indexes: 'dotted' | 'brackets' = 'dotted'): T {
  const parsed = schema.safeParse(params);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  // The messaging dialects name list items as `parts[2]`, as A2A clients expect; the rest `tags.2`.
  const step = (at: string, key: PropertyKey) =>
    indexes === 'brackets' && typeof key === 'number' ? `${at}[${key}]` : at ? `${at}.${String(key)}` : String(key);
  const field = issue.path.length ? issue.path.reduce<string>(step, '') : 'params';
  throw HubError.invalidParams(field, describe(issue, params));
}

function describe(issue: z.core.$ZodIssue, params: unknown): string {
  switch (issue.code) {
    case 'invalid_type': {
      const value = valueAt(params, issue.path);
      return value === undefined ? 'is required' : `must be ${article(issue.expected)}`;
    }
    case 'too_small':
      return issue.origin === 'string'
        ? Number(issue.minimum) === 1 ? 'must not be empty' : `must be at least ${issue.minimum} characters`
        : issue.origin === 'array' ? `must have at least ${issue.minimum} items` : `must be at least ${issue.minimum}`;
    case 'too_big':
      return issue.origin === 'string'
        ? `must be at most ${issue.maximum} characters`
        : issue.origin === 'array' ? `must have at most ${issue.maximum} items` : `must be at most ${issue.maximum}`;
    case 'invalid_value':
      return `must be one of ${issue.values.map((v) => String(v)).join(', ')}`;
    case 'invalid_format':
      return issue.message;
    default:
      return issue.message;
  }
}

function article(type: string): string {
  if (type === 'int') return 'an integer';
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let value = root;
  for (const key of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

/** Schemas shared by several methods. */
export const field = {
  workspaceId: z.string().min(1).max(128),
  agentId: z.string().min(1).max(128),
  role: z.enum(['read', 'write', 'admin']),
  id: z.string().min(1).max(128),
};

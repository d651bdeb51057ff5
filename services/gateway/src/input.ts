import { HubError } from '@agenthub/runtime';

/** How deep `params` may nest (objects and arrays) when the operator sets no HUB_MAX_JSON_DEPTH. */
export const DEFAULT_MAX_JSON_DEPTH = 32;

/**
 * Checks what every method's params share before any method reads them: no string (value or key)
 * holds a NUL character, which PostgreSQL cannot store in text or JSON, and objects and arrays
 * nest at most `maxDepth` levels, so a deeply nested `data` part cannot exhaust the stack of a
 * codec further on. The refusal is -32602 naming the path of the offending field.
 */
export function checkParams(params: Record<string, unknown>, maxDepth: number): void {
  visit(params, '', 1, maxDepth);
}

function visit(value: unknown, path: string, depth: number, maxDepth: number): void {
  if (typeof value === 'string') {
    if (value.includes('\u0000')) throw HubError.invalidParams(path || 'params', 'must not contain a NUL character');
    return;
  }
  if (value === null || typeof value !== 'object') return;
  if (depth > maxDepth) throw HubError.invalidParams(path || 'params', `nests deeper than ${maxDepth} levels`);
  if (Array.isArray(value)) {
    value.forEach((item, i) => visit(item, `${path}[${i}]`, depth + 1, maxDepth));
    return;
  }
  for (const [key, item] of Object.entries(value)) {
    if (key.includes('\u0000')) throw HubError.invalidParams(path || 'params', 'must not have a key with a NUL character');
    visit(item, path ? `${path}.${key}` : key, depth + 1, maxDepth);
  }
}

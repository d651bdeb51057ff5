import { workspacev1 } from '@agenthub/proto';
import { HubError } from '@agenthub/runtime';
import { MEMORY_TYPES, type MemoryType } from './memory-types.js';
import type { VectorFilter } from './vectors.js';

/**
 * Defaults and maximums of the memory methods (documented in the README). The gateway checks
 * the same bounds; these checks hold for every gRPC caller.
 */
export const MEMORY_LIMITS = {
  /** Characters (code points) of content, after trimming. */
  contentMax: 4000,
  queryMax: 4000,
  tagsMax: 20,
  tagMax: 64,
  query: { limitDefault: 10, limitMax: 100, thresholdDefault: 0 },
  /** Forget by query is conservative: the single best match, and only a close one. */
  forget: { limitDefault: 1, limitMax: 100, thresholdDefault: 0.6 },
  list: { limitDefault: 50, limitMax: 200, offsetMax: 1_000_000 },
  /** The type a stored memory gets when none is given. */
  typeDefault: 'fact' as MemoryType,
} as const;

const MEMORY_ID = /^wmem_[a-z0-9]{1,64}$/;
const TYPES: readonly string[] = MEMORY_TYPES.map((t) => t.type);

function length(value: string): number {
  return [...value].length;
}

export function memoryId(value: string, field = 'id'): string {
  if (value === '') throw HubError.invalidParams(field, 'is required');
  if (!MEMORY_ID.test(value)) throw HubError.invalidParams(field, 'must be a memory id of the form wmem_…');
  return value;
}

/** Trimmed, 1 to contentMax characters. */
export function content(value: string, field = 'content'): string {
  const text = value.trim();
  if (text.length === 0) throw HubError.invalidParams(field, 'is required');
  if (length(text) > MEMORY_LIMITS.contentMax) throw HubError.invalidParams(field, `must be at most ${MEMORY_LIMITS.contentMax} characters`);
  return text;
}

export function queryText(value: string, field = 'query'): string {
  const text = value.trim();
  if (text.length === 0) throw HubError.invalidParams(field, 'is required');
  if (length(text) > MEMORY_LIMITS.queryMax) throw HubError.invalidParams(field, `must be at most ${MEMORY_LIMITS.queryMax} characters`);
  return text;
}

/** One of the six types; empty means the default. */
export function memoryType(value: string, field = 'type'): MemoryType {
  if (value === '') return MEMORY_LIMITS.typeDefault;
  if (!TYPES.includes(value)) throw HubError.invalidParams(field, `must be one of ${TYPES.join(', ')}`);
  return value as MemoryType;
}

/** Trimmed tags without repeats, in the order given. */
export function tags(values: readonly string[], field = 'tags'): string[] {
  if (values.length > MEMORY_LIMITS.tagsMax) throw HubError.invalidParams(field, `must have at most ${MEMORY_LIMITS.tagsMax} items`);
  const out: string[] = [];
  values.forEach((raw, i) => {
    const tag = raw.trim();
    if (tag.length === 0) throw HubError.invalidParams(`${field}.${i}`, 'must not be empty');
    if (length(tag) > MEMORY_LIMITS.tagMax) throw HubError.invalidParams(`${field}.${i}`, `must be at most ${MEMORY_LIMITS.tagMax} characters`);
    if (!out.includes(tag)) out.push(tag);
  });
  return out;
}

export function limit(value: number | undefined, bounds: { limitDefault: number; limitMax: number }, field = 'limit'): number {
  if (value === undefined) return bounds.limitDefault;
  if (!Number.isInteger(value) || value < 1 || value > bounds.limitMax) {
    throw HubError.invalidParams(field, `must be an integer from 1 to ${bounds.limitMax}`);
  }
  return value;
}

export function offset(value: number | undefined, field = 'offset'): number {
  if (value === undefined) return 0;
  if (!Number.isInteger(value) || value < 0 || value > MEMORY_LIMITS.list.offsetMax) {
    throw HubError.invalidParams(field, `must be an integer from 0 to ${MEMORY_LIMITS.list.offsetMax}`);
  }
  return value;
}

export function threshold(value: number | undefined, fallback: number, field = 'threshold'): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value < 0 || value > 1) throw HubError.invalidParams(field, 'must be a number from 0 to 1');
  return value;
}

/** The filter of a query, listing or forget, with the JSON parameter names in its errors. */
export function filter(value: workspacev1.MemoryFilter | undefined): VectorFilter | undefined {
  if (!value) return undefined;
  const out: VectorFilter = {};
  if (value.types.length > 0) {
    if (value.types.length > TYPES.length) throw HubError.invalidParams('type', `must have at most ${TYPES.length} items`);
    out.types = [...new Set(value.types.map((t) => memoryType(t === '' ? ' ' : t, 'type')))];
  }
  if (value.tags.length > 0) {
    out.tags = tags(value.tags);
    out.tagMatch = value.tagMatch === workspacev1.TagMatch.ALL ? 'all' : 'any';
  }
  const time = (v: bigint | undefined, field: string): number | undefined => {
    if (v === undefined) return undefined;
    if (v < 0n || v > BigInt(Number.MAX_SAFE_INTEGER)) throw HubError.invalidParams(field, 'must be a timestamp in epoch milliseconds');
    return Number(v);
  };
  const after = time(value.createdAfter, 'created_after');
  const before = time(value.createdBefore, 'created_before');
  if (after !== undefined) out.createdAfter = after;
  if (before !== undefined) out.createdBefore = before;
  return Object.keys(out).length > 0 ? out : undefined;
}

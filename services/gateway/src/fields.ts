import { HubError } from '@agenthub/runtime';

/**
 * Readers of hand-checked params (the messaging dialects check theirs by hand so each bad part is
 * named by index and field); each refusal is -32602 naming the field as `<at><key>`.
 */

export type Json = Record<string, unknown>;

export const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

export const bad = (field: string, problem: string) => HubError.invalidParams(field, problem);

export function str(obj: Json, key: string, at: string, required: boolean): string | undefined {
  const value = obj[key];
  if (value === undefined || value === null) {
    if (required) throw bad(`${at}${key}`, 'is required');
    return undefined;
  }
  if (typeof value !== 'string') throw bad(`${at}${key}`, 'must be a string');
  if (required && value === '') throw bad(`${at}${key}`, 'must not be empty');
  return value;
}

/** The largest value of a proto `int32`, the default bound of an integer parameter (counts, sizes). */
export const INT32_MAX = 2_147_483_647;

/** An integer in [min, max]; every numeric parameter has a bound, so none overflows its proto field. */
export function optionalInt(obj: Json, key: string, at: string, min: number, max = INT32_MAX): number | undefined {
  const value = obj[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value)) throw bad(`${at}${key}`, 'must be an integer');
  if (value < min) throw bad(`${at}${key}`, `must be at least ${min}`);
  if (value > max) throw bad(`${at}${key}`, `must be at most ${max}`);
  return value;
}

export function optionalBool(obj: Json, key: string, at: string): boolean | undefined {
  const value = obj[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw bad(`${at}${key}`, 'must be a boolean');
  return value;
}

import type { DecodeOptions } from '../parts.js';

/** Readers of untrusted JSON for the decoders, reporting through the caller's `invalid`. */

export type Json = Record<string, unknown>;

export const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

export function str(obj: Json, key: string, at: string, required: boolean, o: DecodeOptions): string | undefined {
  const value = obj[key];
  if (value === undefined || value === null) {
    if (required) throw o.invalid(`${at}${key}`, 'is required');
    return undefined;
  }
  if (typeof value !== 'string') throw o.invalid(`${at}${key}`, 'must be a string');
  if (required && value === '') throw o.invalid(`${at}${key}`, 'must not be empty');
  return value;
}

import { fromA2A, toA2A, type A2APart, type DecodeOptions, type Part } from '../parts.js';
import { isObject, str, type Json } from './read.js';

/**
 * Parts in A2A 1.0 ProtoJSON, the dialect of the strict endpoint: a oneof `text` | `raw` (base64)
 * | `url` | `data` (a JSON value), with `mediaType` and `filename`, empty fields omitted. Mapped to
 * hub parts by `parts.ts`.
 */

/** ProtoJSON accepts standard or URL-safe base64, padded or not; the hub keeps standard, padded. */
function base64In(value: string, field: string, o: DecodeOptions): string {
  const standard = value.replace(/-/g, '+').replace(/_/g, '/');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(standard) || standard.replace(/=+$/, '').length % 4 === 1) throw o.invalid(field, 'must be base64');
  const unpadded = standard.replace(/=+$/, '');
  const padded = unpadded + '='.repeat((4 - (unpadded.length % 4)) % 4);
  if (padded.length > o.maxInlineChars) throw o.invalid(field, `must be at most ${o.maxInlineChars} base64 characters; send a url for larger files`);
  return padded;
}

/** A ProtoJSON part as A2A's, naming the field at fault as `<at>.<field>`. */
export function a2aPartFromProtoJson(raw: unknown, at: string, o: DecodeOptions): A2APart {
  if (!isObject(raw)) throw o.invalid(at, 'must be an object');
  const p = `${at}.`;
  const mediaType = str(raw, 'mediaType', p, false, o) ?? '';
  const filename = str(raw, 'filename', p, false, o) ?? '';
  const present = (['text', 'raw', 'url', 'data'] as const).filter((k) => raw[k] !== undefined && raw[k] !== null);
  if (present.length === 0) throw o.invalid(`${p}text`, 'or raw, url or data is required');
  if (present.length > 1) throw o.invalid(`${p}${present[1]}`, `must not be given together with ${present[0]}`);
  switch (present[0]!) {
    case 'text':
      return { content: { case: 'text', value: str(raw, 'text', p, false, o)! }, mediaType, filename };
    case 'raw':
      return { content: { case: 'raw', value: base64In(str(raw, 'raw', p, false, o)!, `${p}raw`, o) }, mediaType, filename };
    case 'url': {
      const url = str(raw, 'url', p, false, o)!;
      if (!URL.canParse(url)) throw o.invalid(`${p}url`, 'must be a URL');
      return { content: { case: 'url', value: url }, mediaType, filename };
    }
    case 'data':
      return { content: { case: 'data', value: raw.data }, mediaType, filename };
  }
}

/** A ProtoJSON part as the hub's. */
export const partFromProtoJson = (raw: unknown, at: string, o: DecodeOptions): Part => fromA2A(a2aPartFromProtoJson(raw, at, o));

/** An A2A part in ProtoJSON; empty `mediaType` and `filename` are omitted. */
export function a2aPartToProtoJson(part: A2APart): Json {
  return {
    [part.content.case]: part.content.value,
    ...(part.filename ? { filename: part.filename } : {}),
    ...(part.mediaType ? { mediaType: part.mediaType } : {}),
  };
}

/** A hub part in ProtoJSON; undefined for a kind this build does not know. */
export function partToProtoJson(part: Part): Json | undefined {
  const a2a = toA2A(part);
  return a2a && a2aPartToProtoJson(a2a);
}

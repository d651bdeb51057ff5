import type { DecodeOptions, Part } from '../parts.js';
import { dataPart, filePart, textPart } from '../parts.js';
import { isObject, str, type Json } from './read.js';

/**
 * Parts in the interface's dialect (`spec/interface.md`): tagged by `kind`, flat file parts
 * (`name`, `mimeType`, `data` in base64 or `uri`), data parts as serialized text of a media type.
 * The dialect is the hub's own model, so both directions are lossless.
 */

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** One wire part as the hub's, naming the field at fault as `<at>.<field>`. */
export function partFromInterface(raw: unknown, at: string, o: DecodeOptions): Part {
  if (!isObject(raw)) throw o.invalid(at, 'must be an object');
  const p = `${at}.`;
  switch (raw.kind) {
    case 'text': {
      // Empty text (and data) is a part A2A clients can send; every hub part is writable in every dialect.
      const text = str(raw, 'text', p, false, o);
      if (text === undefined) throw o.invalid(`${p}text`, 'is required');
      return textPart(text);
    }
    case 'file': {
      const mimeType = str(raw, 'mimeType', p, true, o)!;
      const name = str(raw, 'name', p, false, o) ?? '';
      const data = str(raw, 'data', p, false, o);
      const uri = str(raw, 'uri', p, false, o);
      if (data === undefined && uri === undefined) throw o.invalid(`${p}data`, 'or uri is required');
      if (data !== undefined && uri !== undefined) throw o.invalid(`${p}uri`, 'must not be given together with data');
      if (data !== undefined) {
        if (data.length > o.maxInlineChars) throw o.invalid(`${p}data`, `must be at most ${o.maxInlineChars} base64 characters; send a uri for larger files`);
        if (data.length % 4 !== 0 || !BASE64.test(data)) throw o.invalid(`${p}data`, 'must be base64');
      }
      if (uri !== undefined && !URL.canParse(uri)) throw o.invalid(`${p}uri`, 'must be a URL');
      return filePart({ name, mimeType, data: data ?? '', uri: uri ?? '' });
    }
    case 'data': {
      const mimeType = str(raw, 'mimeType', p, true, o)!;
      const data = str(raw, 'data', p, false, o);
      if (data === undefined) throw o.invalid(`${p}data`, 'is required');
      return dataPart(mimeType, data);
    }
    case undefined:
      throw o.invalid(`${p}kind`, 'is required');
    default:
      throw o.invalid(`${p}kind`, 'must be one of text, file, data');
  }
}

/** A hub part in the interface's dialect; `{kind: 'unknown'}` for a kind this build does not know. */
export function partToInterface(part: Part): Json {
  const c = part.content;
  switch (c.case) {
    case 'text':
      return { kind: 'text', text: c.value.text };
    case 'file':
      return {
        kind: 'file',
        ...(c.value.name ? { name: c.value.name } : {}),
        mimeType: c.value.mimeType,
        ...(c.value.uri ? { uri: c.value.uri } : { data: c.value.data }),
      };
    case 'data':
      return { kind: 'data', mimeType: c.value.mimeType, data: c.value.data };
    default:
      return { kind: 'unknown' };
  }
}

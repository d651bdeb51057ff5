import { create } from '@bufbuild/protobuf';
import { messagingv1 } from '@agenthub/proto';
import { isJsonType } from './media-types.js';

/**
 * The one mapping between the hub's parts (agenthub.messaging.v1: text | file | data, data being
 * serialized text of a media type) and A2A 1.0's (text | raw | url | data, each with `mediaType`
 * and `filename`, data being a JSON value). The ProtoJSON and `@a2a-js/sdk` codecs are encodings of
 * `A2APart` and go through here, so the gateway and the push worker map parts the same way:
 *
 * | A2A part | hub part |
 * |---|---|
 * | `text` (no mediaType, or text/plain) | text |
 * | `text` with another mediaType | data {mimeType, data: the text} |
 * | `raw` | file {name: filename, mimeType, data: base64} |
 * | `url` | file {name: filename, mimeType, uri} |
 * | `data` (a JSON value) | data {mimeType (default application/json), data: serialized JSON} |
 *
 * and back: a hub data part of a JSON media type holding JSON becomes `data`, any other `text` of
 * its media type.
 */

export type Part = messagingv1.Part;

/** A2A part content; `raw` is kept as standard padded base64, as the hub stores file data. */
export type A2AContent =
  | { case: 'text'; value: string }
  | { case: 'raw'; value: string }
  | { case: 'url'; value: string }
  | { case: 'data'; value: unknown };

export interface A2APart {
  content: A2AContent;
  /** Empty when not given. */
  mediaType: string;
  /** Empty when not given. */
  filename: string;
}

export const TEXT_PLAIN = 'text/plain';
/** A file part's type when an A2A part names none. */
export const DEFAULT_FILE_TYPE = 'application/octet-stream';
/** A data part's type when an A2A part names none. */
export const DEFAULT_DATA_TYPE = 'application/json';

export const textPart = (text: string): Part => create(messagingv1.PartSchema, { content: { case: 'text', value: { text } } });
export const filePart = (value: { name: string; mimeType: string; data?: string; uri?: string }): Part =>
  create(messagingv1.PartSchema, { content: { case: 'file', value } });
export const dataPart = (mimeType: string, data: string): Part => create(messagingv1.PartSchema, { content: { case: 'data', value: { mimeType, data } } });

/** An A2A part as the hub's. */
export function fromA2A(part: A2APart): Part {
  const c = part.content;
  switch (c.case) {
    case 'text':
      // Only plain text with no parameters is the hub's text part; any other keeps its media type.
      return part.mediaType === '' || part.mediaType === TEXT_PLAIN ? textPart(c.value) : dataPart(part.mediaType, c.value);
    case 'raw':
      return filePart({ name: part.filename, mimeType: part.mediaType || DEFAULT_FILE_TYPE, data: c.value });
    case 'url':
      return filePart({ name: part.filename, mimeType: part.mediaType || DEFAULT_FILE_TYPE, uri: c.value });
    case 'data':
      return dataPart(part.mediaType || DEFAULT_DATA_TYPE, JSON.stringify(c.value ?? null));
  }
}

/** A hub part as A2A's; undefined for a part of a kind this build does not know. */
export function toA2A(part: Part): A2APart | undefined {
  const c = part.content;
  switch (c.case) {
    case 'text':
      return { content: { case: 'text', value: c.value.text }, mediaType: TEXT_PLAIN, filename: '' };
    case 'file':
      return c.value.uri
        ? { content: { case: 'url', value: c.value.uri }, mediaType: c.value.mimeType, filename: c.value.name }
        : { content: { case: 'raw', value: c.value.data }, mediaType: c.value.mimeType, filename: c.value.name };
    case 'data':
      if (isJsonType(c.value.mimeType)) {
        try {
          return { content: { case: 'data', value: JSON.parse(c.value.data) as unknown }, mediaType: c.value.mimeType, filename: '' };
        } catch {
          // Declared JSON but is not: it still reaches the client, as text of its media type.
        }
      }
      return { content: { case: 'text', value: c.value.data }, mediaType: c.value.mimeType, filename: '' };
    default:
      return undefined;
  }
}

/** How a decoder reports a bad field: the caller's error type (the gateway's -32602), named by path. */
export interface DecodeOptions {
  invalid: (field: string, problem: string) => Error;
  /** Longest inline file content, in base64 characters. */
  maxInlineChars: number;
}

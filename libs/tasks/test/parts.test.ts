import { equals } from '@bufbuild/protobuf';
import { messagingv1 } from '@agenthub/proto';
import { seededRandom } from '@agenthub/testing';
import {
  a2aPartFromProtoJson,
  a2aPartFromSdk,
  a2aPartToProtoJson,
  a2aPartToSdk,
  dataPart,
  filePart,
  fromA2A,
  partFromInterface,
  partFromProtoJson,
  partFromSdk,
  partToInterface,
  partToProtoJson,
  partToSdk,
  textPart,
  toA2A,
  type A2APart,
  type DecodeOptions,
  type Part,
} from '@agenthub/tasks';

/**
 * The part codecs, property-style: parts drawn from a seeded generator go through each dialect
 * and back. Hub parts come back equal; A2A parts come back equal to themselves once normalised by
 * one pass through the hub (a text part with no media type is text/plain, an A2A text of a JSON
 * media type holding JSON comes back as data, which is what the hub keeps).
 */

class FieldError extends Error {
  constructor(readonly field: string, problem: string) {
    super(`${field} ${problem}`);
  }
}
const OPTIONS: DecodeOptions = { invalid: (field, problem) => new FieldError(field, problem), maxInlineChars: 1 << 20 };

/** Seeded inputs, plus a text of a few characters from an awkward set. */
function prng(seed: number) {
  const { int, pick } = seededRandom(seed);
  const text = () => Array.from({ length: int(12) }, () => pick(['a', 'Z', ' ', '#', '*', 'é', '漢', '\n', '"', '{', '0', '🙂'])).join('');
  return { int, pick, text };
}

const SEEDS = Array.from({ length: 300 }, (_, i) => i + 1);
const TEXT_TYPES = ['text/markdown', 'text/csv', 'text/html; charset=utf-8', 'text/plain; charset=utf-8', 'TEXT/PLAIN', 'application/xml'];
const JSON_TYPES = ['application/json', 'application/vnd.api+json', 'application/json; charset=utf-8'];
const FILE_TYPES = ['image/png', 'application/pdf', 'application/octet-stream', 'text/plain'];

function jsonValue(r: ReturnType<typeof prng>, depth = 0): unknown {
  switch (r.int(depth > 2 ? 4 : 6)) {
    case 0: return r.text();
    case 1: return r.int(1000) - 500;
    case 2: return r.pick([true, false, null]);
    case 3: return r.int(100) / 8;
    case 4: return Array.from({ length: r.int(3) }, () => jsonValue(r, depth + 1));
    default: return Object.fromEntries(Array.from({ length: r.int(3) }, () => [r.text(), jsonValue(r, depth + 1)]));
  }
}

/** A2A data is an object at the top: ProtoJSON cannot tell a `null` field from an absent one. */
const jsonObject = (r: ReturnType<typeof prng>) => Object.fromEntries(Array.from({ length: r.int(4) }, () => [r.text(), jsonValue(r, 1)]));

const base64 = (r: ReturnType<typeof prng>) => Buffer.from(Array.from({ length: r.int(40) }, () => r.int(256))).toString('base64');

/** A hub part as the hub keeps it (JSON data serialized compactly, file types named). */
function hubPart(seed: number): Part {
  const r = prng(seed);
  switch (r.int(6)) {
    case 0: return textPart(r.text());
    case 1: return filePart({ name: r.pick(['', 'chart.png', 'a b.pdf']), mimeType: r.pick(FILE_TYPES), data: base64(r) });
    case 2: return filePart({ name: r.pick(['', 'report.pdf']), mimeType: r.pick(FILE_TYPES), uri: `https://example.com/${r.int(1000)}?q=${r.int(9)}` });
    case 3: return dataPart(r.pick(JSON_TYPES), JSON.stringify(jsonObject(r)));
    case 4: return dataPart(r.pick(TEXT_TYPES), r.text());
    default: return dataPart(r.pick(JSON_TYPES), `not json ${r.text()}`);
  }
}

/** An A2A part as a client may send it. */
function a2aPart(seed: number): A2APart {
  const r = prng(seed);
  switch (r.int(5)) {
    case 0: return { content: { case: 'text', value: r.text() }, mediaType: r.pick(['', 'text/plain', ...TEXT_TYPES, ...JSON_TYPES]), filename: '' };
    case 1: return { content: { case: 'raw', value: base64(r) }, mediaType: r.pick(['', ...FILE_TYPES]), filename: r.pick(['', 'chart.png']) };
    case 2: return { content: { case: 'url', value: `https://example.com/${r.int(1000)}` }, mediaType: r.pick(['', ...FILE_TYPES]), filename: r.pick(['', 'x.pdf']) };
    default: return { content: { case: 'data', value: jsonObject(r) }, mediaType: r.pick(['', ...JSON_TYPES]), filename: '' };
  }
}

const sameHub = (a: Part, b: Part) => equals(messagingv1.PartSchema, a, b);
/** What the hub gives back for an A2A part: one pass through its model. */
const normalised = (part: A2APart) => toA2A(fromA2A(part))!;

/** Each dialect: hub part → wire → hub part, and A2A part → wire → A2A part. */
const DIALECTS = [
  {
    name: 'interface',
    hubRoundTrip: (p: Part) => partFromInterface(JSON.parse(JSON.stringify(partToInterface(p))), 'part', OPTIONS),
    a2aRoundTrip: undefined,
  },
  {
    name: 'A2A ProtoJSON',
    hubRoundTrip: (p: Part) => partFromProtoJson(JSON.parse(JSON.stringify(partToProtoJson(p))), 'part', OPTIONS),
    a2aRoundTrip: (p: A2APart) => a2aPartFromProtoJson(JSON.parse(JSON.stringify(a2aPartToProtoJson(p))), 'part', OPTIONS),
  },
  {
    name: '@a2a-js/sdk',
    hubRoundTrip: (p: Part) => partFromSdk(partToSdk(p)!)!,
    a2aRoundTrip: (p: A2APart) => a2aPartFromSdk(a2aPartToSdk(p))!,
  },
] as const;

describe.each(DIALECTS.map((d) => [d.name, d] as const))('parts in the %s dialect', (_name, dialect) => {
  it('give back every generated hub part unchanged', () => {
    for (const seed of SEEDS) {
      const part = hubPart(seed);
      const back = dialect.hubRoundTrip(part);
      if (!sameHub(back, part)) throw new Error(`seed ${seed}: ${JSON.stringify(part.content)} came back as ${JSON.stringify(back.content)}`);
    }
  });

  if (dialect.a2aRoundTrip) {
    const roundTrip = dialect.a2aRoundTrip;
    it('carry every generated A2A part unchanged, and through the hub as the hub normalises it', () => {
      for (const seed of SEEDS) {
        const part = a2aPart(seed);
        expect([seed, roundTrip(part)]).toEqual([seed, part]);
        const viaHub = toA2A(dialect.hubRoundTrip(fromA2A(part)))!;
        expect([seed, viaHub]).toEqual([seed, normalised(part)]);
        expect([seed, normalised(viaHub)]).toEqual([seed, viaHub]);
      }
    });
  }
});

describe('the part table', () => {
  const A2A_TO_HUB: [string, A2APart, Part][] = [
    ['plain text', { content: { case: 'text', value: 'hi' }, mediaType: '', filename: '' }, textPart('hi')],
    ['text/plain', { content: { case: 'text', value: 'hi' }, mediaType: 'text/plain', filename: '' }, textPart('hi')],
    ['markdown keeps its media type', { content: { case: 'text', value: '# T' }, mediaType: 'text/markdown', filename: '' }, dataPart('text/markdown', '# T')],
    ['raw without a type', { content: { case: 'raw', value: 'AAE=' }, mediaType: '', filename: 'f' }, filePart({ name: 'f', mimeType: 'application/octet-stream', data: 'AAE=' })],
    ['url', { content: { case: 'url', value: 'https://x.test/a' }, mediaType: 'application/pdf', filename: '' }, filePart({ name: '', mimeType: 'application/pdf', uri: 'https://x.test/a' })],
    ['data without a type', { content: { case: 'data', value: { a: 1 } }, mediaType: '', filename: '' }, dataPart('application/json', '{"a":1}')],
  ];
  it.each(A2A_TO_HUB)('%s', (_name, a2a, hub) => {
    expect(sameHub(fromA2A(a2a), hub)).toBe(true);
  });

  it('reads a markdown text part from an SDK agent as markdown, and writes it back as such', () => {
    const fromAgent = partFromSdk({ content: { $case: 'text', value: '**bold**' }, metadata: undefined, filename: '', mediaType: 'text/markdown' })!;
    expect(partToProtoJson(fromAgent)).toEqual({ text: '**bold**', mediaType: 'text/markdown' });
    expect(partToInterface(fromAgent)).toEqual({ kind: 'data', mimeType: 'text/markdown', data: '**bold**' });
  });

  it('names the field at fault', () => {
    expect(() => partFromProtoJson({ text: 'a', data: {} }, 'message.parts[1]', OPTIONS)).toThrow(expect.objectContaining({ field: 'message.parts[1].data' }));
    expect(() => partFromInterface({ kind: 'file', mimeType: 'image/png' }, 'message.parts[0]', OPTIONS)).toThrow(expect.objectContaining({ field: 'message.parts[0].data' }));
    expect(() => partFromProtoJson({ raw: '***' }, 'p', OPTIONS)).toThrow(expect.objectContaining({ field: 'p.raw' }));
  });
});

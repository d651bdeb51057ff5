/**
 * Media types and media ranges as HTTP matches them (RFC 9110 §8.3.1, §12.5.1): type and subtype
 * compare case-insensitively, parameters (`; charset=utf-8`) do not narrow a match, `*\/*` and
 * `type/*` are ranges.
 */

/** `type/subtype` in lower case, parameters dropped; undefined for something that is not one. */
export function essence(mediaType: string): string | undefined {
  const bare = mediaType.split(';', 1)[0]!.trim().toLowerCase();
  return /^[a-z0-9!#$&^_.+*-]+\/[a-z0-9!#$&^_.+*-]+$/.test(bare) ? bare : undefined;
}

/**
 * Whether media range `range` (`*\/*`, `text/*`, `text/plain`) and media type `type` meet. An agent
 * may declare a range too (`text/*`): it may produce anything in it, so each side is read as a range.
 */
export function rangeCovers(range: string, type: string): boolean {
  const r = essence(range)?.split('/');
  const t = essence(type)?.split('/');
  if (!r || !t) return false;
  const meet = (a: string, b: string) => a === '*' || b === '*' || a === b;
  return meet(r[0]!, t[0]!) && meet(r[1]!, t[1]!);
}

/**
 * Content negotiation for a send: whether a client accepting `accepted` can take something an agent
 * producing `produced` makes. Either list empty means anything.
 */
export function acceptsAny(accepted: readonly string[], produced: readonly string[]): boolean {
  if (accepted.length === 0 || produced.length === 0) return true;
  return accepted.some((range) => produced.some((type) => rangeCovers(range, type)));
}

/** JSON media types: `application/json` and `application/*+json`, parameters allowed. */
export const isJsonType = (mediaType: string): boolean => /^application\/([\w.+-]+\+)?json$/.test(essence(mediaType) ?? '');

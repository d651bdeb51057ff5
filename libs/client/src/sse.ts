/** One Server-Sent Event: its `id:` (when sent) and its `data:` lines joined. */
export interface SseEvent {
  id?: string;
  event?: string;
  data: string;
}

/**
 * Parses a `text/event-stream` body (the WHATWG rules the hub's streams need: `id`, `event`,
 * multi-line `data`, comments, CRLF or LF). Yields each event when its blank line arrives.
 */
export async function* parseSse(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  let data: string[] = [];
  let id: string | undefined;
  let event: string | undefined;
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline: number;
    while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
      // A CR that ends the chunk may be the first half of a CRLF.
      if (newline === buffer.length - 1 && buffer.endsWith('\r')) break;
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
      if (line === '') {
        if (data.length) yield { ...(id !== undefined ? { id } : {}), ...(event !== undefined ? { event } : {}), data: data.join('\n') };
        data = [];
        id = undefined;
        event = undefined;
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const name = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (name === 'data') data.push(value);
      else if (name === 'id' && !value.includes('\0')) id = value;
      else if (name === 'event') event = value;
    }
  }
}

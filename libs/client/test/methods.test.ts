import { agentMethods } from '@agenthub/gateway';
import { METHODS, parseSse, HubRpcError } from '@agenthub/client';

describe('client method table', () => {
  // The gateway's table, enumerated without services: only names and kinds are read.
  const gateway = agentMethods(new Map());

  it('has every method of the gateway, each a stream exactly where the gateway streams', () => {
    const theirs = Object.fromEntries([...gateway].map(([name, method]) => [name, { stream: method.stream !== undefined }]));
    expect(METHODS).toEqual(theirs);
  });
});

describe('parseSse', () => {
  async function* chunks(...parts: string[]) {
    for (const part of parts) yield new TextEncoder().encode(part);
  }

  it('reads ids, multi-line data and comments across chunk boundaries, LF or CRLF', async () => {
    const events = [];
    for await (const event of parseSse(chunks(': keep-alive\n\nid: 7\ndata: {"a"', ':1}\n\nid: 7.0\r', '\ndata: x\r\ndata: y\r\n\r\n'))) events.push(event);
    expect(events).toEqual([
      { id: '7', data: '{"a":1}' },
      { id: '7.0', data: 'x\ny' },
    ]);
  });
});

describe('HubRpcError', () => {
  it('carries code, reason, field and whether a retry can pass', () => {
    const refused = new HubRpcError({ code: -32602, message: 'Invalid params: name is required', data: { reason: 'invalid_params', field: 'name' } }, 200);
    expect([refused.code, refused.reason, refused.field, refused.retryable]).toEqual([-32602, 'invalid_params', 'name', false]);
    const limited = new HubRpcError({ code: -32029, message: 'Rate limit exceeded', data: { retry_after_ms: 1500 } }, 429);
    expect([limited.retryable, limited.retryAfterMs]).toEqual([true, 1500]);
  });
});

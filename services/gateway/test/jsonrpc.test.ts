import { Writable } from 'node:stream';
import { createLogger, HubError, Metrics, Reason } from '@agenthub/runtime';
import { testLogger } from '@agenthub/testing';
import { JsonRpcHandler, RpcCode, type RpcContext, type RpcResponse } from '@agenthub/gateway';

const ctx: RpcContext = { principal: { kind: 'agent', agentId: 'a1', tenantId: 't1' } };

function handler(precheck?: (c: RpcContext) => { code: number; message: string } | undefined) {
  const calls: Record<string, unknown>[] = [];
  const methods = new Map([
    ['echo', { invoke: async (params: Record<string, unknown>) => (calls.push(params), { echoed: params }) }],
    ['fails', { invoke: async () => { throw new HubError(Reason.ACCESS_DENIED, 'Access denied'); } }],
    ['crashes', { invoke: async () => { throw new Error('database password is hunter2'); } }],
    ['bad-field', { invoke: async () => { throw HubError.invalidParams('role', 'must be one of read, write, admin'); } }],
  ]);
  return { calls, rpc: new JsonRpcHandler({ methods, maxBatch: 3, log: testLogger(), metrics: new Metrics(), precheck }) };
}

describe('JsonRpcHandler', () => {
  it('answers a call with its result and echoes the id', async () => {
    const { rpc } = handler();
    expect(await rpc.handle({ jsonrpc: '2.0', id: 7, method: 'echo', params: { a: 1 } }, ctx)).toEqual({
      jsonrpc: '2.0', id: 7, result: { echoed: { a: 1 } },
    });
    expect(await rpc.handle({ jsonrpc: '2.0', id: 'abc', method: 'echo' }, ctx)).toMatchObject({ id: 'abc', result: { echoed: {} } });
  });

  it('rejects envelopes that are not JSON-RPC 2.0 requests with -32600', async () => {
    const { rpc } = handler();
    for (const body of [42, 'x', null, { id: 1, method: 'echo' }, { jsonrpc: '1.0', id: 1, method: 'echo' }, { jsonrpc: '2.0', id: 1 }, { jsonrpc: '2.0', id: 1, method: '' }]) {
      const response = (await rpc.handle(body, ctx)) as RpcResponse;
      expect(response.error?.code).toBe(RpcCode.INVALID_REQUEST);
    }
    const badId = (await rpc.handle({ jsonrpc: '2.0', id: { x: 1 }, method: 'echo' }, ctx)) as RpcResponse;
    expect(badId).toMatchObject({ id: null, error: { code: RpcCode.INVALID_REQUEST } });
  });

  it('reports unknown methods with -32601 naming the method', async () => {
    const { rpc } = handler();
    const response = (await rpc.handle({ jsonrpc: '2.0', id: 1, method: 'x-hub/nope' }, ctx)) as RpcResponse;
    expect(response.error).toEqual({ code: RpcCode.METHOD_NOT_FOUND, message: 'Method not found: x-hub/nope' });
  });

  it('requires params to be an object', async () => {
    const { rpc, calls } = handler();
    const response = (await rpc.handle({ jsonrpc: '2.0', id: 1, method: 'echo', params: [1, 2] }, ctx)) as RpcResponse;
    expect(response.error).toMatchObject({ code: RpcCode.INVALID_PARAMS, data: { field: 'params' } });
    expect(calls).toHaveLength(0);
  });

  it('runs notifications without answering them', async () => {
    const { rpc, calls } = handler();
    expect(await rpc.handle({ jsonrpc: '2.0', method: 'echo', params: { n: 1 } }, ctx)).toBeUndefined();
    expect(calls).toEqual([{ n: 1 }]);
  });

  it('answers batches in order, leaving out notifications', async () => {
    const { rpc } = handler();
    const responses = (await rpc.handle([
      { jsonrpc: '2.0', id: 1, method: 'echo', params: { i: 1 } },
      { jsonrpc: '2.0', method: 'echo', params: { i: 2 } },
      { jsonrpc: '2.0', id: 3, method: 'fails' },
    ], ctx)) as RpcResponse[];
    expect(responses.map((r) => r.id)).toEqual([1, 3]);
    expect(responses[1]!.error).toMatchObject({ code: RpcCode.ACCESS_DENIED, message: 'Access denied' });
  });

  it('refuses empty and oversized batches, and answers nothing for an all-notification batch', async () => {
    const { rpc } = handler();
    expect(await rpc.handle([], ctx)).toMatchObject({ error: { code: RpcCode.INVALID_REQUEST } });
    const big = Array.from({ length: 4 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'echo' }));
    expect(await rpc.handle(big, ctx)).toMatchObject({ error: { code: RpcCode.INVALID_REQUEST, message: expect.stringContaining('at most 3') } });
    expect(await rpc.handle([{ jsonrpc: '2.0', method: 'echo' }], ctx)).toBeUndefined();
  });

  it('maps service errors to their code and keeps the field at fault', async () => {
    const { rpc } = handler();
    const response = (await rpc.handle({ jsonrpc: '2.0', id: 1, method: 'bad-field' }, ctx)) as RpcResponse;
    expect(response.error).toEqual({
      code: RpcCode.INVALID_PARAMS,
      message: 'Invalid params: role must be one of read, write, admin',
      data: { reason: 'invalid_params', field: 'role' },
    });
  });

  it('hides internal failures behind -32603', async () => {
    const { rpc } = handler();
    const response = (await rpc.handle({ jsonrpc: '2.0', id: 1, method: 'crashes' }, ctx)) as RpcResponse;
    expect(response.error?.code).toBe(RpcCode.INTERNAL_ERROR);
    expect(JSON.stringify(response)).not.toContain('hunter2');
  });

  it.each([
    ['a throw of ours', new Error('cannot read properties of undefined')],
    ['an internal error the gRPC client raised', new HubError(Reason.INTERNAL, 'Internal error', { cause: new Error('Request message serialization failure: int32 overflow') })],
    ['an unavailable service', new HubError(Reason.UNAVAILABLE, 'A service the hub depends on is unavailable; retry later', { cause: new Error('connect ECONNREFUSED 127.0.0.1:1') })],
  ])('logs every -32603 with its cause: %s', async (_name, thrown) => {
    const lines: any[] = [];
    const log = createLogger({ level: 'info', destination: new Writable({ write(chunk, _e, done) { lines.push(JSON.parse(String(chunk))); done(); } }) });
    const methods = new Map([['fails', { invoke: async () => { throw thrown; } }]]);
    const rpc = new JsonRpcHandler({ methods, maxBatch: 3, log, metrics: new Metrics() });
    const response = (await rpc.handle({ jsonrpc: '2.0', id: 1, method: 'fails' }, ctx)) as RpcResponse;
    expect(response.error?.code).toBe(RpcCode.INTERNAL_ERROR);
    const cause = (thrown.cause as Error | undefined)?.message ?? thrown.message;
    expect(lines).toContainEqual(expect.objectContaining({ level: 50, method: 'fails', err: expect.objectContaining({ message: expect.stringContaining(cause) }) }));
  });

  it('logs a call cancelled because its caller went away at debug, not as a failure', async () => {
    const lines: Record<string, unknown>[] = [];
    const log = createLogger({ level: 'debug', destination: new Writable({ write(chunk, _e, done) { lines.push(JSON.parse(String(chunk))); done(); } }) });
    const gone = new AbortController();
    const cancelled = new HubError(Reason.UNAVAILABLE, 'The call was cancelled; retry later');
    const methods = new Map([['slow', { invoke: async () => { gone.abort(); throw cancelled; } }]]);
    const rpc = new JsonRpcHandler({ methods, maxBatch: 3, log, metrics: new Metrics() });
    const response = (await rpc.handle({ jsonrpc: '2.0', id: 1, method: 'slow' }, { ...ctx, signal: gone.signal })) as RpcResponse;
    expect(response.error?.code).toBe(RpcCode.INTERNAL_ERROR);
    expect(lines.filter((line) => (line.level as number) >= 40)).toEqual([]);
    expect(lines).toContainEqual(expect.objectContaining({ level: 20, method: 'slow', msg: 'the caller went away before the answer' }));
    // The same failure while the caller still waits is one.
    const waiting = new JsonRpcHandler({ methods: new Map([['slow', { invoke: async () => { throw cancelled; } }]]), maxBatch: 3, log, metrics: new Metrics() });
    await waiting.handle({ jsonrpc: '2.0', id: 2, method: 'slow' }, { ...ctx, signal: new AbortController().signal });
    expect(lines).toContainEqual(expect.objectContaining({ level: 50, method: 'slow', msg: 'method failed' }));
  });

  it('answers each call with the precheck error when it refuses', async () => {
    const { rpc, calls } = handler(() => ({ code: RpcCode.VERSION_NOT_SUPPORTED, message: 'A2A version 9 is not supported; use 1.0' }));
    const response = (await rpc.handle({ jsonrpc: '2.0', id: 1, method: 'echo' }, ctx)) as RpcResponse;
    expect(response.error?.code).toBe(RpcCode.VERSION_NOT_SUPPORTED);
    expect(calls).toHaveLength(0);
  });

  it('gives the standard parse error', () => {
    expect(handler().rpc.parseError()).toMatchObject({ id: null, error: { code: RpcCode.PARSE_ERROR, message: expect.stringMatching(/^Parse error: \S/) } });
  });

  // Issue 12 item 8: these reached PostgreSQL or a codec and came back as -32603.
  it('refuses NUL characters and params nested past the limit with -32602 naming the field, before the method runs', async () => {
    const { rpc, calls } = handler();
    const cases: [unknown, string][] = [
      [{ name: 'a\u0000b' }, 'name'],
      [{ message: { parts: [{ text: 'ok' }, { text: '\u0000' }] } }, 'message.parts[1].text'],
      [{ metadata: { 'k\u0000': 1 } }, 'metadata'],
      [{ data: { a: { b: { c: { d: { e: { f: { g: { h: { i: { j: {} } } } } } } } } } } }, 'data.a.b.c.d.e.f.g.h.i'],
    ];
    const strict = new JsonRpcHandler({ methods: new Map([['echo', { invoke: async (p: Record<string, unknown>) => (calls.push(p), p) }]]), maxBatch: 3, maxDepth: 10, log: testLogger(), metrics: new Metrics() });
    for (const [params, field] of cases) {
      const response = (await strict.handle({ jsonrpc: '2.0', id: 1, method: 'echo', params }, ctx)) as RpcResponse;
      expect(response.error).toMatchObject({ code: RpcCode.INVALID_PARAMS, data: { field } });
    }
    expect(calls).toHaveLength(0);
    const within = (await rpc.handle({ jsonrpc: '2.0', id: 1, method: 'echo', params: { data: { a: { b: { c: 'deep enough' } } } } }, ctx)) as RpcResponse;
    expect(within.result).toEqual({ echoed: { data: { a: { b: { c: 'deep enough' } } } } });
  });
});

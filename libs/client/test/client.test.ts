import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { HubClient, HubRpcError } from '@agenthub/client';

/**
 * HubClient against a scripted HTTP peer (a real server on port 0) standing in for a hub that
 * rate-limits, drops connections and closes streams, which a real hub does not do on demand.
 */

interface Seen {
  method: string;
  lastEventId: string | undefined;
  at: number;
  body: any;
}

async function peer(answer: (seen: Seen, n: number, res: ServerResponse, req: IncomingMessage) => void) {
  const seen: Seen[] = [];
  const server: Server = createServer(async (req, res) => {
    let text = '';
    for await (const chunk of req) text += chunk;
    const body = JSON.parse(text);
    const entry = { method: body.method, lastEventId: req.headers['last-event-id'] as string | undefined, at: Date.now(), body };
    seen.push(entry);
    answer(entry, seen.length, res, req);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, seen, close: () => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))) };
}

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};

describe('HubClient', () => {
  it('waits out Retry-After on a 429 and then succeeds', async () => {
    const hub = await peer((s, n, res) =>
      n === 1
        ? json(res, 429, { jsonrpc: '2.0', id: s.body.id, error: { code: -32029, message: 'Rate limit exceeded' } }, { 'Retry-After': '1' })
        : json(res, 200, { jsonrpc: '2.0', id: s.body.id, result: { workspaces: [], count: 0 } }),
    );
    try {
      const client = new HubClient({ url: hub.url, apiKey: 'ahk_test' });
      expect(await client.call('x-hub/workspace.list', {})).toEqual({ workspaces: [], count: 0 });
      expect(hub.seen).toHaveLength(2);
      expect(hub.seen[1]!.at - hub.seen[0]!.at).toBeGreaterThanOrEqual(950);
    } finally {
      await hub.close();
    }
  });

  it('gives up with the last HubRpcError after its tries, and never retries a refusal', async () => {
    const hub = await peer((s, _n, res) =>
      s.method === 'x-hub/workspace.get'
        ? json(res, 200, { jsonrpc: '2.0', id: s.body.id, error: { code: -32101, message: 'Workspace not found', data: { reason: 'not_found' } } })
        : json(res, 503, { jsonrpc: '2.0', id: s.body.id, error: { code: -32603, message: 'Internal error', data: { reason: 'unavailable' } } }),
    );
    try {
      const client = new HubClient({ url: hub.url, apiKey: 'ahk_test', retry: { attempts: 3, baseMs: 10 } });
      await expect(client.call('x-hub/workspace.list', {})).rejects.toMatchObject({ httpStatus: 503, reason: 'unavailable', retryable: true });
      expect(hub.seen).toHaveLength(3);
      await expect(client.call('x-hub/workspace.get', { workspace_id: 'ws_x' })).rejects.toBeInstanceOf(HubRpcError);
      expect(hub.seen).toHaveLength(4);
    } finally {
      await hub.close();
    }
  });

  it('after a dropped connection retries a send (same messageId) but not a workspace.create', async () => {
    const hub = await peer((s, n, res, req) => {
      if (n <= 2) return req.socket.destroy();
      json(res, 200, { jsonrpc: '2.0', id: s.body.id, result: { id: 'task_1', contextId: 'ctx_1', status: { state: 'submitted', timestamp: '' }, artifacts: [] } });
    });
    try {
      const client = new HubClient({ url: hub.url, apiKey: 'ahk_test', retry: { baseMs: 10 } });
      await expect(client.call('x-hub/workspace.create', { name: 'x' })).rejects.toThrow();
      expect(hub.seen.map((s) => s.method)).toEqual(['x-hub/workspace.create']);
      await client.sendText('agt_1', 'hi');
      const sends = hub.seen.filter((s) => s.method === 'SendMessage');
      expect(sends).toHaveLength(2);
      expect(sends[0]!.body.params.message.messageId).toBeTruthy();
      expect(sends[1]!.body.params.message.messageId).toBe(sends[0]!.body.params.message.messageId);
    } finally {
      await hub.close();
    }
  });

  it('a task stream the peer closes early resumes with Last-Event-ID and ends at the final event', async () => {
    const event = (id: string, result: unknown) => `id: ${id}\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: 1, result })}\n\n`;
    const hub = await peer((_s, n, res) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      if (n === 1) {
        res.end(event('1', { kind: 'task', id: 'task_1', contextId: 'ctx_1', status: { state: 'submitted' }, artifacts: [] }));
      } else {
        res.end(event('2', { kind: 'status-update', taskId: 'task_1', contextId: 'ctx_1', status: { state: 'completed' }, final: true }));
      }
    });
    try {
      const client = new HubClient({ url: hub.url, apiKey: 'ahk_test', retry: { baseMs: 10 } });
      const ids = [];
      for await (const item of client.stream('SendStreamingMessage', { message: { role: 'user', parts: [{ kind: 'text', text: 'hi' }] }, configuration: { agentId: 'agt_1' } })) {
        ids.push(item.id);
      }
      expect(ids).toEqual(['1', '2']);
      expect(hub.seen.map((s) => [s.method, s.lastEventId, s.body.params.id])).toEqual([
        ['SendStreamingMessage', undefined, undefined],
        ['SubscribeToTask', '1', 'task_1'],
      ]);
    } finally {
      await hub.close();
    }
  });
});

describe('serve()', () => {
  it('reconnects a dropped inbox stream, moves the task from the reply and acks only after', async () => {
    const delivery = { delivery_id: 'dlv_1', task_id: 'task_1', context_id: 'ctx_1', from_agent_id: 'agt_s', message: { role: 'user', parts: [{ kind: 'text', text: 'hi' }] }, created_at: 0, attempt: 1 };
    let streams = 0;
    const acked = new AbortController();
    const hub = await peer((s, _n, res, req) => {
      if (s.method === 'x-hub/inbox.stream') {
        streams += 1;
        if (streams === 1) return req.socket.destroy();
        res.writeHead(200, { 'Content-Type': 'text/event-stream' });
        // Held open, as the hub holds an inbox stream.
        return res.write(`id: dlv_1\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: s.body.id, result: { kind: 'delivery', ...delivery } })}\n\n`);
      }
      if (s.method === 'x-hub/inbox.ack') acked.abort();
      json(res, 200, { jsonrpc: '2.0', id: s.body.id, result: s.method === 'x-hub/inbox.ack' ? { acked: true } : {} });
    });
    try {
      const client = new HubClient({ url: hub.url, apiKey: 'ahk_test', retry: { baseMs: 10 } });
      const texts: string[] = [];
      const serving = client.serve(({ text }) => (texts.push(text), { text: text.toUpperCase() }), { signal: acked.signal, maxBackoffMs: 50 });
      await serving;
      expect(texts).toEqual(['hi']);
      expect(hub.seen.map((s) => [s.method, s.body.params.state ?? s.body.params.delivery_id ?? null])).toEqual([
        ['x-hub/inbox.stream', null],
        ['x-hub/inbox.stream', null],
        ['x-hub/tasks.update', 'working'],
        ['x-hub/tasks.update', 'completed'],
        ['x-hub/inbox.ack', 'dlv_1'],
      ]);
      expect(hub.seen[3]!.body.params.artifacts).toEqual([{ name: 'response', parts: [{ kind: 'text', text: 'HI' }] }]);
    } finally {
      await hub.close();
    }
  });
});

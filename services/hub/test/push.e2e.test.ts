import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startEchoAgent, type EchoAgent } from '../../messaging/test/echo-agent.js';
import { hubModes, startTestHub, type Agent, type TestHub } from './harness.js';

/**
 * Push agents end to end over real HTTP on both backends: the operator registers an agent with an
 * A2A endpoint (a real `@a2a-js/sdk` server on loopback), another agent sends it text, file and
 * data parts in the interface's dialect, and the agent's answer (status, messages, artifacts)
 * comes back through SendMessage (blocking) and GetTask (non-blocking).
 */

const A2A = { 'A2A-Version': '1.0' };
const PNG = Buffer.from('not really a png').toString('base64');
const MIXED = [
  { kind: 'text', text: 'Summarise these, please.' },
  { kind: 'file', name: 'chart.png', mimeType: 'image/png', data: PNG },
  { kind: 'file', name: 'report.pdf', mimeType: 'application/pdf', uri: 'https://example.com/report.pdf' },
  { kind: 'data', mimeType: 'application/json', data: '{"rows":3}' },
];

describe.each(hubModes().map((m) => [m.name, m] as const))('push agents over HTTP (%s)', (_name, backend) => {
  let hub: TestHub;
  let remote: EchoAgent;
  let sender: Agent;
  let pushAgentId: string;

  beforeAll(async () => {
    // A small backoff cap, so the worker's follow-ups of the agent's task come quickly.
    hub = await startTestHub(backend, { MESSAGING_PUSH_MAX_BACKOFF_MS: '200', MESSAGING_BLOCKING_MS: '10000', HUB_EGRESS_ALLOW_PRIVATE: 'true' });
    remote = await startEchoAgent('echo');
    const created = await hub.admin('agents.create', { tenant_id: 'acme', name: 'echo', create_tenant: true, endpoint_url: remote.url });
    expect(created.agent.endpoint_url).toBe(remote.url);
    pushAgentId = created.agent.id;
    sender = await hub.agent('acme', 'sender');
  });
  afterAll(async () => {
    await remote?.stop();
    await hub?.stop();
  });

  async function ok(method: string, params: unknown) {
    const reply = await hub.call(sender.api_key, method, params, { headers: A2A });
    if (reply.body.error) throw new Error(`${method} failed: ${JSON.stringify(reply.body.error)}`);
    return reply.body.result;
  }
  const send = (configuration: Record<string, unknown>) =>
    ok('SendMessage', { message: { role: 'user', parts: MIXED }, configuration: { agentId: pushAgentId, ...configuration } });

  function expectAnswered(task: any) {
    expect(task.status.state).toBe('completed');
    expect(task.artifacts).toEqual([{ id: expect.any(String), name: 'echo', parts: MIXED }]);
    expect(task.messages).toEqual([
      { role: 'user', parts: MIXED, messageId: expect.any(String) },
      { role: 'agent', parts: [{ kind: 'text', text: 'Working on it' }], messageId: expect.any(String) },
      { role: 'agent', parts: [{ kind: 'text', text: 'Done' }], messageId: expect.any(String) },
    ]);
  }

  it('blocking: SendMessage returns the task the agent completed, with its artifacts', async () => {
    const task = await send({ blocking: true });
    expectAnswered(task);
    expectAnswered(await ok('GetTask', { id: task.id }));
    const received = remote.received.at(-1)!;
    expect(received.contextId).toBe(task.contextId);
    expect(received.messageId).toBe(task.messages[0].messageId);
  });

  it('non-blocking: the task is submitted, and GetTask shows the agent\'s answer once it is in', async () => {
    const sent = await send({});
    expect(sent.status.state).toBe('submitted');
    let task = sent;
    for (let i = 0; i < 200 && task.status.state !== 'completed'; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      task = await ok('GetTask', { id: sent.id });
    }
    expectAnswered(task);
  });

  // Issue 12: the push worker calls out through the egress guard.
  it('an agent that redirects to a loopback URL: nothing reaches that URL, and the task holds none of the redirect', async () => {
    const internal = await listen((_req, res) => res.end('INTERNAL-SECRET'));
    const redirecting = await listen((_req, res) => {
      res.writeHead(307, { location: `${internal.url}/admin` }).end('REDIRECT-BODY');
    });
    try {
      const created = await hub.admin('agents.create', { tenant_id: 'acme', name: 'redirector', endpoint_url: `${redirecting.url}/a2a` });
      const task = await ok('SendMessage', { message: { role: 'user', parts: [{ kind: 'text', text: 'for the agent only' }] }, configuration: { agentId: created.agent.id, blocking: true } });
      expect(task.status.state).toBe('failed');
      expect(redirecting.hits).toBe(1);
      expect(internal.hits).toBe(0);
      const seen = JSON.stringify(await ok('GetTask', { id: task.id }));
      expect(seen).toContain("The agent's endpoint answered HTTP 307");
      expect(seen).not.toContain('REDIRECT-BODY');
      expect(seen).not.toContain('INTERNAL-SECRET');
    } finally {
      await internal.close();
      await redirecting.close();
    }
  });
});

/** A bare HTTP server on loopback counting its requests. */
async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void) {
  let hits = 0;
  const server = createServer((req, res) => {
    hits += 1;
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get hits() {
      return hits;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

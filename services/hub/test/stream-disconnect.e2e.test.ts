import { backends } from '@agenthub/testing';
import { startTestHub, type Agent, type TestHub } from './harness.js';

/**
 * Regression (found with @agenthub/client's serve(), whose reconnects left streams behind): a
 * client that hangs up on `x-hub/inbox.stream` must end the stream on the hub too. Before, the
 * gateway waited for the request's 'close', which Node emits once the body is read, not when the
 * client leaves; the orphaned stream went on long-polling and claimed the agent's next delivery,
 * so the agent's new connection did not see it until the claim expired.
 */
describe.each(backends().map((b) => [b.name, b] as const))('a stream the client left (%s)', (_name, backend) => {
  let hub: TestHub;
  let sender: Agent;
  let recipient: Agent;

  beforeAll(async () => {
    hub = await startTestHub(backend);
    sender = await hub.agent('disconnect-acme', 'sender');
    recipient = await hub.agent('disconnect-acme', 'recipient');
  });
  afterAll(() => hub?.stop());

  it('ends on the hub: the next delivery goes to the agent\'s new poll, not to the closed stream', async () => {
    const left = new AbortController();
    const response = await fetch(`${hub.url}/a2a`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${recipient.api_key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'x-hub/inbox.stream', params: {} }),
      signal: left.signal,
    });
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    left.abort();

    const task = await hub.ok(sender.api_key, 'SendMessage', {
      message: { role: 'user', parts: [{ kind: 'text', text: 'are you there?' }] },
      configuration: { agentId: recipient.agent_id },
    });
    const { deliveries } = await hub.ok(recipient.api_key, 'x-hub/inbox.poll', { wait_ms: 10_000 });
    expect(deliveries.map((d: { task_id: string }) => d.task_id)).toEqual([task.id]);
  });
});

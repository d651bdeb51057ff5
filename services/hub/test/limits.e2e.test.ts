import { backends } from '@agenthub/testing';
import { startTestHub, type Agent, type TestHub } from './harness.js';

/**
 * The 100-parts limit of a message, as an agent meets it over HTTP in both dialects (the
 * interface's `/a2a` and the strict A2A binding at `/agents/{id}/a2a/v1`): 100 parts are taken
 * and delivered whole, 101 are refused with -32602 naming the field, and nothing is queued.
 */

const MAX_PARTS = 100;

describe.each(backends().map((b) => [b.name, b] as const))('message size limits (%s)', (_name, backend) => {
  let hub: TestHub;
  let sender: Agent;
  let recipient: Agent;

  beforeAll(async () => {
    hub = await startTestHub(backend);
    sender = await hub.agent('acme', 'sender');
    recipient = await hub.agent('acme', 'recipient');
  });
  afterAll(() => hub?.stop());

  const parts = (n: number, kind: boolean) => Array.from({ length: n }, (_, i) => (kind ? { kind: 'text', text: `part ${i}` } : { text: `part ${i}` }));

  async function strict(params: unknown) {
    const response = await fetch(`${hub.url}/agents/${recipient.agent_id}/a2a/v1`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${sender.api_key}`, 'A2A-Version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params }),
    });
    return (await response.json()) as { result?: any; error?: { code: number; data?: unknown } };
  }

  async function drained() {
    const { deliveries } = await hub.ok(recipient.api_key, 'x-hub/inbox.poll', { max: 100 });
    for (const d of deliveries) await hub.ok(recipient.api_key, 'x-hub/inbox.ack', { delivery_id: d.delivery_id });
    return deliveries as any[];
  }

  it('/a2a: 100 parts are delivered whole; 101 are refused naming message.parts', async () => {
    const task = await hub.ok(sender.api_key, 'SendMessage', { message: { role: 'user', parts: parts(MAX_PARTS, true) }, configuration: { agentId: recipient.agent_id } });
    const refused = await hub.call(sender.api_key, 'SendMessage', { message: { role: 'user', parts: parts(MAX_PARTS + 1, true) }, configuration: { agentId: recipient.agent_id } });
    expect(refused.body.error).toMatchObject({ code: -32602, data: { field: 'message.parts' } });
    const deliveries = await drained();
    expect(deliveries.map((d) => [d.task_id, d.message.parts.length])).toEqual([[task.id, MAX_PARTS]]);
  });

  it('strict A2A binding: 100 parts are taken; 101 are refused naming message.parts', async () => {
    const message = (n: number) => ({ role: 'ROLE_USER', parts: parts(n, false), messageId: `limits-${n}` });
    const taken = await strict({ message: message(MAX_PARTS), configuration: { returnImmediately: true } });
    expect(taken.result?.task?.id).toEqual(expect.any(String));
    const refused = await strict({ message: message(MAX_PARTS + 1), configuration: { returnImmediately: true } });
    expect(refused.error).toMatchObject({ code: -32602, data: [{ reason: 'INVALID_PARAMS', metadata: { field: 'message.parts' } }] });
    const deliveries = await drained();
    expect(deliveries.map((d) => [d.task_id, d.message.parts.length])).toEqual([[taken.result.task.id, MAX_PARTS]]);
  });
});

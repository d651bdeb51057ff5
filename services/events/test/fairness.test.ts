import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { backends, type Backend } from '@agenthub/testing';
import { startReceiver, startStack, type Receiver, type Stack } from './harness.js';

/**
 * Delivery slots are shared between workspaces: the tarpit endpoints of one workspace hold at
 * most its share, and another workspace's deliveries go out meanwhile.
 */
describe.each(backends().map((b) => [b.name, b] as const))('fair delivery slots (%s)', (_name, backend: Backend) => {
  let stack: Stack;
  let quiet: Receiver;
  const held: ServerResponse[] = [];
  let peak = 0;
  const tarpit = createServer((req, res) => {
    req.resume();
    held.push(res);
    peak = Math.max(peak, held.filter((r) => !r.writableEnded).length);
  });
  let tarpitUrl = '';

  beforeAll(async () => {
    // Three slots in all, one per workspace; an attempt may hang for 20 s.
    stack = await startStack(backend, { timeoutMs: 20_000, worker: { concurrency: 3, maxSlotsPerWorkspace: 1, pollMs: 50 } });
    quiet = await startReceiver();
    await new Promise<void>((resolve) => tarpit.listen(0, '127.0.0.1', resolve));
    tarpitUrl = `http://127.0.0.1:${(tarpit.address() as AddressInfo).port}/hook`;
  });
  afterAll(async () => {
    for (const res of held) res.writeHead(204).end();
    tarpit.closeAllConnections();
    tarpit.close();
    await quiet?.close();
    await stack?.stop();
  });

  test('a workspace whose endpoints never answer holds one slot; another workspace is delivered at once', async () => {
    const noisyOwner = await stack.agent('noisy', 'Owner');
    const quietOwner = await stack.agent('quiet', 'Owner');
    const noisy = await stack.workspaceWith(noisyOwner);
    const calm = await stack.workspaceWith(quietOwner);
    for (let i = 0; i < 3; i++) await stack.events.createWebhook({ workspaceId: noisy, url: tarpitUrl, events: [], description: '' }, noisyOwner.as);
    await stack.events.createWebhook({ workspaceId: calm, url: quiet.url, events: [], description: '' }, quietOwner.as);

    await stack.publish(stack.event(noisy, 'workspace.memory.stored'));
    // The tarpit holds its first request before the quiet workspace's event arrives.
    for (let i = 0; i < 200 && held.length === 0; i++) await new Promise((r) => setTimeout(r, 25));
    expect(held.length).toBe(1);
    const event = stack.event(calm, 'workspace.memory.stored');
    await stack.publish(event);
    for (let i = 0; i < 400 && quiet.received.length === 0; i++) await new Promise((r) => setTimeout(r, 25));
    expect(quiet.received.map((r) => r.eventId)).toEqual([event.eventId]);
    // Its three webhooks had deliveries due, but the noisy workspace held one slot only.
    expect(peak).toBe(1);
  });
});

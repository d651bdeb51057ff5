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

/**
 * A workspace holding its share of the slots costs the delivery loop nothing while it waits: its
 * due deliveries are not claimed over and over (the loop sleeps instead of polling them every
 * 10 ms), and its new events make no claim. Another workspace's new delivery is claimed by its
 * webhook alone, not by a look at every webhook's head. When a slot of its own frees, what it
 * left waiting goes out at once, long before the loop's poll.
 */
describe.each(backends().map((b) => [b.name, b] as const))('a workspace at its share of the slots (%s)', (_name, backend: Backend) => {
  let stack: Stack;
  let quiet: Receiver;
  let answering = false;
  const held: ServerResponse[] = [];
  let requests = 0;
  const tarpit = createServer((req, res) => {
    req.resume();
    requests += 1;
    if (answering) res.writeHead(204).end();
    else held.push(res);
  });
  let tarpitUrl = '';
  /** Claims over every webhook's head the delivery loop made, counted on the events service's database handle. */
  let claims = 0;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  beforeAll(async () => {
    // One slot per workspace (and one left free, so that a slot freeing never finds the loop
    // full), and a poll too slow to matter: only wake-ups move the loop.
    stack = await startStack(backend, { timeoutMs: 20_000, worker: { concurrency: 3, maxSlotsPerWorkspace: 1, pollMs: 60_000 } });
    const query = stack.db.query.bind(stack.db);
    stack.db.query = ((sql: string, ...rest: unknown[]) => {
      if (sql.includes('WITH RECURSIVE heads')) claims += 1;
      return (query as (sql: string, ...rest: unknown[]) => unknown)(sql, ...rest);
    }) as typeof stack.db.query;
    quiet = await startReceiver();
    await new Promise<void>((resolve) => tarpit.listen(0, '127.0.0.1', resolve));
    tarpitUrl = `http://127.0.0.1:${(tarpit.address() as AddressInfo).port}/hook`;
  });
  afterAll(async () => {
    for (const res of held) if (!res.writableEnded) res.writeHead(204).end();
    tarpit.closeAllConnections();
    tarpit.close();
    await quiet?.close();
    await stack?.stop();
  });

  test('makes no claims while it waits, and its waiting deliveries go out when its slot frees', async () => {
    const noisyOwner = await stack.agent('noisy', 'Owner');
    const quietOwner = await stack.agent('quiet', 'Owner');
    const noisy = await stack.workspaceWith(noisyOwner);
    const calm = await stack.workspaceWith(quietOwner);
    for (let i = 0; i < 2; i++) await stack.events.createWebhook({ workspaceId: noisy, url: tarpitUrl, events: [], description: '' }, noisyOwner.as);
    await stack.events.createWebhook({ workspaceId: calm, url: quiet.url, events: [], description: '' }, quietOwner.as);

    await stack.publish(stack.event(noisy, 'workspace.memory.stored'));
    for (let i = 0; i < 200 && held.length === 0; i++) await sleep(25);
    expect(held.length).toBe(1);
    // The second webhook's delivery is due, but its workspace holds its one slot.
    await sleep(100);
    const settled = claims;
    await sleep(500);
    expect(claims - settled).toBe(0);
    for (let i = 0; i < 5; i++) await stack.publish(stack.event(noisy, 'workspace.memory.stored'));
    await sleep(200);
    expect(claims - settled).toBe(0);
    expect(requests).toBe(1);

    // Another workspace's event is delivered at once, its webhook's head claimed alone: still no
    // claim over every webhook's head.
    const event = stack.event(calm, 'workspace.memory.stored');
    await stack.publish(event);
    for (let i = 0; i < 400 && quiet.received.length === 0; i++) await sleep(25);
    expect(quiet.received.map((r) => r.eventId)).toEqual([event.eventId]);
    expect(claims - settled).toBe(0);

    // The tarpit answers: both webhooks' six deliveries each go out, without waiting for the poll.
    answering = true;
    held[0]!.writeHead(204).end();
    for (let i = 0; i < 400 && requests < 12; i++) await sleep(25);
    expect(requests).toBe(12);
  });
});

/**
 * Wake-ups claim only the webhooks they name, so a delivery nobody woke this worker for (queued
 * by another replica) still goes out within a poll, however often wake-ups come.
 */
describe.each(backends().map((b) => [b.name, b] as const))('a delivery queued elsewhere (%s)', (_name, backend: Backend) => {
  let stack: Stack;
  let busy: Receiver;
  let other: Receiver;

  beforeAll(async () => {
    stack = await startStack(backend, { worker: { concurrency: 8, maxSlotsPerWorkspace: 2, pollMs: 300 } });
    busy = await startReceiver();
    other = await startReceiver();
  });
  afterAll(async () => {
    await busy?.close();
    await other?.close();
    await stack?.stop();
  });

  test('goes out within a poll while another webhook is woken every 50 ms', async () => {
    const owner = await stack.agent('elsewhere', 'Owner');
    const workspace = await stack.workspaceWith(owner);
    const otherWorkspace = await stack.workspaceWith(owner);
    await stack.events.createWebhook({ workspaceId: workspace, url: busy.url, events: [], description: '' }, owner.as);
    const { webhook } = await stack.events.createWebhook({ workspaceId: otherWorkspace, url: other.url, events: [], description: '' }, owner.as);
    // As another replica's intake would queue it: a row, and no wake-up of this worker.
    await stack.db.query(
      `INSERT INTO deliveries (webhook_id, event_id, event_type, payload, status, next_attempt_at, created_at)
       VALUES ($1, 'evt_elsewhere', 'workspace.memory.stored', '{}', 'pending', $2, $2)`,
      [webhook!.id, stack.clock.now],
    );
    const started = performance.now();
    while (other.received.length === 0 && performance.now() - started < 5_000) {
      await stack.publish(stack.event(workspace, 'workspace.memory.stored'));
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(other.received.map((r) => r.eventId)).toEqual(['evt_elsewhere']);
    expect(busy.received.length).toBeGreaterThan(0);
  });
});

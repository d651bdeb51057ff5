import { createHmac } from 'node:crypto';
import { eventsv1, workspacev1 } from '@agenthub/proto';
import { Reason } from '@agenthub/runtime';
import { backends, type Backend } from '@agenthub/testing';
import { DEFAULT_LIMITS } from '../src/index.js';
import { CREATOR_ACCESS_ERROR } from '../src/deliveries.js';
import { capturedLog, failure, startReceiver, startStack, type Receiver, type Stack, type TestAgent } from './harness.js';

const { DeliveryStatus } = eventsv1;
const HOUR = 3_600_000;
const SCHEDULE = DEFAULT_LIMITS.retryScheduleMs;

/** Standard Webhooks signature, computed here independently of the service's code. */
function expectedSignature(secret: string, id: string, timestamp: string, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** Every signing secret the suite was given, for the leak check at the end. */
const secrets: string[] = [];

describe.each(backends().map((b) => [b.name, b] as const))('webhook deliveries (%s)', (_name, backend: Backend) => {
  let stack: Stack;
  let owner: TestAgent;
  let receiver: Receiver;
  let other: Receiver;

  beforeAll(async () => {
    stack = await startStack(backend);
    owner = await stack.agent('acme', 'Owner');
    receiver = await startReceiver();
    other = await startReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
    await other?.close();
    await stack?.stop();
  });
  beforeEach(() => {
    for (const r of [receiver, other]) {
      r.received.length = 0;
      r.respond = () => ({ status: 204 });
    }
  });
  // Each test starts with no webhook (and so no delivery) left by another.
  afterEach(async () => {
    await stack.db.query('DELETE FROM webhooks');
  });

  const hook = async (workspaceId: string, target: Receiver, events: string[] = []) => {
    const created = await stack.events.createWebhook({ workspaceId, url: target.url, events, description: '' }, owner.as);
    secrets.push(created.secret);
    return { id: created.webhook!.id, secret: created.secret, ref: { workspaceId, webhookId: created.webhook!.id } };
  };
  const deliveries = async (ref: { workspaceId: string; webhookId: string }, status = DeliveryStatus.UNSPECIFIED, limit = 0) =>
    (await stack.events.listDeliveries({ ...ref, limit, status }, owner.as)).deliveries;
  const webhook = async (ref: { workspaceId: string; webhookId: string }) => (await stack.events.getWebhook(ref, owner.as)).webhook!;

  test('the body is the outbox payload byte for byte, signed per Standard Webhooks', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    const { secret, ref } = await hook(workspaceId, receiver);
    const event = stack.event(workspaceId, 'workspace.memory.stored', { memory_id: 'wmem_1', type: 'fact', stored_by: owner.id, note: 'ünïcödé ✓' });
    await stack.publish(event);
    expect(await stack.service.deliverDue()).toBe(1);

    expect(receiver.received).toHaveLength(1);
    const [got] = receiver.received;
    expect(got!.body).toBe(event.message.value);
    expect(got!.headers['content-type']).toBe('application/json');
    expect(got!.headers['webhook-id']).toBe(event.eventId);
    expect(got!.headers['webhook-timestamp']).toBe(String(Math.floor(stack.clock.now / 1000)));
    expect(got!.headers['webhook-signature']).toBe(expectedSignature(secret, event.eventId, got!.headers['webhook-timestamp'] as string, got!.body));

    const [delivery] = await deliveries(ref);
    expect(delivery).toMatchObject({ eventId: event.eventId, event: 'workspace.memory.stored', status: DeliveryStatus.DELIVERED, nextAttemptAt: 0n });
    expect(delivery!.attempts).toEqual([expect.objectContaining({ at: BigInt(stack.clock.now), statusCode: 204, error: '' })]);
  });

  test('finished deliveries are kept for the history window (30 days), then pruned', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    const { ref } = await hook(workspaceId, receiver);
    const first = stack.event(workspaceId, 'workspace.created');
    await stack.publish(first);
    await stack.service.deliverDue();
    stack.clock.now += 29 * 24 * HOUR;
    const second = stack.event(workspaceId, 'workspace.created');
    await stack.publish(second);
    await stack.service.deliverDue();
    expect((await deliveries(ref)).map((d) => d.eventId)).toEqual([second.eventId, first.eventId]);

    stack.clock.now += 2 * 24 * HOUR;
    await stack.service.deliverDue();
    expect((await deliveries(ref)).map((d) => d.eventId)).toEqual([second.eventId]);
  });

  test('after rotate_secret both secrets sign for the window, then only the new one', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    const { secret: first, ref } = await hook(workspaceId, receiver);
    const { secret: second } = await stack.events.rotateWebhookSecret(ref, owner.as);
    secrets.push(second);
    await stack.publish(stack.event(workspaceId, 'workspace.created'));
    await stack.service.deliverDue();
    const during = receiver.received[0]!;
    const stamp = during.headers['webhook-timestamp'] as string;
    expect(during.headers['webhook-signature']).toBe(
      `${expectedSignature(second, during.eventId, stamp, during.body)} ${expectedSignature(first, during.eventId, stamp, during.body)}`,
    );

    stack.clock.now += 24 * HOUR;
    await stack.publish(stack.event(workspaceId, 'workspace.created'));
    await stack.service.deliverDue();
    const after = receiver.received[1]!;
    expect(after.headers['webhook-signature']).toBe(expectedSignature(second, after.eventId, after.headers['webhook-timestamp'] as string, after.body));
  });

  test('a second rotate_secret within the window drops the oldest secret: the two newest sign', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    const { secret: first, ref } = await hook(workspaceId, receiver);
    const { secret: second } = await stack.events.rotateWebhookSecret(ref, owner.as);
    const { secret: third } = await stack.events.rotateWebhookSecret(ref, owner.as);
    secrets.push(second, third);
    await stack.publish(stack.event(workspaceId, 'workspace.created'));
    await stack.service.deliverDue();
    const got = receiver.received[0]!;
    const stamp = got.headers['webhook-timestamp'] as string;
    expect(got.headers['webhook-signature']).toBe(
      `${expectedSignature(third, got.eventId, stamp, got.body)} ${expectedSignature(second, got.eventId, stamp, got.body)}`,
    );
    expect(got.headers['webhook-signature']).not.toContain(expectedSignature(first, got.eventId, stamp, got.body));
  });

  test('only matching webhooks of the event\'s workspace get it; an empty filter gets everything', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    const elsewhere = await stack.workspaceWith(owner);
    await hook(workspaceId, receiver, ['workspace.memory.stored', 'workspace.secret.set']);
    await hook(workspaceId, other);
    await hook(elsewhere, other, ['workspace.created']);
    const types = ['workspace.created', 'workspace.memory.stored', 'workspace.member.added', 'workspace.secret.set'];
    await stack.publish(...types.map((type) => stack.event(workspaceId, type)));
    await stack.service.deliverDue();
    const eventsOf = (r: Receiver) => r.received.map((got) => (JSON.parse(got.body) as { event: string }).event);
    expect(eventsOf(receiver)).toEqual(['workspace.memory.stored', 'workspace.secret.set']);
    expect(eventsOf(other)).toEqual(types);
  });

  test('intake is idempotent: an event consumed twice is delivered once', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    const { ref } = await hook(workspaceId, receiver);
    const event = stack.event(workspaceId, 'workspace.member.added');
    await stack.publish(event);
    await stack.publish(event);
    await stack.service.deliverDue();
    await stack.publish(event);
    await stack.service.deliverDue();
    expect(receiver.received.map((r) => r.eventId)).toEqual([event.eventId]);
    expect(await deliveries(ref)).toHaveLength(1);
  });

  test('a webhook gets only events that happened after it was created, however late they are consumed', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    const early = stack.event(workspaceId, 'workspace.member.added');
    stack.clock.now += 1;
    await hook(workspaceId, receiver);
    const late = stack.event(workspaceId, 'workspace.member.added');
    await stack.publish(early, late);
    await stack.service.deliverDue();
    expect(receiver.received.map((r) => r.eventId)).toEqual([late.eventId]);
  });

  test('a webhook\'s deliveries go out one at a time in event order; a retry holds back the ones behind it', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    await hook(workspaceId, receiver);
    await hook(workspaceId, other);
    // The first two requests (e1 and its immediate retry) fail.
    receiver.respond = (_request, index) => ({ status: index < 2 ? 500 : 204 });
    const events = [1, 2, 3].map(() => stack.event(workspaceId, 'workspace.memory.stored'));
    await stack.publish(...events);
    await stack.service.deliverDue();
    const ids = events.map((e) => e.eventId);
    expect(receiver.received.map((r) => r.eventId)).toEqual([ids[0], ids[0]]);
    // The healthy endpoint is not held up by the failing one.
    expect(other.received.map((r) => r.eventId)).toEqual(ids);

    stack.clock.now += SCHEDULE[1]! - 1;
    expect(await stack.service.deliverDue()).toBe(0);
    stack.clock.now += 1;
    await stack.service.deliverDue();
    expect(receiver.received.map((r) => r.eventId)).toEqual([ids[0], ids[0], ...ids]);
  });

  test('a long queue goes out in order, each success claiming the next delivery, across runs', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    const { ref } = await hook(workspaceId, receiver);
    await hook(workspaceId, other);
    // More than one run of the worker (20 deliveries of a webhook in a row by default).
    const events = Array.from({ length: 45 }, () => stack.event(workspaceId, 'workspace.memory.stored'));
    await stack.publish(...events);
    expect(await stack.service.deliverDue()).toBe(90);
    const ids = events.map((e) => e.eventId);
    expect(receiver.received.map((r) => r.eventId)).toEqual(ids);
    expect(other.received.map((r) => r.eventId)).toEqual(ids);
    const listed = await deliveries(ref, DeliveryStatus.UNSPECIFIED, 100);
    expect(listed.map((d) => [d.eventId, d.status, d.attempts.length])).toEqual(ids.map((id) => [id, DeliveryStatus.DELIVERED, 1]).reverse());
    expect(await stack.service.deliverDue()).toBe(0);
  });

  test('a replayed delivery goes before the pending ones behind it, even while they wait for a retry', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    const { ref } = await hook(workspaceId, receiver);
    const [e1, e2, e3] = [1, 2, 3].map(() => stack.event(workspaceId, 'workspace.memory.stored'));
    await stack.publish(e1!);
    await stack.service.deliverDue();
    // e2 fails twice (the attempt and the immediate retry) and waits for the next step; e3 waits behind it.
    receiver.respond = (_request, index) => ({ status: index === 1 || index === 2 ? 500 : 204 });
    await stack.publish(e2!, e3!);
    await stack.service.deliverDue();
    const replayed = await stack.events.replayDeliveries({ ...ref, target: { case: 'eventId', value: e1!.eventId } }, owner.as);
    expect(replayed.replayed).toBe(1);
    // e1 is the head again and due now; after it, e2 is the head and not due yet.
    expect(await stack.service.deliverDue()).toBe(1);
    stack.clock.now += SCHEDULE[1]!;
    expect(await stack.service.deliverDue()).toBe(2);
    const order = [e1, e2, e2, e1, e2, e3].map((e) => e!.eventId);
    expect(receiver.received.map((r) => r.eventId)).toEqual(order);
  });

  test('workers running at once share the work: every event once, each webhook in order', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    await hook(workspaceId, receiver);
    await hook(workspaceId, other);
    const events = Array.from({ length: 8 }, () => stack.event(workspaceId, 'workspace.memory.stored'));
    await stack.publish(...events);
    const attempts = await Promise.all([stack.service.deliverDue(), stack.service.deliverDue(), stack.service.deliverDue()]);
    expect(attempts.reduce((a, b) => a + b, 0)).toBe(16);
    const ids = events.map((e) => e.eventId);
    expect(receiver.received.map((r) => r.eventId)).toEqual(ids);
    expect(other.received.map((r) => r.eventId)).toEqual(ids);
  });

  const onPostgres = backend.name === 'embedded' ? test.skip : test;
  onPostgres('a head another worker has locked is skipped, never the delivery behind it', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    await hook(workspaceId, receiver);
    const [e1, e2] = [stack.event(workspaceId, 'workspace.created'), stack.event(workspaceId, 'workspace.member.added')];
    await stack.publish(e1, e2);
    // Another worker's claim in progress: it holds the row lock on the head.
    await stack.db.transaction(async (tx) => {
      await tx.query('SELECT seq FROM deliveries WHERE event_id = $1 FOR UPDATE', [e1.eventId]);
      expect(await stack.service.deliverDue()).toBe(0);
    });
    expect(receiver.received).toEqual([]);
    expect(await stack.service.deliverDue()).toBe(2);
    expect(receiver.received.map((r) => r.eventId)).toEqual([e1.eventId, e2.eventId]);
  });

  test('a claim held by a worker that died lapses, and the delivery goes out then', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    const { ref } = await hook(workspaceId, receiver);
    const event = stack.event(workspaceId, 'workspace.created');
    await stack.publish(event);
    const leaseUntil = stack.clock.now + 60_000;
    await stack.db.query('UPDATE deliveries SET lease_until = $1 WHERE event_id = $2', [leaseUntil, event.eventId]);
    expect(await stack.service.deliverDue()).toBe(0);
    stack.clock.now = leaseUntil;
    expect(await stack.service.deliverDue()).toBe(1);
    expect((await deliveries(ref))[0]!.status).toBe(DeliveryStatus.DELIVERED);
  });

  test(`retries follow the schedule (${SCHEDULE.join(', ')} ms), each attempt recorded, then the delivery fails`, async () => {
    const workspaceId = await stack.workspaceWith(owner);
    const { ref } = await hook(workspaceId, receiver);
    receiver.respond = () => ({ status: 500 });
    const event = stack.event(workspaceId, 'workspace.created');
    const start = stack.clock.now;
    await stack.publish(event);
    // The first attempt and the immediate retry.
    expect(await stack.service.deliverDue()).toBe(2);
    for (const delay of SCHEDULE.slice(1)) {
      const [pending] = await deliveries(ref);
      expect(pending).toMatchObject({ status: DeliveryStatus.PENDING, nextAttemptAt: BigInt(stack.clock.now + delay) });
      stack.clock.now += delay - 1;
      expect(await stack.service.deliverDue()).toBe(0);
      stack.clock.now += 1;
      expect(await stack.service.deliverDue()).toBe(1);
    }
    const [failed] = await deliveries(ref);
    expect(failed).toMatchObject({ status: DeliveryStatus.FAILED, nextAttemptAt: 0n });
    expect(failed!.attempts).toHaveLength(SCHEDULE.length + 1);
    let at = start;
    expect(failed!.attempts.map((a) => Number(a.at))).toEqual([start, ...SCHEDULE.map((d) => (at += d))]);
    for (const attempt of failed!.attempts) expect(attempt).toMatchObject({ statusCode: 500, error: 'HTTP 500' });
    expect(receiver.received.every((r) => r.eventId === event.eventId)).toBe(true);
    expect((await webhook(ref)).enabled).toBe(true);
    stack.clock.now += 100 * HOUR;
    expect(await stack.service.deliverDue()).toBe(0);
  });

  test('Retry-After (seconds or HTTP date) delays the next attempt beyond the schedule, never before it, at most 10 h', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    const { ref } = await hook(workspaceId, receiver);
    // HTTP dates have whole seconds.
    stack.clock.now = Math.ceil(stack.clock.now / 1000) * 1000;
    const answers = [
      { status: 503, headers: { 'retry-after': '120' } },
      { status: 429, headers: { 'retry-after': new Date(stack.clock.now + 120_000 + HOUR).toUTCString() } },
      { status: 503, headers: { 'retry-after': '1' } },
      { status: 503, headers: { 'retry-after': String(30 * 24 * 3600) } },
      { status: 200 },
    ];
    receiver.respond = (_request, index) => answers[index]!;
    await stack.publish(stack.event(workspaceId, 'workspace.created'));
    const expectNext = async (delay: number) => {
      const [pending] = await deliveries(ref);
      expect(pending!.nextAttemptAt).toBe(BigInt(stack.clock.now + delay));
      stack.clock.now += delay;
      expect(await stack.service.deliverDue()).toBe(1);
    };
    expect(await stack.service.deliverDue()).toBe(1);
    await expectNext(120_000); // schedule says at once; the endpoint asked for 120 s
    await expectNext(HOUR); // the HTTP date, an hour on (schedule: 5 s)
    await expectNext(SCHEDULE[2]!); // asked for 1 s, the schedule's 5 min wins
    await expectNext(10 * HOUR); // asked for 30 days: capped
    const [delivered] = await deliveries(ref);
    expect(delivered!.status).toBe(DeliveryStatus.DELIVERED);
    expect(delivered!.attempts.map((a) => a.statusCode)).toEqual([503, 429, 503, 503, 200]);
  });

  test('410 Gone disables the endpoint at once and fails what was queued; replay re-enables it', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    const { ref } = await hook(workspaceId, receiver);
    receiver.respond = () => ({ status: 410 });
    const [e1, e2] = [stack.event(workspaceId, 'workspace.created'), stack.event(workspaceId, 'workspace.member.added')];
    await stack.publish(e1, e2);
    expect(await stack.service.deliverDue()).toBe(1);
    const disabled = await webhook(ref);
    expect(disabled).toMatchObject({ enabled: false, disabledReason: 'gone', disabledAt: BigInt(stack.clock.now) });
    expect((await stack.events.listWebhooks({ workspaceId }, owner.as)).webhooks[0]).toEqual(disabled);
    const listed = await deliveries(ref);
    expect(listed.map((d) => [d.eventId, d.status, d.attempts.length])).toEqual([
      [e2.eventId, DeliveryStatus.FAILED, 0],
      [e1.eventId, DeliveryStatus.FAILED, 1],
    ]);
    // Nothing new is queued for a disabled endpoint.
    await stack.publish(stack.event(workspaceId, 'workspace.created'));
    expect(await deliveries(ref)).toHaveLength(2);

    receiver.respond = () => ({ status: 204 });
    stack.clock.now += 1000;
    expect(await stack.events.replayDeliveries({ ...ref, target: { case: 'since', value: 0n } }, owner.as)).toEqual(
      expect.objectContaining({ replayed: 2 }),
    );
    expect(await webhook(ref)).toMatchObject({ enabled: true, disabledReason: '', disabledAt: 0n });
    await stack.service.deliverDue();
    expect(receiver.received.map((r) => r.eventId)).toEqual([e1.eventId, e1.eventId, e2.eventId]);
  });

  describe('a webhook stops once its creator loses admin access (issue 12)', () => {
    const { Role } = workspacev1;
    /** Delivers one fresh event after the access cache's window; what the receiver got of it. */
    const deliverOne = async (workspaceId: string) => {
      stack.clock.now += DEFAULT_LIMITS.creatorAccessCacheMs + 1;
      const event = stack.event(workspaceId, 'workspace.memory.stored', { memory_id: 'wmem_1' });
      await stack.publish(event);
      await stack.service.deliverDue();
      return { event, got: receiver.received.filter((r) => r.eventId === event.eventId).length };
    };
    const expectStopped = async (ref: { workspaceId: string; webhookId: string }, eventId: string) => {
      expect(await webhook(ref)).toMatchObject({ enabled: false, disabledReason: 'creator_access' });
      const [last] = await deliveries(ref);
      expect(last).toMatchObject({ eventId, status: DeliveryStatus.FAILED });
      expect(last!.attempts).toEqual([expect.objectContaining({ statusCode: 0, error: CREATOR_ACCESS_ERROR })]);
    };

    test('demoted from admin: delivered before, not after; created_by shows who it hangs on', async () => {
      const admin = await stack.agent('acme', 'Admin');
      const workspaceId = await stack.workspaceWith(owner, [[admin, Role.ADMIN]]);
      const created = await stack.events.createWebhook({ workspaceId, url: receiver.url, events: [], description: '' }, admin.as);
      secrets.push(created.secret);
      const ref = { workspaceId, webhookId: created.webhook!.id };
      expect((await stack.events.listWebhooks({ workspaceId }, owner.as)).webhooks.map((w) => w.createdBy)).toEqual([admin.id]);
      expect((await deliverOne(workspaceId)).got).toBe(1);

      await stack.workspace.addMember({ workspaceId, agentId: admin.id, role: Role.WRITE }, owner.as);
      const { event, got } = await deliverOne(workspaceId);
      expect(got).toBe(0);
      await expectStopped(ref, event.eventId);
    });

    test('removed from the workspace, or its cross-tenant grant revoked: nothing more is sent', async () => {
      const colleague = await stack.agent('acme', 'Colleague');
      const foreign = await stack.agent('globex', 'Foreign');
      const { grant } = await stack.identity.requestGrant({ agentId: foreign.id }, owner.as);
      await stack.identity.approveGrant({ grantId: grant!.id }, foreign.as);
      const workspaceId = await stack.workspaceWith(owner, [[colleague, Role.ADMIN], [foreign, Role.ADMIN]]);
      const refs = [];
      for (const creator of [colleague, foreign]) {
        const created = await stack.events.createWebhook({ workspaceId, url: receiver.url, events: [], description: '' }, creator.as);
        secrets.push(created.secret);
        refs.push({ workspaceId, webhookId: created.webhook!.id });
      }
      expect((await deliverOne(workspaceId)).got).toBe(2);

      await stack.workspace.removeMember({ workspaceId, agentId: colleague.id }, owner.as);
      await stack.identity.revokeGrant({ grantId: grant!.id }, foreign.as);
      const { event, got } = await deliverOne(workspaceId);
      expect(got).toBe(0);
      for (const ref of refs) await expectStopped(ref, event.eventId);
      // The owner's own webhook in the same workspace is unaffected.
      await hook(workspaceId, receiver);
      expect((await deliverOne(workspaceId)).got).toBe(1);
    });
  });

  test('an endpoint failing continuously for 5 days is disabled; a success in between resets the count', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    const { ref } = await hook(workspaceId, receiver);
    const start = stack.clock.now;
    receiver.respond = () => ({ status: 500 });
    const exhaust = async () => {
      await stack.service.deliverDue();
      for (let i = 0; i < SCHEDULE.length; i += 1) {
        stack.clock.now += 10 * HOUR;
        await stack.service.deliverDue();
      }
    };
    await stack.publish(stack.event(workspaceId, 'workspace.created'));
    await exhaust();
    expect((await deliveries(ref))[0]!.status).toBe(DeliveryStatus.FAILED);

    // Just short of five days after the first failure: still failing, still enabled.
    stack.clock.now = start + 5 * 24 * HOUR - 10_000;
    await stack.publish(stack.event(workspaceId, 'workspace.created'));
    await stack.service.deliverDue();
    expect((await webhook(ref)).enabled).toBe(true);
    stack.clock.now += SCHEDULE[1]!;
    await stack.service.deliverDue();
    stack.clock.now += SCHEDULE[2]!;
    await stack.service.deliverDue();
    expect(await webhook(ref)).toMatchObject({ enabled: false, disabledReason: 'failing', disabledAt: BigInt(stack.clock.now) });

    // Another endpoint: a success on day 4 starts the count again.
    const second = await hook(workspaceId, other);
    other.respond = () => ({ status: 500 });
    const secondStart = stack.clock.now;
    await stack.publish(stack.event(workspaceId, 'workspace.created'));
    await stack.service.deliverDue();
    stack.clock.now = secondStart + 4 * 24 * HOUR;
    other.respond = () => ({ status: 200 });
    await stack.publish(stack.event(workspaceId, 'workspace.created'));
    await stack.service.deliverDue();
    other.respond = () => ({ status: 500 });
    stack.clock.now = secondStart + 6 * 24 * HOUR;
    await stack.publish(stack.event(workspaceId, 'workspace.created'));
    await stack.service.deliverDue();
    expect((await webhook(second.ref)).enabled).toBe(true);
  });

  test('replay by event id sends the same event (same webhook-id) again; by since, every failed delivery since then', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    const { ref } = await hook(workspaceId, receiver);
    receiver.respond = () => ({ status: 500 });
    const e1 = stack.event(workspaceId, 'workspace.created');
    await stack.publish(e1);
    const exhaust = async () => {
      await stack.service.deliverDue();
      for (let i = 0; i < SCHEDULE.length; i += 1) {
        stack.clock.now += 10 * HOUR;
        await stack.service.deliverDue();
      }
    };
    await exhaust();
    const secondAt = stack.clock.now + 1;
    stack.clock.now = secondAt;
    const e2 = stack.event(workspaceId, 'workspace.member.added');
    await stack.publish(e2);
    await exhaust();
    expect((await deliveries(ref, DeliveryStatus.FAILED)).map((d) => d.eventId)).toEqual([e2.eventId, e1.eventId]);

    receiver.respond = () => ({ status: 204 });
    receiver.received.length = 0;
    const since = (at: number) => stack.events.replayDeliveries({ ...ref, target: { case: 'since', value: BigInt(at) } }, owner.as);
    expect((await since(secondAt)).replayed).toBe(1);
    expect((await deliveries(ref, DeliveryStatus.PENDING)).map((d) => d.eventId)).toEqual([e2.eventId]);
    await stack.service.deliverDue();
    expect(receiver.received.map((r) => r.eventId)).toEqual([e2.eventId]);

    const byId = (eventId: string) => stack.events.replayDeliveries({ ...ref, target: { case: 'eventId', value: eventId } }, owner.as);
    expect((await byId(e1.eventId)).replayed).toBe(1);
    // Already queued: nothing more to do.
    expect((await byId(e1.eventId)).replayed).toBe(0);
    await stack.service.deliverDue();
    expect(receiver.received.map((r) => r.eventId)).toEqual([e2.eventId, e1.eventId]);
    // A delivered one may be sent again too.
    expect((await byId(e1.eventId)).replayed).toBe(1);
    await stack.service.deliverDue();
    expect(receiver.received.map((r) => r.eventId)).toEqual([e2.eventId, e1.eventId, e1.eventId]);
    const [latest, oldest] = await deliveries(ref);
    expect(latest!.status).toBe(DeliveryStatus.DELIVERED);
    expect(oldest!.attempts.length).toBe(SCHEDULE.length + 3);

    expect(await failure(byId('evt_unknown'))).toEqual({ reason: Reason.NOT_FOUND, message: 'Delivery not found', field: '' });
    expect(await failure(stack.events.replayDeliveries({ ...ref, target: { case: undefined } }, owner.as))).toEqual({
      reason: Reason.INVALID_PARAMS,
      message: 'Invalid params: event_id or since is required',
      field: 'event_id',
    });
  });

  test('test sends one signed webhook.test event now and reports it; it is listed with the deliveries', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    const { secret, ref, id } = await hook(workspaceId, receiver);
    const ok = await stack.events.testWebhook(ref, owner.as);
    expect(ok.delivery).toMatchObject({ statusCode: 204, error: '', delivered: true });
    expect(ok.delivery!.eventId).toMatch(/^evt_/);
    const [got] = receiver.received;
    expect(JSON.parse(got!.body)).toEqual({ event: 'webhook.test', timestamp: new Date(stack.clock.now).toISOString(), data: { workspace_id: workspaceId, webhook_id: id } });
    expect(got!.headers['webhook-id']).toBe(ok.delivery!.eventId);
    expect(got!.headers['webhook-signature']).toBe(expectedSignature(secret, got!.eventId, got!.headers['webhook-timestamp'] as string, got!.body));

    receiver.respond = () => ({ status: 500 });
    const bad = await stack.events.testWebhook(ref, owner.as);
    expect(bad.delivery).toMatchObject({ statusCode: 500, error: 'HTTP 500', delivered: false });
    // The endpoint is not penalised for a test.
    expect((await webhook(ref)).enabled).toBe(true);

    const closed = await startReceiver();
    await closed.close();
    const unreachable = await stack.events.createWebhook({ workspaceId, url: closed.url, events: [], description: '' }, owner.as);
    const refused = await stack.events.testWebhook({ workspaceId, webhookId: unreachable.webhook!.id }, owner.as);
    expect(refused.delivery).toMatchObject({ statusCode: 0, delivered: false });
    expect(refused.delivery!.error).toBe('The endpoint could not be reached (ECONNREFUSED)');

    // A redirect is a failed attempt: the egress guard never follows it, so its target hears nothing.
    const target = await startReceiver();
    receiver.respond = () => ({ status: 307, headers: { location: `${target.url}/elsewhere` } });
    const redirected = await stack.events.testWebhook(ref, owner.as);
    await target.close();
    expect(redirected.delivery).toMatchObject({ statusCode: 307, error: 'The endpoint answered HTTP 307 (a redirect, not followed)', delivered: false });
    expect(target.received).toEqual([]);

    const listed = await deliveries(ref);
    expect(listed.map((d) => [d.eventId, d.event, d.status])).toEqual([
      [redirected.delivery!.eventId, 'webhook.test', DeliveryStatus.FAILED],
      [bad.delivery!.eventId, 'webhook.test', DeliveryStatus.FAILED],
      [ok.delivery!.eventId, 'webhook.test', DeliveryStatus.DELIVERED],
    ]);
  });

  test('deliveries: newest first, filtered by status, limited', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    const { ref } = await hook(workspaceId, receiver);
    const events = [1, 2, 3, 4].map(() => stack.event(workspaceId, 'workspace.memory.stored'));
    await stack.publish(...events.slice(0, 3));
    await stack.service.deliverDue();
    receiver.respond = () => ({ status: 500 });
    await stack.publish(events[3]!);
    await stack.service.deliverDue();
    const ids = events.map((e) => e.eventId);
    expect((await deliveries(ref)).map((d) => d.eventId)).toEqual([...ids].reverse());
    expect((await deliveries(ref, DeliveryStatus.UNSPECIFIED, 2)).map((d) => d.eventId)).toEqual([ids[3], ids[2]]);
    expect((await deliveries(ref, DeliveryStatus.DELIVERED)).map((d) => d.eventId)).toEqual([ids[2], ids[1], ids[0]]);
    const [pending] = await deliveries(ref, DeliveryStatus.PENDING);
    expect(pending).toMatchObject({ eventId: ids[3], nextAttemptAt: BigInt(stack.clock.now + SCHEDULE[1]!) });
    expect(pending!.attempts).toHaveLength(2);
    expect(await failure(stack.events.listDeliveries({ ...ref, limit: 101, status: 0 }, owner.as))).toEqual({
      reason: Reason.INVALID_PARAMS,
      message: 'Invalid params: limit must be between 1 and 100',
      field: 'limit',
    });
  });

  test('workspace.deleted is delivered, then the workspace\'s webhooks go', async () => {
    const workspaceId = await stack.workspaceWith(owner);
    const { ref } = await hook(workspaceId, receiver);
    const deleted = stack.event(workspaceId, 'workspace.deleted', { deleted_by: owner.id });
    await stack.publish(deleted);
    await stack.service.deliverDue();
    expect(receiver.received.map((r) => r.eventId)).toEqual([deleted.eventId]);
    expect((await stack.db.query('SELECT id FROM webhooks WHERE id = $1', [ref.webhookId])).rows.length).toBe(0);

    // With a delivery still pending, the webhook waits for it.
    const later = await stack.workspaceWith(owner);
    const pending = await hook(later, other);
    other.respond = (_r, index) => ({ status: index < 2 ? 500 : 204 });
    await stack.publish(stack.event(later, 'workspace.deleted'));
    await stack.service.deliverDue();
    expect(await failure(stack.events.getWebhook(pending.ref, owner.as))).toEqual({ reason: Reason.NOT_FOUND, message: 'Webhook not found', field: '' });
    expect((await stack.db.query('SELECT id FROM webhooks WHERE id = $1', [pending.id])).rows.length).toBe(1);
    stack.clock.now += SCHEDULE[1]!;
    await stack.service.deliverDue();
    expect(other.received).toHaveLength(3);
    expect((await stack.db.query('SELECT id FROM webhooks WHERE id = $1', [pending.id])).rows.length).toBe(0);
  });

  test('the consumer joins group agenthub-events on the workspace events topic and skips malformed messages', async () => {
    expect(stack.bus.group).toBe('agenthub-events');
    expect(stack.bus.topics).toEqual(['agenthub.workspace.events']);
    const workspaceId = await stack.workspaceWith(owner);
    await hook(workspaceId, receiver);
    await stack.bus.publish('agenthub.workspace.events', [
      { key: workspaceId, value: 'not json', headers: { 'event-id': 'evt_bad' } },
      { key: workspaceId, value: JSON.stringify({ event: 'workspace.created', data: { workspace_id: workspaceId } }), headers: {} },
    ]);
    await stack.service.deliverDue();
    expect(receiver.received).toEqual([]);
  });
});

describe('the captured debug log', () => {
  test('holds no signing secret, in any encoding', () => {
    const output = capturedLog.join('');
    expect(output).toContain('webhook endpoint disabled');
    expect(secrets.length).toBeGreaterThan(0);
    for (const secret of secrets) {
      const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
      for (const form of [secret.slice('whsec_'.length), key.toString('hex'), key.toString('base64url')]) expect(output).not.toContain(form);
    }
    expect(output).not.toContain('whsec_');
  });
});

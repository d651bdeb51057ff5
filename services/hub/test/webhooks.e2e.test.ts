import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ProvisionedBackend } from '@agenthub/testing';
import { hubModes, startTestHub, type HubMode, type Agent, type RpcReply, type TestHub } from './harness.js';
import { signatures, verifySignature, WebhookReceiver, type Received } from './webhook-receiver.js';

/**
 * Webhooks end to end: a real HTTP receiver on 127.0.0.1 subscribed through `x-hub/webhooks.*`
 * on a whole hub (gateway → events service over gRPC; workspace, secrets → outbox → event log →
 * events service → HTTP POST), on embedded PGlite and on real PostgreSQL + Redis. What is checked
 * is what a subscriber sees: bodies, headers, Standard Webhooks signatures (verified here with
 * node:crypto, never with the hub's code), order, duplicates, and the management methods.
 *
 * No assertion depends on how fast anything is: every wait is a bounded poll for a condition.
 * Hubs that deliver to the loopback receiver run with HUB_EGRESS_ALLOW_PRIVATE=true; the SSRF
 * refusals run on a hub without it.
 */

const UNKNOWN_WS = 'ws_doesnotexist0000000';
const ACCESS_DENIED = { code: -32100, message: 'Access denied' };
const WORKSPACE_NOT_FOUND = { code: -32101, message: 'Workspace not found' };
const WEBHOOK_NOT_FOUND = { code: -32101, message: 'Webhook not found' };
const ADMIN_REQUIRED = { code: -32102, message: 'Admin access required' };

const WORKSPACE_EVENTS = [
  'workspace.created',
  'workspace.deleted',
  'workspace.member.added',
  'workspace.member.removed',
  'workspace.memory.stored',
  'workspace.memory.updated',
  'workspace.memory.deleted',
  'workspace.secret.set',
  'workspace.secret.deleted',
];

const ISO_UTC = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
const WEBHOOK_ID = /^wh_[a-z0-9]{20}$/;
const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;

/**
 * A short retry schedule (the default is 0, 5 s, 5 min, 30 min, …): six retries within about
 * 6 s, after which a delivery is failed for good (and replayable).
 */
const RETRY_ENV = { WEBHOOK_RETRY_SCHEDULE_MS: '0,200,400,800,1600,3200' };

/** Webhook timestamps (created_at, attempts[].at, …) are ISO 8601 UTC, like the payload's. */
const ms = (iso: unknown): number => {
  expect(iso).toEqual(expect.stringMatching(ISO_UTC));
  return Date.parse(iso as string);
};

/** The first request of each webhook-id, in arrival order. */
function firstOfEach(requests: readonly Received[]): Received[] {
  const seen = new Set<string>();
  return requests.filter((r) => {
    const id = r.headers['webhook-id'] ?? '';
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}

/** Every request with the same webhook-id carries the same event: same body bytes. */
function expectDuplicatesIdentical(requests: readonly Received[]) {
  const byId = new Map<string, Received>();
  for (const r of requests) {
    const first = byId.get(r.headers['webhook-id']!);
    if (first) expect({ id: r.headers['webhook-id'], body: r.body }).toEqual({ id: first.headers['webhook-id'], body: first.body });
    else byId.set(r.headers['webhook-id']!, r);
  }
}

/** A backend that hands out the same database every time, so a second hub finds the first's data. */
function pinned(provisioned: ProvisionedBackend, name: HubMode['name']): HubMode {
  return { name, provision: async () => ({ ...provisioned, dispose: async () => undefined }) };
}

describe('the test receiver\'s signature check', () => {
  it('agrees with the Standard Webhooks specification\'s test vector', () => {
    const request = {
      headers: { 'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek', 'webhook-timestamp': '1614265330', 'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=' },
      raw: '{"test": 2432232314}',
    };
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    expect(verifySignature(secret, request, Infinity)).toBe(true);
    expect(verifySignature(secret, { ...request, headers: { ...request.headers, 'webhook-signature': 'v1,bm9wZQ== v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=' } }, Infinity)).toBe(true);
    expect(verifySignature(secret, { ...request, raw: '{"test": 2432232315}' }, Infinity)).toBe(false);
    expect(verifySignature(secret, request)).toBe(false); // a 2021 timestamp is outside the tolerance
  });
});

describe.each(hubModes().map((m) => [m.name, m] as const))('webhooks over HTTP (%s)', (_name, backend) => {
  let hub: TestHub;
  let receiver: WebhookReceiver;
  let owner: Agent;
  let admin: Agent;
  let writer: Agent;
  let outsider: Agent;
  let paths = 0;
  /** A fresh receiver path per webhook, so each test reads only its own requests. */
  const newPath = () => `/hooks/${++paths}`;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    hub = await startTestHub(backend, { HUB_EGRESS_ALLOW_PRIVATE: 'true', EMBEDDINGS_THREADS: '1', ...RETRY_ENV });
    owner = await hub.agent('acme', 'owner');
    admin = await hub.agent('acme', 'admin');
    writer = await hub.agent('acme', 'writer');
    outsider = await hub.agent('acme', 'outsider');
  });
  afterAll(async () => {
    await hub?.stop();
    await receiver?.close();
  });

  const call = (who: Agent, method: string, params: unknown = {}): Promise<RpcReply> => hub.call(who.api_key, `x-hub/${method}`, params);
  const ok = (who: Agent, method: string, params: unknown = {}) => hub.ok(who.api_key, `x-hub/${method}`, params);

  async function expectError(reply: Promise<RpcReply>, expected: { code: number; message?: string }) {
    const { status, body } = await reply;
    expect(status).toBe(200);
    expect(body.result).toBeUndefined();
    expect(body.error).toMatchObject(expected);
    return body.error!;
  }

  async function expectInvalid(reply: Promise<RpcReply>, field: string) {
    const error = await expectError(reply, { code: -32602 });
    expect(error.message).toContain(field);
    return error;
  }

  /** The owner's workspace with an admin and a writer member. */
  async function workspace(name = 'Hooked'): Promise<string> {
    const { workspace: created } = await ok(owner, 'workspace.create', { name });
    await ok(owner, 'workspace.members.add', { workspace_id: created.id, agent_id: admin.agent_id, role: 'admin' });
    await ok(owner, 'workspace.members.add', { workspace_id: created.id, agent_id: writer.agent_id, role: 'write' });
    return created.id;
  }

  async function subscribe(workspaceId: string, path: string, extra: Record<string, unknown> = {}, who: Agent = owner) {
    const { webhook } = await ok(who, 'webhooks.create', { workspace_id: workspaceId, url: receiver.url(path), ...extra });
    return webhook as { id: string; secret: string; url: string; events: string[] };
  }

  /** Waits until `path` got `count` distinct webhook-ids; returns the first request of each. */
  async function distinct(path: string, count: number, on: WebhookReceiver = receiver, timeoutMs = 60_000): Promise<Received[]> {
    return on.waitFor(`${count} distinct event(s) on ${path}`, () => {
      const firsts = firstOfEach(on.on(path));
      return firsts.length >= count && firsts;
    }, timeoutMs);
  }

  async function deliveries(workspaceId: string, webhookId: string, extra: Record<string, unknown> = {}) {
    return (await ok(owner, 'webhooks.deliveries', { workspace_id: workspaceId, webhook_id: webhookId, ...extra })).deliveries as any[];
  }

  // ---- management ---------------------------------------------------------------------------

  describe('managing webhooks', () => {
    it('create returns the webhook with its secret once; get and list never show it; delete removes it', async () => {
      const workspaceId = await workspace();
      const url = receiver.url(newPath());
      const created = await ok(owner, 'webhooks.create', { workspace_id: workspaceId, url, events: ['workspace.memory.stored'], description: 'CI notifier' });
      expect(created.webhook).toEqual({
        id: expect.stringMatching(WEBHOOK_ID),
        workspace_id: workspaceId,
        url,
        events: ['workspace.memory.stored'],
        description: 'CI notifier',
        enabled: true,
        created_at: expect.stringMatching(ISO_UTC),
        created_by: owner.agent_id,
        secret: expect.stringMatching(SECRET),
      });
      expect(Math.abs(ms(created.webhook.created_at) - Date.now())).toBeLessThan(60_000);
      const { secret, ...shown } = created.webhook;
      expect(Buffer.from(secret.slice('whsec_'.length), 'base64')).toHaveLength(32);

      // No filter means every event; no description means "".
      const other = (await ok(admin, 'webhooks.create', { workspace_id: workspaceId, url: receiver.url(newPath()) })).webhook;
      expect(other).toMatchObject({ events: [], description: '', enabled: true });
      expect(other.secret).not.toBe(secret);

      const got = (await ok(owner, 'webhooks.get', { workspace_id: workspaceId, webhook_id: shown.id })).webhook;
      expect(got).toMatchObject(shown);
      expect(got.secret).toBeUndefined();
      expect(got.enabled).toBe(true);
      expect(got.disabled_reason).toBeUndefined();
      expect(got.disabled_at).toBeUndefined();

      const listed = await ok(admin, 'webhooks.list', { workspace_id: workspaceId });
      expect(listed.webhooks.map((w: any) => w.id)).toEqual([shown.id, other.id]);
      expect(JSON.stringify(listed)).not.toContain('whsec_');

      expect(await ok(owner, 'webhooks.delete', { workspace_id: workspaceId, webhook_id: shown.id })).toMatchObject({ deleted: true });
      await expectError(call(owner, 'webhooks.get', { workspace_id: workspaceId, webhook_id: shown.id }), WEBHOOK_NOT_FOUND);
      await expectError(call(owner, 'webhooks.delete', { workspace_id: workspaceId, webhook_id: shown.id }), WEBHOOK_NOT_FOUND);
      expect((await ok(owner, 'webhooks.list', { workspace_id: workspaceId })).webhooks.map((w: any) => w.id)).toEqual([other.id]);
    });

    it('-32602 names the parameter: url missing, not http(s), with credentials or too long; unknown event names; long descriptions', async () => {
      const workspaceId = await workspace();
      const base = { workspace_id: workspaceId };
      await expectInvalid(call(owner, 'webhooks.create', base), 'url');
      for (const url of ['not a url', 'ftp://127.0.0.1/hook', 'file:///etc/passwd', `http://user:pass@127.0.0.1:${1}/hook`, `http://127.0.0.1/${'a'.repeat(2048)}`, 7]) {
        await expectInvalid(call(owner, 'webhooks.create', { ...base, url }), 'url');
      }
      const url = receiver.url(newPath());
      await expectInvalid(call(owner, 'webhooks.create', { ...base, url, events: ['workspace.memory.stored', 'workspace.nope'] }), 'events');
      await expectInvalid(call(owner, 'webhooks.create', { ...base, url, events: 'workspace.memory.stored' }), 'events');
      await expectInvalid(call(owner, 'webhooks.create', { ...base, url, description: 'd'.repeat(501) }), 'description');
      await expectInvalid(call(owner, 'webhooks.create', { url }), 'workspace_id');
      await expectInvalid(call(owner, 'webhooks.get', base), 'webhook_id');
      await expectInvalid(call(owner, 'webhooks.replay', { ...base, webhook_id: 'wh_aaaaaaaaaaaaaaaaaaaa' }), 'event_id');
      // Every name of the interface's table is accepted as a filter.
      const all = await subscribe(workspaceId, newPath(), { events: WORKSPACE_EVENTS });
      expect([...all.events].sort()).toEqual([...WORKSPACE_EVENTS].sort());
      // Nothing was created by the refused calls.
      expect((await ok(owner, 'webhooks.list', base)).webhooks).toHaveLength(1);
    });

    it('only workspace admins: a writer gets -32102, a non-member -32100, an unknown workspace -32101', async () => {
      const workspaceId = await workspace();
      const hook = await subscribe(workspaceId, newPath(), {}, admin);
      const otherWorkspace = await workspace('Other');
      const foreignHook = await subscribe(otherWorkspace, newPath());
      const url = receiver.url(newPath());
      const calls: Array<[string, Record<string, unknown>]> = [
        ['webhooks.create', { url }],
        ['webhooks.list', {}],
        ['webhooks.get', { webhook_id: hook.id }],
        ['webhooks.delete', { webhook_id: hook.id }],
        ['webhooks.rotate_secret', { webhook_id: hook.id }],
        ['webhooks.test', { webhook_id: hook.id }],
        ['webhooks.deliveries', { webhook_id: hook.id }],
        ['webhooks.replay', { webhook_id: hook.id, event_id: 'evt_00000000-0000-0000-0000-000000000000' }],
      ];
      for (const [method, params] of calls) {
        await expectError(call(writer, method, { workspace_id: workspaceId, ...params }), ADMIN_REQUIRED);
        await expectError(call(outsider, method, { workspace_id: workspaceId, ...params }), ACCESS_DENIED);
        await expectError(call(owner, method, { workspace_id: UNKNOWN_WS, ...params }), WORKSPACE_NOT_FOUND);
      }
      // A webhook is found only through its own workspace.
      for (const method of ['webhooks.get', 'webhooks.delete', 'webhooks.rotate_secret', 'webhooks.test', 'webhooks.deliveries']) {
        await expectError(call(owner, method, { workspace_id: workspaceId, webhook_id: foreignHook.id }), WEBHOOK_NOT_FOUND);
      }
      // The refused calls changed nothing and sent nothing.
      expect((await ok(owner, 'webhooks.get', { workspace_id: workspaceId, webhook_id: hook.id })).webhook.id).toBe(hook.id);
      expect((await ok(owner, 'webhooks.list', { workspace_id: workspaceId })).webhooks).toHaveLength(1);
      expect(receiver.on(new URL(hook.url).pathname).filter((r) => r.body?.event === 'webhook.test')).toEqual([]);
    });
  });

  // ---- delivery -----------------------------------------------------------------------------

  describe('delivery', () => {
    it('every workspace event arrives once, in order, signed, with its payload; secret values never appear', async () => {
      const workspaceId = await workspace();
      const path = newPath();
      const hook = await subscribe(workspaceId, path);
      const member = await hub.agent('acme', 'member');
      const value = `value-${randomBytes(12).toString('hex')}`;

      await ok(owner, 'workspace.members.add', { workspace_id: workspaceId, agent_id: member.agent_id, role: 'read' });
      const { memory } = await ok(writer, 'workspace.store', { workspace_id: workspaceId, content: 'We chose Postgres for persistence.', type: 'decision' });
      // A duplicate store that merges a tag changes the memory (issue 14 item 7); one that adds nothing is silent.
      expect(await ok(admin, 'workspace.store', { workspace_id: workspaceId, content: 'We chose Postgres for persistence.', tags: ['db'] })).toMatchObject({ duplicate: true, updated: true });
      expect(await ok(writer, 'workspace.store', { workspace_id: workspaceId, content: 'We chose Postgres for persistence.', tags: ['db'] })).toMatchObject({ duplicate: true, updated: false });
      await ok(writer, 'workspace.update', { workspace_id: workspaceId, id: memory.id, content: 'We chose PostgreSQL 16 for persistence.' });
      await ok(admin, 'workspace.forget', { workspace_id: workspaceId, id: memory.id });
      await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'DB_PASSWORD', value });
      await ok(admin, 'workspace.secrets.delete', { workspace_id: workspaceId, key: 'DB_PASSWORD' });
      await ok(admin, 'workspace.members.remove', { workspace_id: workspaceId, agent_id: member.agent_id });
      await ok(owner, 'workspace.delete', { workspace_id: workspaceId });

      const expected: Array<[string, Record<string, unknown>]> = [
        ['workspace.member.added', { workspace_id: workspaceId, agent_id: member.agent_id, role: 'read', added_by: owner.agent_id }],
        ['workspace.memory.stored', { workspace_id: workspaceId, memory_id: memory.id, type: 'decision', stored_by: writer.agent_id }],
        ['workspace.memory.updated', { workspace_id: workspaceId, memory_id: memory.id, type: 'decision', updated_by: admin.agent_id }],
        ['workspace.memory.updated', { workspace_id: workspaceId, memory_id: memory.id, type: 'decision', updated_by: writer.agent_id }],
        ['workspace.memory.deleted', { workspace_id: workspaceId, memory_id: memory.id, type: 'decision', deleted_by: admin.agent_id }],
        ['workspace.secret.set', { workspace_id: workspaceId, key: 'DB_PASSWORD', set_by: writer.agent_id }],
        ['workspace.secret.deleted', { workspace_id: workspaceId, key: 'DB_PASSWORD', deleted_by: admin.agent_id }],
        ['workspace.member.removed', { workspace_id: workspaceId, agent_id: member.agent_id, removed_by: admin.agent_id }],
        ['workspace.deleted', { workspace_id: workspaceId, deleted_by: owner.agent_id }],
      ];
      // Per-endpoint order: once workspace.deleted (the last) is in, everything before it is. Each
      // call waits for the previous answer, so the order is the calls' even across services: a
      // secrets call answers only once its event is on the log, before members.remove begins.
      const firsts = await distinct(path, expected.length);
      const requests = receiver.on(path);
      expect(firsts.map((r) => r.body?.event)).toEqual(expected.map(([event]) => event));
      // Once: one request per event to a receiver that always answered 204.
      expect(requests).toHaveLength(expected.length);

      firsts.forEach((request, i) => {
        const [event, data] = expected[i]!;
        expect(request.method).toBe('POST');
        expect(request.headers['content-type']).toMatch(/^application\/json/);
        expect(request.body).toEqual({ event, timestamp: expect.stringMatching(ISO_UTC), data });
        expect(Math.abs(Date.parse(request.body.timestamp) - Date.now())).toBeLessThan(10 * 60_000);
        expect(request.headers['webhook-id']).toMatch(/^\S+$/);
        expect(request.headers['webhook-timestamp']).toMatch(/^\d{10}$/);
        expect(verifySignature(hook.secret, request)).toBe(true);
        // The check is not vacuous: another secret or another body fails it.
        expect(verifySignature(`whsec_${randomBytes(32).toString('base64')}`, request)).toBe(false);
        expect(verifySignature(hook.secret, { ...request, raw: request.raw.replace(workspaceId, UNKNOWN_WS) })).toBe(false);
      });
      expect(new Set(firsts.map((r) => r.headers['webhook-id'])).size).toBe(expected.length);
      for (const request of requests) {
        expect(request.raw).not.toContain(value);
        expect(JSON.stringify(request.headers)).not.toContain(value);
      }
    });

    it('a webhook stops delivering once its creator is removed from the workspace, and says why (issue 12)', async () => {
      const creator = await hub.agent('acme', 'creator');
      const workspaceId = await workspace();
      await ok(owner, 'workspace.members.add', { workspace_id: workspaceId, agent_id: creator.agent_id, role: 'admin' });
      const path = newPath();
      const hook = await subscribe(workspaceId, path, { events: ['workspace.secret.set'] }, creator);
      expect((await ok(owner, 'webhooks.list', { workspace_id: workspaceId })).webhooks).toEqual([
        expect.objectContaining({ id: hook.id, created_by: creator.agent_id }),
      ]);
      await ok(owner, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'BEFORE', value: 'v' });
      await distinct(path, 1);

      await ok(owner, 'workspace.members.remove', { workspace_id: workspaceId, agent_id: creator.agent_id });
      // A replica may trust the creator's access for up to a second after its last check: keep
      // changing the workspace until an attempt finds the creator gone and disables the webhook.
      let shown: any;
      await receiver.waitFor('the webhook disabled for its creator', async () => {
        await ok(owner, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'AFTER', value: 'v' });
        shown = (await ok(owner, 'webhooks.get', { workspace_id: workspaceId, webhook_id: hook.id })).webhook;
        return !shown.enabled;
      });
      expect(shown).toMatchObject({ enabled: false, disabled_reason: 'creator_access', created_by: creator.agent_id });
      const stopped = (await deliveries(workspaceId, hook.id, { status: 'failed' }))[0];
      expect(stopped.attempts.at(-1)).toMatchObject({ error: 'not sent: the agent that created the webhook no longer has admin access to the workspace' });

      // Disabled: nothing more is queued or sent for it, while the owner's webhook gets the event.
      const sent = receiver.on(path).length;
      const queued = (await deliveries(workspaceId, hook.id)).length;
      const witness = newPath();
      await subscribe(workspaceId, witness, { events: ['workspace.secret.set'] });
      await ok(owner, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'LATER', value: 'v' });
      await receiver.waitFor('the owner\'s webhook to get the later event', () => receiver.on(witness).some((r) => r.body?.data?.key === 'LATER'));
      expect((await deliveries(workspaceId, hook.id)).length).toBe(queued);
      expect(receiver.on(path)).toHaveLength(sent);
    });

    it('workspace.created: a new workspace\'s webhook sees it at most once, well-formed, before later changes', async () => {
      // A webhook belongs to a workspace, so it can only be created after the workspace.created
      // event was written (in the creating transaction). The events service matches an event
      // against the workspace's webhooks when it consumes it: whether a webhook created right
      // after the workspace gets workspace.created depends on which comes first (usually the
      // event, so it has no subscriber). Replay cannot bring it back: it re-queues deliveries,
      // and there is none. So this checks what a subscriber can rely on either way.
      const { workspace: created } = await ok(owner, 'workspace.create', { name: 'Born' });
      const path = newPath();
      const hook = await subscribe(created.id, path);
      await ok(owner, 'workspace.secrets.set', { workspace_id: created.id, key: 'FIRST', value: 'v' });
      const firsts = await receiver.waitFor('workspace.secret.set', () => {
        const list = firstOfEach(receiver.on(path));
        return list.some((r) => r.body?.event === 'workspace.secret.set') && list;
      });
      const events = firsts.map((r) => r.body.event);
      expect([['workspace.secret.set'], ['workspace.created', 'workspace.secret.set']]).toContainEqual(events);
      expect(receiver.on(path)).toHaveLength(events.length);
      if (events[0] === 'workspace.created') {
        expect(firsts[0]!.body).toEqual({
          event: 'workspace.created',
          timestamp: expect.stringMatching(ISO_UTC),
          data: { workspace_id: created.id, name: 'Born', owner_agent_id: owner.agent_id, created_by: owner.agent_id },
        });
        expect(verifySignature(hook.secret, firsts[0]!)).toBe(true);
      }
      expect(await ok(owner, 'webhooks.replay', { workspace_id: created.id, webhook_id: hook.id, since: new Date(created.created_at - 60_000).toISOString() })).toEqual({ replayed: 0 });
    });

    it('an event filter: a webhook for workspace.memory.stored gets only those', async () => {
      const workspaceId = await workspace();
      const path = newPath();
      const hook = await subscribe(workspaceId, path, { events: ['workspace.memory.stored'] });
      const member = await hub.agent('acme', 'filtered');
      const first = await ok(writer, 'workspace.store', { workspace_id: workspaceId, content: 'The launch is on Tuesday.' });
      await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'TOKEN', value: 'x' });
      await ok(owner, 'workspace.members.add', { workspace_id: workspaceId, agent_id: member.agent_id, role: 'read' });
      await ok(writer, 'workspace.update', { workspace_id: workspaceId, id: first.memory.id, tags: ['launch'] });
      await ok(writer, 'workspace.forget', { workspace_id: workspaceId, id: first.memory.id });
      const last = await ok(writer, 'workspace.store', { workspace_id: workspaceId, content: 'Marketing owns the launch email.', type: 'fact' });
      // Order per endpoint: anything let through wrongly would have come before the last store.
      const firsts = await distinct(path, 2);
      expect(firsts.map((r) => [r.body.event, r.body.data.memory_id])).toEqual([
        ['workspace.memory.stored', first.memory.id],
        ['workspace.memory.stored', last.memory.id],
      ]);
      for (const r of firsts) expect(verifySignature(hook.secret, r)).toBe(true);
      const listed = await deliveries(workspaceId, hook.id);
      expect(listed.map((d) => d.event)).toEqual(['workspace.memory.stored', 'workspace.memory.stored']);
    });

    it('webhooks.test sends a signed webhook.test now and reports the attempt', async () => {
      const workspaceId = await workspace();
      const path = newPath();
      const hook = await subscribe(workspaceId, path);
      const { delivery } = await ok(owner, 'webhooks.test', { workspace_id: workspaceId, webhook_id: hook.id });
      expect(delivery).toMatchObject({ event_id: expect.any(String), status_code: 204, latency_ms: expect.any(Number), delivered: true });
      expect(delivery.error ?? '').toBe('');
      // The call returned after the attempt: the request is already here.
      const [request] = receiver.on(path);
      expect(request).toBeDefined();
      expect(request!.headers['webhook-id']).toBe(delivery.event_id);
      expect(request!.body).toEqual({ event: 'webhook.test', timestamp: expect.stringMatching(ISO_UTC), data: { workspace_id: workspaceId, webhook_id: hook.id } });
      expect(verifySignature(hook.secret, request!)).toBe(true);

      // A failing endpoint is reported, not thrown.
      receiver.respond((r) => (r.path === path ? 500 : 204));
      try {
        const failed = (await ok(owner, 'webhooks.test', { workspace_id: workspaceId, webhook_id: hook.id })).delivery;
        expect(failed).toMatchObject({ status_code: 500, delivered: false });
        expect(failed.event_id).not.toBe(delivery.event_id);
      } finally {
        receiver.respond(() => 204);
      }
      // An endpoint that refuses connections: no status, an error.
      const down = await WebhookReceiver.start();
      await down.down();
      try {
        const { webhook: unreachable } = await ok(owner, 'webhooks.create', { workspace_id: workspaceId, url: down.url('/down') });
        const refused = (await ok(owner, 'webhooks.test', { workspace_id: workspaceId, webhook_id: unreachable.id })).delivery;
        expect(refused.delivered).toBe(false);
        expect(refused.status_code ?? 0).toBe(0);
        expect(refused.error).toEqual(expect.any(String));
        expect(refused.error.length).toBeGreaterThan(0);
      } finally {
        await down.close();
      }
    });

    it('deliveries lists every attempt: a 500 first, then the retry that got 204', async () => {
      const workspaceId = await workspace();
      const path = newPath();
      const hook = await subscribe(workspaceId, path);
      // The first request of each event fails; its retry succeeds.
      receiver.respond((r, earlier) => (r.path === path && !earlier.some((e) => e.headers['webhook-id'] === r.headers['webhook-id']) ? 500 : 204));
      try {
        await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'A', value: 'x' });
        await receiver.waitFor('the retry of the first event', () => receiver.on(path).some((r) => r.status === 204));
      } finally {
        receiver.respond(() => 204);
      }
      const requests = receiver.on(path);
      expect(requests.map((r) => r.status)).toEqual([500, 204]);
      expect(requests[1]!.headers['webhook-id']).toBe(requests[0]!.headers['webhook-id']);
      expect(requests[1]!.body).toEqual(requests[0]!.body);
      for (const r of requests) expect(verifySignature(hook.secret, r)).toBe(true);

      const eventId = requests[0]!.headers['webhook-id'];
      const delivered = await receiver.waitFor('the delivery recorded as delivered', async () => {
        const [d] = await deliveries(workspaceId, hook.id);
        return d?.status === 'delivered' && d;
      });
      expect(delivered).toMatchObject({ event_id: eventId, event: 'workspace.secret.set', status: 'delivered', created_at: expect.stringMatching(ISO_UTC) });
      expect(delivered.attempts).toEqual([
        { at: expect.stringMatching(ISO_UTC), status_code: 500, latency_ms: expect.any(Number), error: expect.stringContaining('500') },
        { at: expect.stringMatching(ISO_UTC), status_code: 204, latency_ms: expect.any(Number) },
      ]);
      expect(ms(delivered.attempts[1].at)).toBeGreaterThanOrEqual(ms(delivered.attempts[0].at));
      expect(ms(delivered.attempts[0].at)).toBeGreaterThanOrEqual(ms(delivered.created_at));
      expect(delivered.next_attempt_at).toBeUndefined();

      // Newest first, limit and status filters.
      await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'B', value: 'x' });
      await distinct(path, 2);
      const both = await receiver.waitFor('two delivered deliveries', async () => {
        const list = await deliveries(workspaceId, hook.id, { status: 'delivered' });
        return list.length === 2 && list;
      });
      expect(both[1].event_id).toBe(eventId);
      expect(await deliveries(workspaceId, hook.id, { limit: 1 })).toHaveLength(1);
      expect(await deliveries(workspaceId, hook.id, { status: 'failed' })).toEqual([]);
      expect(await deliveries(workspaceId, hook.id, { status: 'pending' })).toEqual([]);
      await expectInvalid(call(owner, 'webhooks.deliveries', { workspace_id: workspaceId, webhook_id: hook.id, status: 'lost' }), 'status');
      await expectInvalid(call(owner, 'webhooks.deliveries', { workspace_id: workspaceId, webhook_id: hook.id, limit: 101 }), 'limit');
    });

    it('receiver down, then up: every event arrives, in order; duplicates only under the same webhook-id', async () => {
      const flaky = await WebhookReceiver.start();
      try {
        const workspaceId = await workspace();
        const path = '/flaky';
        const { webhook: hook } = await ok(owner, 'webhooks.create', { workspace_id: workspaceId, url: flaky.url(path) });
        await flaky.down();

        const member = await hub.agent('acme', 'flaky-member');
        const expected: string[] = [];
        for (let i = 1; i <= 6; i += 1) {
          await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: `K${i}`, value: `v${i}` });
          expected.push(`workspace.secret.set K${i}`);
          if (i === 3) {
            await ok(owner, 'workspace.members.add', { workspace_id: workspaceId, agent_id: member.agent_id, role: 'read' });
            expected.push('workspace.member.added');
          }
        }
        await ok(owner, 'workspace.members.remove', { workspace_id: workspaceId, agent_id: member.agent_id });
        expected.push('workspace.member.removed');

        // The hub has tried three times and failed (connection refused), says so, and keeps
        // the events behind the first one waiting (one delivery at a time per endpoint).
        const pending = await flaky.waitFor('three failed attempts in webhooks.deliveries', async () => {
          const list = await deliveries(workspaceId, hook.id);
          const first = list.find((d) => d.attempts.length >= 3);
          return first && list.length === expected.length && first;
        });
        expect(pending.status).toBe('pending');
        for (const attempt of pending.attempts) {
          expect(attempt).toEqual({ at: expect.stringMatching(ISO_UTC), latency_ms: expect.any(Number), error: expect.any(String) });
        }
        expect(pending.next_attempt_at).toEqual(expect.stringMatching(ISO_UTC));
        const all0 = await deliveries(workspaceId, hook.id);
        expect(all0.filter((d) => d.attempts.length > 0)).toHaveLength(1);

        await flaky.up();
        const firsts = await distinct(path, expected.length, flaky);
        const label = (r: Received) => (r.body.event === 'workspace.secret.set' ? `${r.body.event} ${r.body.data.key}` : r.body.event);
        expect(firsts.map(label)).toEqual(expected);
        const all = flaky.on(path);
        expectDuplicatesIdentical(all);
        expect(new Set(all.map((r) => r.headers['webhook-id'])).size).toBe(expected.length);
        for (const r of all) expect(verifySignature(hook.secret, r)).toBe(true);

        const settled = await flaky.waitFor('every delivery delivered', async () => {
          const list = await deliveries(workspaceId, hook.id);
          return list.length === expected.length && list.every((d) => d.status === 'delivered') && list;
        });
        expect(new Set(settled.map((d: any) => d.event_id))).toEqual(new Set(firsts.map((r) => r.headers['webhook-id'])));
        const retried = settled.find((d: any) => d.event_id === firsts[0]!.headers['webhook-id']);
        expect(retried.attempts.length).toBeGreaterThanOrEqual(4);
        expect(retried.attempts.at(-1).status_code).toBe(204);
      } finally {
        await flaky.close();
      }
    });

    it('rotate_secret: later deliveries verify with the new secret, and with the old one during the window', async () => {
      const workspaceId = await workspace();
      const path = newPath();
      const hook = await subscribe(workspaceId, path);
      await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'BEFORE', value: 'x' });
      const [before] = await distinct(path, 1);

      const rotated = await ok(admin, 'webhooks.rotate_secret', { workspace_id: workspaceId, webhook_id: hook.id });
      expect(rotated.webhook).toMatchObject({ id: hook.id, workspace_id: workspaceId, url: hook.url, secret: expect.stringMatching(SECRET) });
      const fresh = rotated.webhook.secret as string;
      expect(ms(rotated.previous_secret_expires_at)).toBeGreaterThan(Date.now());
      expect(fresh).not.toBe(hook.secret);
      expect(JSON.stringify(await ok(owner, 'webhooks.get', { workspace_id: workspaceId, webhook_id: hook.id }))).not.toContain('whsec_');

      await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'AFTER', value: 'x' });
      const [, after] = await distinct(path, 2);
      expect(after!.body.data.key).toBe('AFTER');
      expect(signatures(after!)).toHaveLength(2);
      expect(after!.headers['webhook-signature']).toMatch(/^v1,\S+ v1,\S+$/);
      expect(verifySignature(fresh, after!)).toBe(true);
      expect(verifySignature(hook.secret, after!)).toBe(true);
      // The delivery before the rotation was signed with the old secret only.
      expect(signatures(before!)).toHaveLength(1);
      expect(verifySignature(hook.secret, before!)).toBe(true);
      expect(verifySignature(fresh, before!)).toBe(false);

      // webhooks.test signs the same way.
      const { delivery } = await ok(owner, 'webhooks.test', { workspace_id: workspaceId, webhook_id: hook.id });
      const test = receiver.on(path).find((r) => r.headers['webhook-id'] === delivery.event_id)!;
      expect(verifySignature(fresh, test)).toBe(true);
    });

    it('replay re-delivers an event with the same webhook-id; since replays failed deliveries', async () => {
      const workspaceId = await workspace();
      const path = newPath();
      const hook = await subscribe(workspaceId, path);
      const startedAt = new Date(Date.now() - 1000).toISOString();
      await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'REPLAYED', value: 'x' });
      const [original] = await distinct(path, 1);
      const eventId = original!.headers['webhook-id']!;
      await receiver.waitFor('the delivery recorded', async () => (await deliveries(workspaceId, hook.id))[0]?.status === 'delivered');

      expect(await ok(owner, 'webhooks.replay', { workspace_id: workspaceId, webhook_id: hook.id, event_id: eventId })).toEqual({ replayed: 1 });
      const again = await receiver.waitFor('the replayed request', () => receiver.on(path).filter((r) => r.headers['webhook-id'] === eventId).length >= 2 && receiver.on(path));
      const copies = again.filter((r) => r.headers['webhook-id'] === eventId);
      expect(copies[1]!.body).toEqual(original!.body);
      expect(verifySignature(hook.secret, copies[1]!)).toBe(true);
      await expectError(call(owner, 'webhooks.replay', { workspace_id: workspaceId, webhook_id: hook.id, event_id: 'evt_00000000-0000-0000-0000-000000000000' }), { code: -32101 });

      // The healthy webhook's delivered event is not replayed by `since`: only failed ones are.
      expect(await ok(owner, 'webhooks.replay', { workspace_id: workspaceId, webhook_id: hook.id, since: startedAt })).toEqual({ replayed: 0 });
      await expectInvalid(call(owner, 'webhooks.replay', { workspace_id: workspaceId, webhook_id: hook.id, since: 'yesterday' }), 'since');
      await expectInvalid(call(owner, 'webhooks.replay', { workspace_id: workspaceId, webhook_id: hook.id, since: startedAt, event_id: eventId }), 'event_id');
    });

    it('410 Gone disables the endpoint; failed deliveries are replayed by time, re-enabling it, with the same webhook-id', async () => {
      const workspaceId = await workspace();
      const path = newPath();
      const hook = await subscribe(workspaceId, path);
      // Another webhook of the workspace: an event reaches every webhook of its workspace at the
      // same moment, so once this one has it, the disabled one has been passed over.
      const barrier = newPath();
      await subscribe(workspaceId, barrier);
      const since = new Date(Date.now() - 1000).toISOString();
      receiver.respond((r) => (r.path === path ? 410 : 204));
      try {
        await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'GONE', value: 'x' });
        const failed = await receiver.waitFor('the failed delivery', async () => (await deliveries(workspaceId, hook.id, { status: 'failed' }))[0]);
        expect(failed).toMatchObject({ event: 'workspace.secret.set', status: 'failed' });
        expect(failed.attempts).toEqual([{ at: expect.stringMatching(ISO_UTC), status_code: 410, latency_ms: expect.any(Number), error: expect.any(String) }]);
        const disabled = (await ok(owner, 'webhooks.get', { workspace_id: workspaceId, webhook_id: hook.id })).webhook;
        expect(disabled).toMatchObject({ id: hook.id, enabled: false, disabled_reason: 'gone' });
        expect(Math.abs(ms(disabled.disabled_at) - Date.now())).toBeLessThan(60_000);
        // A disabled endpoint gets nothing: the next event is not sent.
        await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'WHILE_DISABLED', value: 'x' });
        await distinct(barrier, 2);
        const [first] = receiver.on(path);
        expect(receiver.on(path)).toHaveLength(1);
        expect((await deliveries(workspaceId, hook.id)).map((d) => d.status)).toEqual(['failed']);

        receiver.respond(() => 204);
        expect(await ok(owner, 'webhooks.replay', { workspace_id: workspaceId, webhook_id: hook.id, since })).toEqual({ replayed: 1 });
        const again = await receiver.waitFor('the replayed delivery', () => receiver.on(path).find((r) => r.status === 204));
        expect(again.headers['webhook-id']).toBe(first!.headers['webhook-id']);
        expect(again.body).toEqual(first!.body);
        expect(verifySignature(hook.secret, again)).toBe(true);
        expect((await ok(owner, 'webhooks.get', { workspace_id: workspaceId, webhook_id: hook.id })).webhook).toMatchObject({ enabled: true });
        await receiver.waitFor('the delivery delivered', async () => (await deliveries(workspaceId, hook.id, { status: 'delivered' })).length === 1);
      } finally {
        receiver.respond(() => 204);
      }
    });

    it('a delivery whose retries are used up is failed, and replay by time sends it again', async () => {
      const workspaceId = await workspace();
      const path = newPath();
      const hook = await subscribe(workspaceId, path);
      const since = new Date(Date.now() - 1000).toISOString();
      receiver.respond((r) => (r.path === path ? 503 : 204));
      try {
        await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'EXHAUSTED', value: 'x' });
        const failed = await receiver.waitFor('the schedule used up', async () => (await deliveries(workspaceId, hook.id, { status: 'failed' }))[0], 120_000);
        // The first attempt and one per step of the schedule.
        expect(failed.attempts).toHaveLength(RETRY_ENV.WEBHOOK_RETRY_SCHEDULE_MS.split(',').length + 1);
        for (const attempt of failed.attempts) expect(attempt).toMatchObject({ status_code: 503 });
        // Failing a delivery does not disable the endpoint (that takes 410, or days of failures).
        expect((await ok(owner, 'webhooks.get', { workspace_id: workspaceId, webhook_id: hook.id })).webhook.enabled).toBe(true);
        const requests = receiver.on(path);
        expect(new Set(requests.map((r) => r.headers['webhook-id'])).size).toBe(1);
        for (const r of requests) expect(verifySignature(hook.secret, r)).toBe(true);
        receiver.respond(() => 204);
        expect(await ok(owner, 'webhooks.replay', { workspace_id: workspaceId, webhook_id: hook.id, since })).toEqual({ replayed: 1 });
        const delivered = await receiver.waitFor('the replayed delivery', () => receiver.on(path).find((r) => r.status === 204));
        expect(delivered.headers['webhook-id']).toBe(requests[0]!.headers['webhook-id']);
        expect(delivered.body).toEqual(requests[0]!.body);
      } finally {
        receiver.respond(() => 204);
      }
    });

    it('a deleted webhook gets nothing more; a webhook of another workspace never hears this one', async () => {
      const workspaceId = await workspace();
      const otherId = await workspace('Elsewhere');
      const deletedPath = newPath();
      const keptPath = newPath();
      const otherPath = newPath();
      const deleted = await subscribe(workspaceId, deletedPath);
      await subscribe(workspaceId, keptPath);
      await subscribe(otherId, otherPath);
      await ok(owner, 'webhooks.delete', { workspace_id: workspaceId, webhook_id: deleted.id });
      await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'HERE', value: 'x' });
      await ok(writer, 'workspace.secrets.set', { workspace_id: otherId, key: 'THERE', value: 'x' });
      const [kept] = await distinct(keptPath, 1);
      const [other] = await distinct(otherPath, 1);
      expect(kept!.body.data).toMatchObject({ workspace_id: workspaceId, key: 'HERE' });
      expect(other!.body.data).toMatchObject({ workspace_id: otherId, key: 'THERE' });
      expect(receiver.on(deletedPath)).toEqual([]);
      expect(receiver.on(keptPath)).toHaveLength(1);
      expect(receiver.on(otherPath)).toHaveLength(1);
    });
  });

  // ---- server-side request forgery -----------------------------------------------------------

  describe('SSRF guard (a hub without HUB_EGRESS_ALLOW_PRIVATE)', () => {
    let guarded: TestHub;
    let agent: Agent;
    let workspaceId: string;

    beforeAll(async () => {
      guarded = await startTestHub(backend);
      agent = await guarded.agent('acme', 'guarded');
      workspaceId = (await guarded.ok(agent.api_key, 'x-hub/workspace.create', { name: 'Guarded' })).workspace.id;
    });
    afterAll(() => guarded?.stop());

    it.each([
      ['loopback', 'http://127.0.0.1:8080/hook'],
      ['loopback by name', 'http://localhost:8080/hook'],
      ['loopback as a decimal number', 'http://2130706433/hook'],
      ['the unspecified address', 'http://0.0.0.0/hook'],
      ['private 10/8', 'http://10.0.0.1/hook'],
      ['private 172.16/12', 'https://172.16.5.4/hook'],
      ['private 192.168/16', 'http://192.168.1.10/hook'],
      ['link-local / cloud metadata', 'http://169.254.169.254/latest/meta-data/'],
      ['carrier-grade NAT 100.64/10', 'http://100.64.0.1/hook'],
      ['IPv6 loopback', 'http://[::1]:8080/hook'],
      ['IPv4-mapped IPv6 loopback', 'http://[::ffff:127.0.0.1]/hook'],
      ['IPv6 unique local', 'http://[fd00::1]/hook'],
      ['IPv6 link-local', 'http://[fe80::1]/hook'],
    ])('refuses %s (%s) with -32602 saying why', async (_label, url) => {
      const reply = await guarded.call(agent.api_key, 'x-hub/webhooks.create', { workspace_id: workspaceId, url });
      expect(reply.body.result).toBeUndefined();
      expect(reply.body.error).toMatchObject({ code: -32602 });
      expect(reply.body.error!.message).toContain('url');
      expect(reply.body.error!.message).toMatch(/private|loopback|link-local|metadata|local|reserved|internal|not allowed|unspecified|forbidden|address/i);
    });

    it('accepts a public address, and nothing refused was created', async () => {
      const { webhook } = await guarded.ok(agent.api_key, 'x-hub/webhooks.create', { workspace_id: workspaceId, url: 'https://93.184.215.14/hook' });
      expect(webhook.url).toBe('https://93.184.215.14/hook');
      const { webhooks } = await guarded.ok(agent.api_key, 'x-hub/webhooks.list', { workspace_id: workspaceId });
      expect(webhooks.map((w: any) => w.id)).toEqual([webhook.id]);
      await guarded.ok(agent.api_key, 'x-hub/webhooks.delete', { workspace_id: workspaceId, webhook_id: webhook.id });
    });
  });

  // ---- restart ------------------------------------------------------------------------------

  describe('a hub stopped and restarted mid-burst on the same database', () => {
    it('loses nothing: every event arrives, in order, duplicates only under the same webhook-id', async () => {
      const provisioned = await backend.provision();
      const same = pinned(provisioned, backend.name);
      const dataDir = await mkdtemp(join(tmpdir(), 'agenthub-webhooks-restart-'));
      const env = {
        HUB_DATA_DIR: dataDir,
        HUB_ADMIN_TOKEN: `restart-admin-${randomBytes(12).toString('hex')}`,
        HUB_KEKS: `v1:${randomBytes(32).toString('base64')}`,
        HUB_EGRESS_ALLOW_PRIVATE: 'true',
        HUB_SHUTDOWN_GRACE_MS: '2000',
        WEBHOOK_TIMEOUT_MS: '5000',
        ...RETRY_ENV,
      };
      const slow = await WebhookReceiver.start();
      // Until the first hub is stopped the subscriber holds every request past the shutdown grace,
      // so the burst is certainly mid-way when the hub stops; afterwards it is merely slow.
      let held = true;
      slow.respond(() => (held ? { status: 204, delayMs: 8_000 } : { status: 204, delayMs: 150 }));
      let first: TestHub | undefined;
      let second: TestHub | undefined;
      try {
        first = await startTestHub(same, env);
        const agent = await first.agent('acme', 'restarter');
        const workspaceId = (await first.ok(agent.api_key, 'x-hub/workspace.create', { name: 'Restarted' })).workspace.id;
        const { webhook } = await first.ok(agent.api_key, 'x-hub/webhooks.create', { workspace_id: workspaceId, url: slow.url('/restart') });
        const keys: string[] = [];
        for (let i = 1; i <= 12; i += 1) {
          keys.push(`BURST_${i}`);
          await first.ok(agent.api_key, 'x-hub/workspace.secrets.set', { workspace_id: workspaceId, key: `BURST_${i}`, value: `v${i}` });
        }
        await slow.waitFor('the first delivery of the burst in flight', () => slow.on('/restart').length > 0);
        await first.stop();
        first = undefined;
        held = false;
        const beforeRestart = firstOfEach(slow.on('/restart'));
        // Stopped mid-burst: the first event had reached the subscriber, the last twelfth had not.
        expect(beforeRestart.length).toBeGreaterThanOrEqual(1);
        expect(beforeRestart.length).toBeLessThan(12);
        expect(beforeRestart[0]!.body.data.key).toBe('BURST_1');

        second = await startTestHub(same, env);
        for (let i = 13; i <= 15; i += 1) {
          keys.push(`BURST_${i}`);
          await second.ok(agent.api_key, 'x-hub/workspace.secrets.set', { workspace_id: workspaceId, key: `BURST_${i}`, value: `v${i}` });
        }
        // An attempt cut short by the stop is given back and sent again by the second hub; if a
        // claim were left to lapse instead (the attempt timeout plus 30 s), this waits for it.
        const firsts = await distinct('/restart', keys.length, slow, 150_000);
        expect(firsts.map((r) => r.body.data.key)).toEqual(keys);
        const all = slow.on('/restart');
        expectDuplicatesIdentical(all);
        expect(new Set(all.map((r) => r.headers['webhook-id'])).size).toBe(keys.length);
        for (const r of all) expect(verifySignature(webhook.secret, r)).toBe(true);
        const settled = await slow.waitFor('every delivery delivered after the restart', async () => {
          const { deliveries: list } = await second!.ok(agent.api_key, 'x-hub/webhooks.deliveries', { workspace_id: workspaceId, webhook_id: webhook.id });
          return list.length === keys.length && list.every((d: any) => d.status === 'delivered') && list;
        });
        expect(settled).toHaveLength(keys.length);
      } finally {
        await first?.stop().catch(() => undefined);
        await second?.stop().catch(() => undefined);
        await slow.close();
        await provisioned.dispose();
        await rm(dataDir, { recursive: true, force: true });
      }
    }, 300_000);
  });
});

import { workspacev1 } from '@agenthub/proto';
import { Reason, type ResolvedAddress } from '@agenthub/runtime';
import { backends, type Backend } from '@agenthub/testing';
import { EVENT_TYPES } from '../src/index.js';
import { failure, startReceiver, startStack, type Stack, type TestAgent } from './harness.js';

const { Role } = workspacev1;

const denied = { reason: Reason.ACCESS_DENIED, message: 'Access denied', field: '' };
const adminRequired = { reason: Reason.PERMISSION_REQUIRED, message: 'Admin access required', field: '' };
const workspaceNotFound = { reason: Reason.NOT_FOUND, message: 'Workspace not found', field: '' };
const webhookNotFound = { reason: Reason.NOT_FOUND, message: 'Webhook not found', field: '' };
const invalid = (field: string, problem: string) => ({ reason: Reason.INVALID_PARAMS, message: `Invalid params: ${field} ${problem}`, field });

const MAX_WEBHOOKS = 3;

describe.each(backends().map((b) => [b.name, b] as const))('webhooks (%s)', (_name, backend: Backend) => {
  let stack: Stack;
  let owner: TestAgent;
  let admin: TestAgent;
  let writer: TestAgent;
  let outsider: TestAgent;

  beforeAll(async () => {
    stack = await startStack(backend, { limits: { maxWebhooksPerWorkspace: MAX_WEBHOOKS } });
    owner = await stack.agent('acme', 'Owner');
    admin = await stack.agent('acme', 'Admin');
    writer = await stack.agent('acme', 'Writer');
    outsider = await stack.agent('acme', 'Outsider');
  });
  afterAll(async () => {
    await stack?.stop();
  });

  const staffed = () => stack.workspaceWith(owner, [[admin, Role.ADMIN], [writer, Role.WRITE]]);
  const create = (who: TestAgent, workspaceId: string, extra: { url?: string; events?: string[]; description?: string } = {}) =>
    stack.events.createWebhook({ workspaceId, url: extra.url ?? 'https://hooks.example.com/in', events: extra.events ?? [], description: extra.description ?? '' }, who.as);

  test('create returns the webhook with a whsec_ secret of 32 random bytes; get and list never show it', async () => {
    const workspaceId = await staffed();
    const created = await create(admin, workspaceId, { events: ['workspace.memory.stored', 'workspace.created'], description: 'CI' });
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/);
    expect(Buffer.from(created.secret.slice('whsec_'.length), 'base64')).toHaveLength(32);
    const webhook = created.webhook!;
    expect(webhook).toMatchObject({
      workspaceId,
      url: 'https://hooks.example.com/in',
      events: ['workspace.memory.stored', 'workspace.created'],
      description: 'CI',
      enabled: true,
      disabledReason: '',
      disabledAt: 0n,
    });
    expect(webhook.id).toMatch(/^wh_[a-z0-9]{20}$/);
    expect(webhook.createdAt).toBe(BigInt(stack.clock.now));

    const got = await stack.events.getWebhook({ workspaceId, webhookId: webhook.id }, owner.as);
    expect(got.webhook).toEqual(webhook);
    expect(JSON.stringify(got, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))).not.toContain(created.secret.slice(6, 20));
    const second = await create(owner, workspaceId);
    const listed = await stack.events.listWebhooks({ workspaceId }, admin.as);
    expect(listed.webhooks.map((w) => w.id)).toEqual([webhook.id, second.webhook!.id]);
    expect(second.webhook!.events).toEqual([]);
    expect(second.secret).not.toBe(created.secret);
  });

  test('delete removes it; then get, delete and rotate say Webhook not found', async () => {
    const workspaceId = await staffed();
    const { webhook } = await create(owner, workspaceId);
    expect(await stack.events.deleteWebhook({ workspaceId, webhookId: webhook!.id }, admin.as)).toEqual(
      expect.objectContaining({ webhookId: webhook!.id }),
    );
    const ref = { workspaceId, webhookId: webhook!.id };
    expect(await failure(stack.events.getWebhook(ref, owner.as))).toEqual(webhookNotFound);
    expect(await failure(stack.events.deleteWebhook(ref, owner.as))).toEqual(webhookNotFound);
    expect(await failure(stack.events.rotateWebhookSecret(ref, owner.as))).toEqual(webhookNotFound);
    expect(await failure(stack.events.getWebhook({ workspaceId, webhookId: 'wh_unknown' }, owner.as))).toEqual(webhookNotFound);
    expect(await failure(stack.events.getWebhook({ workspaceId, webhookId: 'not-an-id' }, owner.as))).toEqual(webhookNotFound);
    expect((await stack.events.listWebhooks({ workspaceId }, owner.as)).webhooks).toEqual([]);
  });

  test('a webhook of another workspace is not found through this one', async () => {
    const mine = await staffed();
    const other = await staffed();
    const { webhook } = await create(owner, other);
    expect(await failure(stack.events.getWebhook({ workspaceId: mine, webhookId: webhook!.id }, owner.as))).toEqual(webhookNotFound);
    expect(await failure(stack.events.deleteWebhook({ workspaceId: mine, webhookId: webhook!.id }, owner.as))).toEqual(webhookNotFound);
  });

  test('admins only: a writer gets Admin access required, a non-member Access denied, an unknown workspace Workspace not found', async () => {
    const workspaceId = await staffed();
    const { webhook } = await create(owner, workspaceId);
    const ref = { workspaceId, webhookId: webhook!.id };
    for (const [who, expected] of [[writer, adminRequired], [outsider, denied]] as const) {
      expect(await failure(create(who, workspaceId))).toEqual(expected);
      expect(await failure(stack.events.listWebhooks({ workspaceId }, who.as))).toEqual(expected);
      expect(await failure(stack.events.getWebhook(ref, who.as))).toEqual(expected);
      expect(await failure(stack.events.deleteWebhook(ref, who.as))).toEqual(expected);
      expect(await failure(stack.events.rotateWebhookSecret(ref, who.as))).toEqual(expected);
      expect(await failure(stack.events.testWebhook(ref, who.as))).toEqual(expected);
      expect(await failure(stack.events.listDeliveries({ ...ref, limit: 0 }, who.as))).toEqual(expected);
      expect(await failure(stack.events.replayDeliveries({ ...ref, target: { case: 'eventId', value: 'evt_x' } }, who.as))).toEqual(expected);
    }
    const gone = { workspaceId: 'ws_doesnotexist', webhookId: webhook!.id };
    expect(await failure(create(owner, gone.workspaceId))).toEqual(workspaceNotFound);
    expect(await failure(stack.events.getWebhook(gone, owner.as))).toEqual(workspaceNotFound);
    // Only the admin's own webhook is still there.
    expect((await stack.events.listWebhooks({ workspaceId }, admin.as)).webhooks).toHaveLength(1);
  });

  test('bad params are named before any look-up: events[i], url, description, workspace_id', async () => {
    const workspaceId = 'ws_doesnotexist';
    expect(await failure(create(owner, workspaceId, { events: ['workspace.created', 'workspace.nope'] }))).toEqual(
      invalid('events[1]', `must be one of ${EVENT_TYPES.join(', ')}`),
    );
    for (const [url, problem] of [
      ['', 'is required'],
      ['not a url', 'must be an absolute http or https URL'],
      ['ftp://hooks.example.com/', 'must use http or https'],
      ['file:///etc/passwd', 'must use http or https'],
      ['https://user:pass@hooks.example.com/', 'must not contain user information'],
      [`https://hooks.example.com/${'a'.repeat(2048)}`, 'must be at most 2048 characters'],
    ] as const) {
      expect(await failure(create(owner, workspaceId, { url }))).toEqual(invalid('url', problem));
    }
    expect(await failure(create(owner, workspaceId, { description: 'd'.repeat(501) }))).toEqual(invalid('description', 'must be at most 500 characters'));
    expect(await failure(stack.events.listWebhooks({ workspaceId: 'nope' }, owner.as))).toEqual(
      invalid('workspace_id', 'must be a workspace id of the form ws_…'),
    );
  });

  test(`a workspace holds at most ${MAX_WEBHOOKS} webhooks; deleting one makes room`, async () => {
    const workspaceId = await staffed();
    const made = [];
    for (let i = 0; i < MAX_WEBHOOKS; i += 1) made.push(await create(owner, workspaceId));
    expect(await failure(create(owner, workspaceId))).toEqual({
      reason: Reason.QUOTA_EXCEEDED,
      message: `Quota exceeded: a workspace holds at most ${MAX_WEBHOOKS} webhooks; delete one first`,
      field: 'webhooks_per_workspace',
    });
    await stack.events.deleteWebhook({ workspaceId, webhookId: made[0]!.webhook!.id }, owner.as);
    await create(owner, workspaceId);
  });

  test(`an agent holds at most ${MAX_WEBHOOKS} agent-wide webhooks; another agent has its own; deleting one makes room`, async () => {
    const [hooker, other] = await Promise.all([stack.agent('acme', 'Hooker'), stack.agent('acme', 'Other hooker')]);
    const made = [];
    for (let i = 0; i < MAX_WEBHOOKS; i += 1) made.push(await create(hooker, ''));
    expect(await failure(create(hooker, ''))).toEqual({
      reason: Reason.QUOTA_EXCEEDED,
      message: `Quota exceeded: an agent holds at most ${MAX_WEBHOOKS} agent-wide webhooks; delete one first`,
      field: 'webhooks_per_agent',
    });
    await create(other, '');
    await stack.events.deleteWebhook({ workspaceId: '', webhookId: made[0]!.webhook!.id }, hooker.as);
    await create(hooker, '');
  });

  test('rotate_secret returns a new secret and when the previous one stops signing', async () => {
    const workspaceId = await staffed();
    const created = await create(owner, workspaceId);
    const rotated = await stack.events.rotateWebhookSecret({ workspaceId, webhookId: created.webhook!.id }, admin.as);
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(created.secret);
    expect(rotated.webhook).toEqual(created.webhook);
    expect(rotated.previousSecretExpiresAt).toBe(BigInt(stack.clock.now + 24 * 3_600_000));
  });
});

/** Host names the SSRF suite resolves, instead of DNS. */
const DNS: Record<string, ResolvedAddress[]> = {
  'public.example': [{ address: '93.184.216.34', family: 4 }],
  'public6.example': [{ address: '2606:2800:220:1:248:1893:25c8:1946', family: 6 }],
  'private.example': [{ address: '10.0.0.5', family: 4 }],
  'metadata.example': [{ address: '169.254.169.254', family: 4 }],
  'mixed.example': [{ address: '93.184.216.34', family: 4 }, { address: '127.0.0.1', family: 4 }],
  'ula.example': [{ address: 'fd00::5', family: 6 }],
  'rebind.example': [{ address: '93.184.216.34', family: 4 }],
};

const resolve = async (host: string) => {
  const found = DNS[host];
  if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  return found;
};

describe.each(backends().map((b) => [b.name, b] as const))('webhook targets and SSRF (%s)', (_name, backend: Backend) => {
  let stack: Stack;
  let owner: TestAgent;
  let workspaceId: string;

  beforeAll(async () => {
    stack = await startStack(backend, { allowPrivate: false, resolve, limits: { maxWebhooksPerWorkspace: 100 } });
    owner = await stack.agent('acme', 'Owner');
    workspaceId = await stack.workspaceWith(owner);
  });
  afterAll(async () => {
    await stack?.stop();
  });

  const create = (url: string) => stack.events.createWebhook({ workspaceId, url, events: [], description: '' }, owner.as);

  test.each([
    ['http://10.1.2.3/', 'private'],
    ['http://172.16.0.1/', 'private'],
    ['http://172.31.255.255/', 'private'],
    ['http://192.168.1.1/', 'private'],
    ['http://127.0.0.1:8080/', 'loopback'],
    ['http://127.1/', 'loopback'],
    ['http://2130706433/', 'loopback'],
    ['http://0x7f000001/', 'loopback'],
    ['http://169.254.169.254/latest/meta-data/', 'link-local (cloud metadata)'],
    ['http://169.254.1.1/', 'link-local (cloud metadata)'],
    ['http://100.64.0.1/', 'carrier-grade NAT'],
    ['http://100.127.255.254/', 'carrier-grade NAT'],
    ['http://0.0.0.0/', 'unspecified'],
    ['http://0.1.2.3/', 'unspecified'],
    ['http://224.0.0.1/', 'multicast'],
    ['http://239.255.255.250/', 'multicast'],
    ['http://255.255.255.255/', 'reserved'],
    ['http://[::1]/', 'loopback'],
    ['http://[::]/', 'unspecified'],
    ['http://[fc00::1]/', 'private'],
    ['http://[fd12:3456::1]/', 'private'],
    ['http://[fe80::1]/', 'link-local'],
    ['http://[ff02::1]/', 'multicast'],
    ['http://[::ffff:127.0.0.1]/', 'loopback'],
    ['http://[::ffff:10.0.0.1]/', 'private'],
    ['http://[::ffff:169.254.169.254]/', 'link-local (cloud metadata)'],
    ['http://[64:ff9b::a9fe:a9fe]/', 'link-local (cloud metadata)'],
    // Outside global unicast too (issue 12: the policy is an allow-list now).
    ['http://192.0.0.8/', 'reserved'],
    ['http://198.18.0.1/', 'reserved'],
    ['http://198.19.255.254/', 'reserved'],
    ['http://[fec0::1]/', 'site-local'],
    ['http://[2002:7f00:1::1]/', '6to4'],
    ['http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/', 'Teredo'],
    ['http://[64:ff9b:1::a00:1]/', 'local NAT64'],
    ['http://[100::1]/', 'discard-only'],
    ['http://[::127.0.0.1]/', 'reserved'],
  ])('%s names a %s address and is refused', async (url, label) => {
    expect(await failure(create(url))).toEqual(invalid('url', `is refused: it names a ${label} address`));
  });

  test.each([
    ['https://private.example/hook', 'private'],
    ['https://metadata.example/', 'link-local (cloud metadata)'],
    ['https://mixed.example/', 'loopback'],
    ['https://ula.example/', 'private'],
  ])('%s resolves to a %s address and is refused', async (url, label) => {
    expect(await failure(create(url))).toEqual(invalid('url', `is refused: its host resolves to a ${label} address`));
  });

  test('a host that does not resolve is refused; public hosts and addresses are accepted', async () => {
    expect(await failure(create('https://nowhere.example/'))).toEqual(invalid('url', 'is refused: its host does not resolve'));
    for (const url of ['https://public.example/hook', 'https://public6.example/', 'http://93.184.216.34/', 'https://[2606:4700::1111]/', 'http://100.128.0.1/', 'http://172.32.0.1/']) {
      expect((await create(url)).webhook?.url).toBe(new URL(url).toString());
    }
  });

  test('DNS rebinding: the host is checked again at send time and the attempt is refused', async () => {
    DNS['rebind.example'] = [{ address: '93.184.216.34', family: 4 }];
    const { webhook } = await create('http://rebind.example:9/hook');
    DNS['rebind.example'] = [{ address: '127.0.0.1', family: 4 }];
    const { delivery } = await stack.events.testWebhook({ workspaceId, webhookId: webhook!.id }, owner.as);
    expect(delivery).toMatchObject({ delivered: false, statusCode: 0, error: "The endpoint's address is refused: the host resolves to a loopback address" });
  });
});

describe.each(backends().map((b) => [b.name, b] as const))('private targets allowed by HUB_EGRESS_ALLOW_PRIVATE (%s)', (_name, backend: Backend) => {
  let stack: Stack;
  afterAll(async () => {
    await stack?.stop();
  });

  test('loopback, private and metadata addresses are accepted', async () => {
    stack = await startStack(backend, { allowPrivate: true, resolve, limits: { maxWebhooksPerWorkspace: 100 } });
    const owner = await stack.agent('acme', 'Owner');
    const workspaceId = await stack.workspaceWith(owner);
    for (const url of ['http://127.0.0.1:8080/', 'http://[::1]/', 'http://10.1.2.3/', 'http://169.254.169.254/', 'https://private.example/']) {
      const { webhook } = await stack.events.createWebhook({ workspaceId, url, events: [], description: '' }, owner.as);
      expect(webhook?.url).toBe(url);
    }
    // A host name is connected to at the address the guarded lookup resolved.
    const receiver = await startReceiver();
    try {
      DNS['receiver.example'] = [{ address: '127.0.0.1', family: 4 }];
      const url = receiver.url.replace('127.0.0.1', 'receiver.example');
      const { webhook } = await stack.events.createWebhook({ workspaceId, url, events: [], description: '' }, owner.as);
      const { delivery } = await stack.events.testWebhook({ workspaceId, webhookId: webhook!.id }, owner.as);
      expect(delivery).toMatchObject({ delivered: true, statusCode: 204 });
      expect(receiver.received[0]!.headers.host).toBe(new URL(url).host);
    } finally {
      await receiver.close();
    }
    // Syntax still applies.
    expect(await failure(stack.events.createWebhook({ workspaceId, url: 'gopher://127.0.0.1/', events: [], description: '' }, owner.as))).toEqual(
      invalid('url', 'must use http or https'),
    );
  });
});

import { burstUntilGrouped, hubModes, withInproc, startTestHub, type Agent, type RpcReply, type TestHub } from './harness.js';

/**
 * Workspaces, members and access grants end to end: real HTTP into the gateway, real gRPC to
 * the identity and workspace services, on embedded PGlite and on real PostgreSQL + Redis.
 * Codes and messages are the interface specification's (Errors); the check order is DESIGN.md's
 * (parameters → workspace exists → access → role → operation rules).
 */

const UNKNOWN_WS = 'ws_doesnotexist0000000';

type Outcome = 'ok' | { code: number; message: string };
const ACCESS_DENIED = { code: -32100, message: 'Access denied' } as const;
const NOT_FOUND = { code: -32101, message: 'Workspace not found' } as const;
const ADMIN_REQUIRED = { code: -32102, message: 'Admin access required' } as const;
const OWNER_REQUIRED = { code: -32102, message: 'Owner access required' } as const;
const OWNER_NOT_REMOVABLE = { code: -32103, message: 'Cannot remove workspace owner' } as const;

describe.each(withInproc(hubModes()).map((m) => [m.name, m] as const))('workspaces over HTTP (%s)', (_name, backend) => {
  let hub: TestHub;

  beforeAll(async () => {
    hub = await startTestHub(backend);
  });
  afterAll(() => hub?.stop());

  // ---- small helpers ------------------------------------------------------------------------

  let seq = 0;
  /** A fresh agent, so tests never share memberships or grants. */
  async function agent(tenant: string, label = 'agent'): Promise<Agent & { name: string }> {
    const name = `${label}-${++seq}`;
    return { ...(await hub.agent(tenant, name)), name };
  }

  const call = (who: Agent, method: string, params: unknown = {}): Promise<RpcReply> => hub.call(who.api_key, `x-hub/${method}`, params);
  const ok = (who: Agent, method: string, params: unknown = {}) => hub.ok(who.api_key, `x-hub/${method}`, params);

  /** The call failed with exactly this JSON-RPC error code and message. */
  async function expectError(reply: Promise<RpcReply> | RpcReply, code: number, message?: string) {
    const { status, body } = await reply;
    expect(body.result).toBeUndefined();
    expect(body.error).toMatchObject({ code, ...(message !== undefined ? { message } : {}) });
    expect(status).toBe(200);
    return body.error!;
  }

  /** The call failed with -32602 naming `field` in error.data.field and in the message. */
  async function expectInvalid(reply: Promise<RpcReply>, field: string) {
    const error = await expectError(reply, -32602);
    expect(error.data?.field).toBe(field);
    expect(error.message).toContain(field);
    return error;
  }

  async function createWorkspace(owner: Agent, name = 'Project', description?: string) {
    const { workspace } = await ok(owner, 'workspace.create', { name, ...(description !== undefined ? { description } : {}) });
    return workspace as { id: string; name: string; description: string; owner_agent_id: string; created_at: number };
  }

  const addMember = (admin: Agent, workspaceId: string, member: Agent, role: string) =>
    ok(admin, 'workspace.members.add', { workspace_id: workspaceId, agent_id: member.agent_id, role });

  const memberIds = async (who: Agent, workspaceId: string) =>
    ((await ok(who, 'workspace.members.list', { workspace_id: workspaceId })).members as { agent_id: string }[]).map((m) => m.agent_id);

  const listedIds = async (who: Agent) => ((await ok(who, 'workspace.list')).workspaces as { id: string }[]).map((w) => w.id);

  /** `requester` asks, `target` approves; returns the approved grant. */
  async function approvedGrant(requester: Agent, target: Agent) {
    const { grant } = await ok(requester, 'grants.request', { agent_id: target.agent_id });
    return (await ok(target, 'grants.approve', { grant_id: grant.id })).grant as { id: string; status: string };
  }

  function expectRecent(timestamp: unknown) {
    expect(typeof timestamp).toBe('number');
    expect(Number.isInteger(timestamp)).toBe(true);
    expect(Math.abs((timestamp as number) - Date.now())).toBeLessThan(60_000);
  }

  // ---- workspace lifecycle ------------------------------------------------------------------

  describe('create, get, list, delete', () => {
    it('creates a workspace owned by the caller, with a ws_ id and an epoch-ms created_at', async () => {
      const owner = await agent('acme', 'owner');
      const reply = await call(owner, 'workspace.create', { name: 'Launch plan', description: 'Everything about the launch' });
      expect(reply.status).toBe(200);
      const { workspace } = reply.body.result;
      expect(workspace).toEqual({
        id: expect.stringMatching(/^ws_[a-z0-9]+$/),
        name: 'Launch plan',
        description: 'Everything about the launch',
        owner_agent_id: owner.agent_id,
        created_at: expect.any(Number),
      });
      expectRecent(workspace.created_at);
    });

    it('accepts a creation without description and stores it as ""', async () => {
      const owner = await agent('acme', 'owner');
      const workspace = await createWorkspace(owner, 'No description');
      expect(workspace.description).toBe('');
      const { workspace: fetched } = await ok(owner, 'workspace.get', { workspace_id: workspace.id });
      expect(fetched.description).toBe('');
    });

    it('trims the name and counts its length in characters (1 to 200)', async () => {
      const owner = await agent('acme', 'owner');
      expect((await createWorkspace(owner, '  Padded  ')).name).toBe('Padded');
      expect((await createWorkspace(owner, 'n'.repeat(200))).name).toHaveLength(200);
      await expectInvalid(call(owner, 'workspace.create', { name: 'n'.repeat(201) }), 'name');
      await expectInvalid(call(owner, 'workspace.create', { name: 'ok', description: 'd'.repeat(2001) }), 'description');
      await expectInvalid(call(owner, 'workspace.create', { name: 'ok', description: 7 }), 'description');
    });

    // The workspace service counts characters as code points (services/workspace/src/validate.ts);
    // a name of 200 emoji is 200 characters and must be accepted.
    it('accepts a name of 200 characters outside the Basic Multilingual Plane', async () => {
      const owner = await agent('acme', 'owner');
      const name = '🚀'.repeat(200);
      const reply = await call(owner, 'workspace.create', { name });
      expect(reply.body.error).toBeUndefined();
      expect(reply.body.result.workspace.name).toBe(name);
      await expectInvalid(call(owner, 'workspace.create', { name: '🚀'.repeat(201) }), 'name');
    });

    it('gives unique ids to workspaces of the same name', async () => {
      const owner = await agent('acme', 'owner');
      const a = await createWorkspace(owner, 'Same');
      const b = await createWorkspace(owner, 'Same');
      expect(a.id).not.toBe(b.id);
    });

    it('gets the workspace with the caller’s role and the member count', async () => {
      const owner = await agent('acme', 'owner');
      const reader = await agent('acme', 'reader');
      const workspace = await createWorkspace(owner, 'Docs', 'Shared docs');

      expect(await ok(owner, 'workspace.get', { workspace_id: workspace.id })).toEqual({ workspace, role: 'admin', member_count: 1 });

      await addMember(owner, workspace.id, reader, 'read');
      expect(await ok(reader, 'workspace.get', { workspace_id: workspace.id })).toEqual({ workspace, role: 'read', member_count: 2 });
    });

    it('answers concurrent gets that share round trips (GetWorkspaces) each for its own caller, and a removed member fails on the very next one', async () => {
      const owner = await agent('acme', 'owner');
      const reader = await agent('acme', 'reader');
      const outsider = await agent('acme', 'outsider');
      const workspace = await createWorkspace(owner, 'Shared');
      await addMember(owner, workspace.id, reader, 'read');
      const readers = [owner, reader, outsider];
      const burst = () => Promise.all(Array.from({ length: 48 }, (_, i) => call(readers[i % 3]!, 'workspace.get', { workspace_id: workspace.id })));

      const groups = await burstUntilGrouped(hub, 'GetWorkspaces', async () => {
        (await burst()).forEach((reply, i) => {
          if (i % 3 === 0) expect(reply.body.result).toEqual({ workspace, role: 'admin', member_count: 2 });
          else if (i % 3 === 1) expect(reply.body.result).toEqual({ workspace, role: 'read', member_count: 2 });
          else expect(reply.body.error).toMatchObject(ACCESS_DENIED);
        });
      });
      // In-process calls (HUB_TRANSPORT=inproc) have no round trips to share.
      if (_name !== 'inproc') expect(groups.after).toBeGreaterThan(groups.before);

      await ok(owner, 'workspace.members.remove', { workspace_id: workspace.id, agent_id: reader.agent_id });
      (await burst()).forEach((reply, i) => {
        if (i % 3 === 0) expect(reply.body.result).toEqual({ workspace, role: 'admin', member_count: 1 });
        else expect(reply.body.error).toMatchObject(ACCESS_DENIED);
      });
    });

    it('lists only the caller’s workspaces, each with the caller’s role', async () => {
      const owner = await agent('acme', 'owner');
      const writer = await agent('acme', 'writer');
      const stranger = await agent('acme', 'stranger');
      const mine = await createWorkspace(owner, 'Mine');
      const shared = await createWorkspace(owner, 'Shared');
      const theirs = await createWorkspace(stranger, 'Theirs');
      await addMember(owner, shared.id, writer, 'write');

      const ownerList = await ok(owner, 'workspace.list');
      expect(ownerList.count).toBe(2);
      expect(ownerList.workspaces).toHaveLength(2);
      expect(ownerList.workspaces).toEqual(expect.arrayContaining([
        { ...mine, role: 'admin' },
        { ...shared, role: 'admin' },
      ]));

      expect((await ok(writer, 'workspace.list')).workspaces).toEqual([{ ...shared, role: 'write' }]);
      expect(await listedIds(stranger)).toEqual([theirs.id]);
      expect(await ok(await agent('acme', 'new'), 'workspace.list')).toEqual({ workspaces: [], count: 0 });
    });

    it('deletes for the owner; afterwards the workspace is not found for anyone', async () => {
      const owner = await agent('acme', 'owner');
      const member = await agent('acme', 'member');
      const workspace = await createWorkspace(owner, 'Short-lived');
      await addMember(owner, workspace.id, member, 'admin');

      expect(await ok(owner, 'workspace.delete', { workspace_id: workspace.id })).toEqual({ deleted: true, workspace_id: workspace.id });

      await expectError(call(owner, 'workspace.get', { workspace_id: workspace.id }), NOT_FOUND.code, NOT_FOUND.message);
      await expectError(call(member, 'workspace.members.list', { workspace_id: workspace.id }), NOT_FOUND.code, NOT_FOUND.message);
      await expectError(call(owner, 'workspace.delete', { workspace_id: workspace.id }), NOT_FOUND.code, NOT_FOUND.message);
      expect(await listedIds(owner)).not.toContain(workspace.id);
      expect(await listedIds(member)).not.toContain(workspace.id);
    });
  });

  // ---- members and types --------------------------------------------------------------------

  describe('members', () => {
    it('adds a member and lists everyone with agent_id, agent_name, role and added_at', async () => {
      const owner = await agent('acme', 'owner');
      const writer = await agent('acme', 'writer');
      const workspace = await createWorkspace(owner);

      const added = await addMember(owner, workspace.id, writer, 'write');
      expect(added.created).toBe(true);
      expect(added.member).toEqual({ agent_id: writer.agent_id, agent_name: writer.name, role: 'write', added_at: expect.any(Number) });
      expectRecent(added.member.added_at);

      const { members, count } = await ok(writer, 'workspace.members.list', { workspace_id: workspace.id });
      expect(count).toBe(2);
      expect(members).toEqual([
        { agent_id: owner.agent_id, agent_name: owner.name, role: 'admin', added_at: expect.any(Number) },
        added.member,
      ]);
      expect(members[0].added_at).toBeLessThanOrEqual(members[1].added_at);
    });

    it('changes the role when the agent is added again, keeping added_at', async () => {
      const owner = await agent('acme', 'owner');
      const member = await agent('acme', 'member');
      const workspace = await createWorkspace(owner);
      const first = await addMember(owner, workspace.id, member, 'read');

      const again = await addMember(owner, workspace.id, member, 'admin');
      expect(again.created).toBe(false);
      expect(again.member).toEqual({ ...first.member, role: 'admin' });
      expect((await ok(member, 'workspace.get', { workspace_id: workspace.id })).role).toBe('admin');
    });

    it('removes a member, who then loses access', async () => {
      const owner = await agent('acme', 'owner');
      const member = await agent('acme', 'member');
      const workspace = await createWorkspace(owner);
      await addMember(owner, workspace.id, member, 'write');

      expect(await ok(owner, 'workspace.members.remove', { workspace_id: workspace.id, agent_id: member.agent_id })).toEqual({
        removed: true,
        workspace_id: workspace.id,
        agent_id: member.agent_id,
      });
      expect(await memberIds(owner, workspace.id)).toEqual([owner.agent_id]);
      await expectError(call(member, 'workspace.get', { workspace_id: workspace.id }), ACCESS_DENIED.code, ACCESS_DENIED.message);
      expect(await listedIds(member)).not.toContain(workspace.id);
    });

    it('refuses to remove the owner, whoever asks', async () => {
      const owner = await agent('acme', 'owner');
      const admin = await agent('acme', 'admin');
      const workspace = await createWorkspace(owner);
      await addMember(owner, workspace.id, admin, 'admin');

      for (const who of [owner, admin]) {
        await expectError(
          call(who, 'workspace.members.remove', { workspace_id: workspace.id, agent_id: owner.agent_id }),
          OWNER_NOT_REMOVABLE.code,
          OWNER_NOT_REMOVABLE.message,
        );
      }
      expect(await memberIds(owner, workspace.id)).toContain(owner.agent_id);
    });

    it('refuses to demote the owner', async () => {
      const owner = await agent('acme', 'owner');
      const workspace = await createWorkspace(owner);
      await expectError(
        call(owner, 'workspace.members.add', { workspace_id: workspace.id, agent_id: owner.agent_id, role: 'read' }),
        -32103,
        "Cannot change the workspace owner's role",
      );
      expect((await ok(owner, 'workspace.get', { workspace_id: workspace.id })).role).toBe('admin');
    });

    it('reports unknown agents and non-members', async () => {
      const owner = await agent('acme', 'owner');
      const workspace = await createWorkspace(owner);
      await expectError(call(owner, 'workspace.members.add', { workspace_id: workspace.id, agent_id: 'agt_nobody', role: 'read' }), -32101, 'Agent not found');
      const outsider = await agent('acme', 'outsider');
      await expectError(call(owner, 'workspace.members.remove', { workspace_id: workspace.id, agent_id: outsider.agent_id }), -32101, 'Member not found');
    });

    it('returns the six memory types of the specification, in its order', async () => {
      const anyone = await agent('acme', 'anyone');
      const result = await ok(anyone, 'workspace.types');
      expect(result.types).toEqual(['fact', 'decision', 'preference', 'todo', 'context', 'reference']);
      expect(result.descriptions).toMatchObject({ fact: 'Objective information.', reference: 'Links and resources.' });
    });
  });

  // ---- role matrix --------------------------------------------------------------------------

  describe('role matrix', () => {
    type Actor = 'owner' | 'admin' | 'write' | 'read' | 'non-member (same tenant)' | 'non-member (other tenant)';
    type Operation = 'get' | 'members.list' | 'members.add' | 'members.remove' | 'delete';

    const OK = 'ok' as const;
    const DENIED = ACCESS_DENIED;
    // What each actor gets from each operation on a workspace owned by an acme agent.
    const matrix: Record<Actor, Record<Operation, Outcome>> = {
      owner: { get: OK, 'members.list': OK, 'members.add': OK, 'members.remove': OK, delete: OK },
      admin: { get: OK, 'members.list': OK, 'members.add': OK, 'members.remove': OK, delete: OWNER_REQUIRED },
      write: { get: OK, 'members.list': OK, 'members.add': ADMIN_REQUIRED, 'members.remove': ADMIN_REQUIRED, delete: OWNER_REQUIRED },
      read: { get: OK, 'members.list': OK, 'members.add': ADMIN_REQUIRED, 'members.remove': ADMIN_REQUIRED, delete: OWNER_REQUIRED },
      'non-member (same tenant)': { get: DENIED, 'members.list': DENIED, 'members.add': DENIED, 'members.remove': DENIED, delete: DENIED },
      'non-member (other tenant)': { get: DENIED, 'members.list': DENIED, 'members.add': DENIED, 'members.remove': DENIED, delete: DENIED },
    };

    const cases = Object.entries(matrix).flatMap(([actor, row]) =>
      Object.entries(row).map(([operation, outcome]) => [actor as Actor, operation as Operation, outcome] as const),
    );

    /** A fresh workspace of an acme owner with one read member (`bystander`) to remove, and the actor in place. */
    async function arrange(actor: Actor) {
      const owner = await agent('acme', 'owner');
      const bystander = await agent('acme', 'bystander');
      const newcomer = await agent('acme', 'newcomer');
      const workspace = await createWorkspace(owner, 'Matrix');
      await addMember(owner, workspace.id, bystander, 'read');
      let caller = owner;
      if (actor === 'admin' || actor === 'write' || actor === 'read') {
        caller = await agent('acme', actor);
        await addMember(owner, workspace.id, caller, actor);
      } else if (actor === 'non-member (same tenant)') {
        caller = await agent('acme', 'outsider');
      } else if (actor === 'non-member (other tenant)') {
        caller = await agent('globex', 'outsider');
      }
      return { owner, bystander, newcomer, workspace, caller };
    }

    it.each(cases)('%s → %s: %j', async (actor, operation, outcome) => {
      const { owner, bystander, newcomer, workspace, caller } = await arrange(actor);
      const params: Record<Operation, Record<string, string>> = {
        get: { workspace_id: workspace.id },
        'members.list': { workspace_id: workspace.id },
        'members.add': { workspace_id: workspace.id, agent_id: newcomer.agent_id, role: 'write' },
        'members.remove': { workspace_id: workspace.id, agent_id: bystander.agent_id },
        delete: { workspace_id: workspace.id },
      };
      const reply = await call(caller, `workspace.${operation}`, params[operation]);

      if (outcome === 'ok') {
        expect(reply.body.error).toBeUndefined();
        expect(reply.body.result).toBeDefined();
      } else {
        await expectError(reply, outcome.code, outcome.message);
      }

      // The owner sees the effect of a success, and nothing at all after a refusal.
      if (operation === 'delete') {
        const after = await call(owner, 'workspace.get', { workspace_id: workspace.id });
        if (outcome === 'ok') await expectError(after, NOT_FOUND.code, NOT_FOUND.message);
        else expect(after.body.result.workspace.id).toBe(workspace.id);
        return;
      }
      const members = await memberIds(owner, workspace.id);
      if (operation === 'members.add') expect(members.includes(newcomer.agent_id)).toBe(outcome === 'ok');
      if (operation === 'members.remove') expect(members.includes(bystander.agent_id)).toBe(outcome !== 'ok');
    });

    it('lets a non-owner admin add admins, who can then manage members too', async () => {
      const { owner, newcomer, workspace, caller: admin } = await arrange('admin');
      await addMember(admin, workspace.id, newcomer, 'admin');
      const another = await agent('acme', 'another');
      await addMember(newcomer, workspace.id, another, 'read');
      expect(await memberIds(owner, workspace.id)).toEqual(expect.arrayContaining([newcomer.agent_id, another.agent_id]));
    });
  });

  // ---- errors and check order ---------------------------------------------------------------

  describe('errors and check order', () => {
    it.each([
      ['workspace.get', {}],
      ['workspace.members.list', {}],
      ['workspace.members.add', { agent_id: 'agt_x', role: 'read' }],
      ['workspace.members.remove', { agent_id: 'agt_x' }],
      ['workspace.delete', {}],
    ])('%s on an unknown workspace of valid shape → -32101, even for a non-member', async (method, extra) => {
      const stranger = await agent('globex', 'stranger');
      await expectError(call(stranger, method, { workspace_id: UNKNOWN_WS, ...extra }), NOT_FOUND.code, NOT_FOUND.message);
    });

    it('names a missing or non-string name', async () => {
      const owner = await agent('acme', 'owner');
      const missing = await expectInvalid(call(owner, 'workspace.create', { description: 'no name' }), 'name');
      expect(missing.message).toBe('Invalid params: name is required');
      const number = await expectInvalid(call(owner, 'workspace.create', { name: 42 }), 'name');
      expect(number.message).toBe('Invalid params: name must be a string');
      await expectInvalid(call(owner, 'workspace.create', { name: '   ' }), 'name');
      expect(await listedIds(owner)).toEqual([]);
    });

    it('names a role outside read, write, admin', async () => {
      const owner = await agent('acme', 'owner');
      const member = await agent('acme', 'member');
      const workspace = await createWorkspace(owner);
      for (const role of ['owner', 'READ', '', 1]) {
        await expectInvalid(call(owner, 'workspace.members.add', { workspace_id: workspace.id, agent_id: member.agent_id, role }), 'role');
      }
      await expectInvalid(call(owner, 'workspace.members.add', { workspace_id: workspace.id, agent_id: member.agent_id }), 'role');
      expect(await memberIds(owner, workspace.id)).toEqual([owner.agent_id]);
    });

    it.each([
      ['a different prefix', 'wsp_abc'],
      ['upper case', 'ws_ABC'],
      ['no suffix', 'ws_'],
      ['a path', '../ws_abc'],
      ['a number', 12],
      ['missing', undefined],
    ])('names workspace_id of the wrong shape (%s)', async (_what, workspaceId) => {
      const owner = await agent('acme', 'owner');
      const params = workspaceId === undefined ? {} : { workspace_id: workspaceId };
      for (const method of ['workspace.get', 'workspace.members.list', 'workspace.delete']) {
        await expectInvalid(call(owner, method, params), 'workspace_id');
      }
    });

    it('answers an unknown workspace method with -32601', async () => {
      const owner = await agent('acme', 'owner');
      await expectError(call(owner, 'workspace.members.nope', {}), -32601, 'Method not found: x-hub/workspace.members.nope');
    });

    it('refuses params that are not an object with -32602', async () => {
      const owner = await agent('acme', 'owner');
      for (const params of [['Project'], 'Project', 42]) {
        const reply = await call(owner, 'workspace.create', params);
        expect(reply.status).toBe(200);
        expect(reply.body.error?.code).toBe(-32602);
      }
      expect(await listedIds(owner)).toEqual([]);
    });

    it('names a missing agent_id', async () => {
      const owner = await agent('acme', 'owner');
      const workspace = await createWorkspace(owner);
      await expectInvalid(call(owner, 'workspace.members.add', { workspace_id: workspace.id, role: 'read' }), 'agent_id');
      await expectInvalid(call(owner, 'workspace.members.remove', { workspace_id: workspace.id }), 'agent_id');
      await expectInvalid(call(owner, 'grants.request', {}), 'agent_id');
    });

    it('checks parameters before membership: a non-member sending bad params gets -32602', async () => {
      const owner = await agent('acme', 'owner');
      const outsider = await agent('globex', 'outsider');
      const workspace = await createWorkspace(owner);
      await expectInvalid(call(outsider, 'workspace.members.add', { workspace_id: workspace.id, agent_id: owner.agent_id, role: 'owner' }), 'role');
      await expectInvalid(call(outsider, 'workspace.get', { workspace_id: 'not-a-workspace' }), 'workspace_id');
      await expectInvalid(call(outsider, 'workspace.members.remove', { workspace_id: workspace.id }), 'agent_id');
    });

    it('checks parameters before existence: bad params on an unknown workspace get -32602', async () => {
      const owner = await agent('acme', 'owner');
      await expectInvalid(call(owner, 'workspace.members.add', { workspace_id: UNKNOWN_WS, agent_id: owner.agent_id, role: 'owner' }), 'role');
    });

    it('checks access before role, and role before operation rules', async () => {
      const owner = await agent('acme', 'owner');
      const reader = await agent('acme', 'reader');
      const outsider = await agent('acme', 'outsider');
      const foreign = await agent('globex', 'foreign');
      const workspace = await createWorkspace(owner);
      await addMember(owner, workspace.id, reader, 'read');

      // Non-member: access denied, not the role or grant problem behind it.
      await expectError(call(outsider, 'workspace.members.add', { workspace_id: workspace.id, agent_id: foreign.agent_id, role: 'read' }), ACCESS_DENIED.code, ACCESS_DENIED.message);
      await expectError(call(outsider, 'workspace.members.remove', { workspace_id: workspace.id, agent_id: owner.agent_id }), ACCESS_DENIED.code, ACCESS_DENIED.message);
      // Reader: role required, not the missing grant nor the owner rule.
      await expectError(call(reader, 'workspace.members.add', { workspace_id: workspace.id, agent_id: foreign.agent_id, role: 'read' }), ADMIN_REQUIRED.code, ADMIN_REQUIRED.message);
      await expectError(call(reader, 'workspace.members.remove', { workspace_id: workspace.id, agent_id: owner.agent_id }), ADMIN_REQUIRED.code, ADMIN_REQUIRED.message);
    });
  });

  // ---- tenants and grants -------------------------------------------------------------------

  describe('tenants and access grants', () => {
    it('agents.get shows another tenant\'s agent by id and name only, grant or not; its own tenant and the operator see everything (issue 12)', async () => {
      // A global address the hub accepts at registration; nothing is sent to it (no message goes to this agent).
      const { agent: pushed } = await hub.admin('agents.create', { tenant_id: 'initech', name: 'pushed', create_tenant: true, endpoint_url: 'https://198.51.101.7/a2a' });
      const colleague = await agent('initech', 'colleague');
      const foreign = await agent('globex', 'foreign');
      const full = { id: pushed.id, tenant_id: 'initech', name: 'pushed', endpoint_url: 'https://198.51.101.7/a2a' };

      expect((await ok(foreign, 'agents.get', { agent_id: pushed.id })).agent).toEqual({ id: pushed.id, name: 'pushed' });
      const { grant } = await ok(foreign, 'grants.request', { agent_id: pushed.id });
      expect(grant.target_agent_id).toBe(pushed.id);
      expect((await ok(foreign, 'agents.get', { agent_id: pushed.id })).agent).toEqual({ id: pushed.id, name: 'pushed' });

      expect((await ok(colleague, 'agents.get', { agent_id: pushed.id })).agent).toMatchObject(full);
      expect((await hub.admin('agents.get', { agent_id: pushed.id })).agent).toMatchObject(full);
    });

    it('adds an agent of the owner’s tenant without any grant', async () => {
      const owner = await agent('acme', 'owner');
      const colleague = await agent('acme', 'colleague');
      const workspace = await createWorkspace(owner);
      await addMember(owner, workspace.id, colleague, 'read');
      expect((await ok(colleague, 'workspace.get', { workspace_id: workspace.id })).role).toBe('read');
      expect((await ok(colleague, 'grants.list')).grants).toEqual([]);
    });

    it('refuses an agent of another tenant without a grant, telling the caller to request access', async () => {
      const owner = await agent('acme', 'owner');
      const foreign = await agent('globex', 'foreign');
      const workspace = await createWorkspace(owner);
      const error = await expectError(call(owner, 'workspace.members.add', { workspace_id: workspace.id, agent_id: foreign.agent_id, role: 'read' }), -32104);
      expect(error.message.startsWith('No access grant to target agent')).toBe(true);
      expect(await memberIds(owner, workspace.id)).toEqual([owner.agent_id]);
    });

    it('refuses the cross-tenant add while the grant is only pending', async () => {
      const owner = await agent('acme', 'owner');
      const foreign = await agent('globex', 'foreign');
      const workspace = await createWorkspace(owner);
      const { grant, created } = await ok(owner, 'grants.request', { agent_id: foreign.agent_id });
      expect(created).toBe(true);
      expect(grant).toEqual({
        id: expect.stringMatching(/^grt_/),
        requester_agent_id: owner.agent_id,
        target_agent_id: foreign.agent_id,
        status: 'pending',
        created_at: expect.any(Number),
        updated_at: expect.any(Number),
      });
      await expectError(call(owner, 'workspace.members.add', { workspace_id: workspace.id, agent_id: foreign.agent_id, role: 'read' }), -32104);
    });

    it.each([
      ['the owner requests, the foreign agent approves', 'owner'],
      ['the foreign agent requests, the owner approves', 'foreign'],
    ])('adds a cross-tenant member once a grant is approved (%s)', async (_how, requesterSide) => {
      const owner = await agent('acme', 'owner');
      const foreign = await agent('globex', 'foreign');
      const workspace = await createWorkspace(owner);
      const [requester, target] = requesterSide === 'owner' ? [owner, foreign] : [foreign, owner];

      const grant = await approvedGrant(requester, target);
      expect(grant.status).toBe('approved');

      const { member } = await addMember(owner, workspace.id, foreign, 'read');
      expect(member).toMatchObject({ agent_id: foreign.agent_id, role: 'read' });
      expect(await ok(foreign, 'workspace.get', { workspace_id: workspace.id })).toMatchObject({ role: 'read', member_count: 2 });
      expect(await listedIds(foreign)).toEqual([workspace.id]);
    });

    it('lets a cross-tenant member act exactly per its role', async () => {
      const owner = await agent('acme', 'owner');
      const reader = await agent('globex', 'reader');
      const admin = await agent('globex', 'admin');
      const colleague = await agent('acme', 'colleague');
      const workspace = await createWorkspace(owner);
      await approvedGrant(owner, reader);
      await approvedGrant(admin, owner);
      await addMember(owner, workspace.id, reader, 'read');
      await addMember(owner, workspace.id, admin, 'admin');

      expect((await ok(reader, 'workspace.members.list', { workspace_id: workspace.id })).count).toBe(3);
      await expectError(call(reader, 'workspace.members.add', { workspace_id: workspace.id, agent_id: colleague.agent_id, role: 'read' }), ADMIN_REQUIRED.code, ADMIN_REQUIRED.message);
      await expectError(call(reader, 'workspace.delete', { workspace_id: workspace.id }), OWNER_REQUIRED.code, OWNER_REQUIRED.message);

      // A foreign admin adds an agent of the owner's tenant (no grant needed) and removes it again.
      await addMember(admin, workspace.id, colleague, 'write');
      expect((await ok(colleague, 'workspace.get', { workspace_id: workspace.id })).role).toBe('write');
      await ok(admin, 'workspace.members.remove', { workspace_id: workspace.id, agent_id: colleague.agent_id });
      await expectError(call(admin, 'workspace.delete', { workspace_id: workspace.id }), OWNER_REQUIRED.code, OWNER_REQUIRED.message);
    });

    it.each([
      ['the owner', 'owner'],
      ['the member', 'member'],
    ])('cuts access on the very next call when %s revokes the grant, and restores it with a new grant', async (_who, revoker) => {
      const owner = await agent('acme', 'owner');
      const member = await agent('globex', 'member');
      const workspace = await createWorkspace(owner, 'Cross-tenant');
      const grant = await approvedGrant(member, owner);
      await addMember(owner, workspace.id, member, 'write');
      expect((await ok(member, 'workspace.get', { workspace_id: workspace.id })).role).toBe('write');
      expect(await listedIds(member)).toEqual([workspace.id]);

      const revoked = await ok(revoker === 'owner' ? owner : member, 'grants.revoke', { grant_id: grant.id });
      expect(revoked.grant).toMatchObject({ id: grant.id, status: 'revoked' });

      await expectError(call(member, 'workspace.get', { workspace_id: workspace.id }), ACCESS_DENIED.code, ACCESS_DENIED.message);
      await expectError(call(member, 'workspace.members.list', { workspace_id: workspace.id }), ACCESS_DENIED.code, ACCESS_DENIED.message);
      expect(await listedIds(member)).toEqual([]);
      // The membership record stays, visible to the owner.
      const { members } = await ok(owner, 'workspace.members.list', { workspace_id: workspace.id });
      expect(members).toContainEqual(expect.objectContaining({ agent_id: member.agent_id, role: 'write' }));
      // A revoked grant cannot be approved again, nor the member re-added without a new one.
      await expectError(call(owner, 'grants.approve', { grant_id: grant.id }), -32103);
      await expectError(call(owner, 'workspace.members.add', { workspace_id: workspace.id, agent_id: member.agent_id, role: 'read' }), -32104);

      const renewed = await approvedGrant(owner, member);
      expect(renewed.id).not.toBe(grant.id);
      expect((await ok(member, 'workspace.get', { workspace_id: workspace.id })).role).toBe('write');
      expect(await listedIds(member)).toEqual([workspace.id]);
    });

    /**
     * workspace.members.add over caller role × target tenant × grant. An add either gives the
     * target access or fails: a cross-tenant target joins only through an admin of the owner's
     * tenant holding an approved grant with it (the grant the owner's side can revoke).
     */
    describe('members.add: role × tenant × grant', () => {
      type CallerKind = 'owner' | 'admin' | 'foreign admin' | 'writer' | 'reader' | 'outsider';
      type GrantKind = 'none' | 'pending with the caller' | 'approved with the caller' | 'revoked with the caller' | 'approved with the owner only';
      const callers: CallerKind[] = ['owner', 'admin', 'foreign admin', 'writer', 'reader', 'outsider'];
      const grants: GrantKind[] = ['none', 'pending with the caller', 'approved with the caller', 'revoked with the caller', 'approved with the owner only'];
      const cells: [CallerKind, 'same tenant' | 'other tenant', GrantKind][] = callers.flatMap((c) => [
        [c, 'same tenant', 'none'] as [CallerKind, 'same tenant', GrantKind],
        ...grants.map((g) => [c, 'other tenant', g] as [CallerKind, 'other tenant', GrantKind]),
      ]);
      /** The rule under test, stated once. */
      function expected(caller: CallerKind, tenant: string, grant: GrantKind): number | 'added' {
        if (caller === 'outsider') return -32100;
        if (caller === 'writer' || caller === 'reader') return -32102;
        if (tenant === 'same tenant') return 'added';
        if (caller === 'foreign admin') return -32104;
        const withCaller = grant === 'approved with the caller' || (caller === 'owner' && grant === 'approved with the owner only');
        return withCaller ? 'added' : -32104;
      }

      let workspaceId: string;
      let owner: Agent;
      const by = {} as Record<CallerKind, Agent>;
      beforeAll(async () => {
        owner = await agent('acme', 'owner');
        workspaceId = (await createWorkspace(owner, 'Matrix')).id;
        by.owner = owner;
        by.admin = await agent('acme', 'admin');
        by['foreign admin'] = await agent('globex', 'foreign-admin');
        by.writer = await agent('acme', 'writer');
        by.reader = await agent('acme', 'reader');
        by.outsider = await agent('acme', 'outsider');
        await approvedGrant(owner, by['foreign admin']);
        await addMember(owner, workspaceId, by.admin, 'admin');
        await addMember(owner, workspaceId, by['foreign admin'], 'admin');
        await addMember(owner, workspaceId, by.writer, 'write');
        await addMember(owner, workspaceId, by.reader, 'read');
      });

      it.each(cells)('%s adds an agent of the %s, grant %s', async (callerKind, tenant, grantKind) => {
        const caller = by[callerKind];
        const target = await agent(tenant === 'same tenant' ? 'acme' : 'initech', 'target');
        if (grantKind === 'pending with the caller') await ok(caller, 'grants.request', { agent_id: target.agent_id });
        if (grantKind === 'approved with the caller') await approvedGrant(caller, target);
        if (grantKind === 'approved with the owner only') await approvedGrant(owner, target);
        if (grantKind === 'revoked with the caller') await ok(caller, 'grants.revoke', { grant_id: (await approvedGrant(target, caller)).id });

        const reply = await call(caller, 'workspace.members.add', { workspace_id: workspaceId, agent_id: target.agent_id, role: 'write' });
        const outcome = expected(callerKind, tenant, grantKind);
        expect(reply.body.error?.code ?? 'added').toBe(outcome);
        const members = await memberIds(owner, workspaceId);
        if (outcome === 'added') {
          // Added means access, at once.
          expect((await ok(target, 'workspace.get', { workspace_id: workspaceId })).role).toBe('write');
          expect(members).toContain(target.agent_id);
        } else {
          await expectError(call(target, 'workspace.get', { workspace_id: workspaceId }), ACCESS_DENIED.code, ACCESS_DENIED.message);
          expect(members).not.toContain(target.agent_id);
        }
      });
    });

    it('a second admin re-adding a member whose grant was revoked succeeds only with its own grant, which access then rests on', async () => {
      const owner = await agent('acme', 'owner');
      const admin = await agent('acme', 'admin');
      const member = await agent('globex', 'member');
      const workspace = await createWorkspace(owner);
      await addMember(owner, workspace.id, admin, 'admin');
      const ownerGrant = await approvedGrant(owner, member);
      await addMember(owner, workspace.id, member, 'read');
      await ok(owner, 'grants.revoke', { grant_id: ownerGrant.id });
      await expectError(call(member, 'workspace.get', { workspace_id: workspace.id }), ACCESS_DENIED.code);

      // No grant of its own: the add would give no access, so it fails saying why.
      const refused = await expectError(call(admin, 'workspace.members.add', { workspace_id: workspace.id, agent_id: member.agent_id, role: 'write' }), -32104);
      expect(refused.message.startsWith('No access grant to target agent')).toBe(true);
      await expectError(call(member, 'workspace.get', { workspace_id: workspace.id }), ACCESS_DENIED.code);

      const adminGrant = await approvedGrant(admin, member);
      const { member: readded } = await addMember(admin, workspace.id, member, 'write');
      expect(readded).toMatchObject({ agent_id: member.agent_id, role: 'write' });
      expect((await ok(member, 'workspace.get', { workspace_id: workspace.id })).role).toBe('write');
      // The membership rests on the admin's grant now: revoking it cuts access again.
      await ok(admin, 'grants.revoke', { grant_id: adminGrant.id });
      await expectError(call(member, 'workspace.get', { workspace_id: workspace.id }), ACCESS_DENIED.code);
    });

    it('keeps a grant private to its two agents: a third cannot approve or revoke it', async () => {
      const owner = await agent('acme', 'owner');
      const foreign = await agent('globex', 'foreign');
      const thirdSameTenant = await agent('globex', 'third');
      const thirdOther = await agent('initech', 'third');
      const { grant } = await ok(owner, 'grants.request', { agent_id: foreign.agent_id });

      for (const third of [thirdSameTenant, thirdOther]) {
        await expectError(call(third, 'grants.approve', { grant_id: grant.id }), -32101, 'Grant not found');
        await expectError(call(third, 'grants.revoke', { grant_id: grant.id }), -32101, 'Grant not found');
        expect((await ok(third, 'grants.list')).grants).toEqual([]);
      }
      expect((await ok(foreign, 'grants.list')).grants).toEqual([expect.objectContaining({ id: grant.id, status: 'pending' })]);

      const approved = await approvedGrant(owner, foreign);
      expect(approved.id).toBe(grant.id);
      for (const third of [thirdSameTenant, thirdOther]) {
        await expectError(call(third, 'grants.revoke', { grant_id: approved.id }), -32101, 'Grant not found');
      }
      expect((await ok(owner, 'grants.list')).grants).toEqual([expect.objectContaining({ id: grant.id, status: 'approved' })]);
    });

    it('refuses approval by the requester', async () => {
      const owner = await agent('acme', 'owner');
      const foreign = await agent('globex', 'foreign');
      const { grant } = await ok(owner, 'grants.request', { agent_id: foreign.agent_id });
      await expectError(call(owner, 'grants.approve', { grant_id: grant.id }), -32103);
      expect((await ok(owner, 'grants.list')).grants[0].status).toBe('pending');
    });

    it('refuses a grant request within one tenant, including to oneself', async () => {
      const a = await agent('acme', 'a');
      const b = await agent('acme', 'b');
      await expectError(call(a, 'grants.request', { agent_id: b.agent_id }), -32103);
      await expectError(call(a, 'grants.request', { agent_id: a.agent_id }), -32103);
      expect((await ok(a, 'grants.list')).grants).toEqual([]);
    });

    it('answers a repeated request from either side with the live grant', async () => {
      const a = await agent('acme', 'a');
      const b = await agent('globex', 'b');
      const first = await ok(a, 'grants.request', { agent_id: b.agent_id });
      const again = await ok(a, 'grants.request', { agent_id: b.agent_id });
      const reverse = await ok(b, 'grants.request', { agent_id: a.agent_id });
      expect(again).toEqual({ grant: first.grant, created: false });
      expect(reverse).toEqual({ grant: first.grant, created: false });
    });

    it('lists the caller’s grants on either side, filtered by status', async () => {
      const me = await agent('acme', 'me');
      const x = await agent('globex', 'x');
      const y = await agent('initech', 'y');
      const pending = (await ok(me, 'grants.request', { agent_id: x.agent_id })).grant;
      const approved = await approvedGrant(y, me);

      const all = await ok(me, 'grants.list');
      expect(all.count).toBe(2);
      expect(all.grants.map((g: { id: string }) => g.id).sort()).toEqual([pending.id, approved.id].sort());
      expect((await ok(me, 'grants.list', { status: 'pending' })).grants.map((g: { id: string }) => g.id)).toEqual([pending.id]);
      expect((await ok(me, 'grants.list', { status: 'approved' })).grants.map((g: { id: string }) => g.id)).toEqual([approved.id]);
      expect((await ok(me, 'grants.list', { status: 'revoked' })).grants).toEqual([]);
      await expectInvalid(call(me, 'grants.list', { status: 'gone' }), 'status');
    });

    it('reports an unknown grant and an unknown target agent', async () => {
      const me = await agent('acme', 'me');
      await expectError(call(me, 'grants.approve', { grant_id: 'grt_doesnotexist' }), -32101, 'Grant not found');
      await expectError(call(me, 'grants.revoke', { grant_id: 'grt_doesnotexist' }), -32101, 'Grant not found');
      await expectError(call(me, 'grants.request', { agent_id: 'agt_nobody' }), -32101, 'Agent not found');
    });
  });
});

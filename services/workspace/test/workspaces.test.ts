import { workspacev1 } from '@agenthub/proto';
import { Reason } from '@agenthub/runtime';
import { backends, type Backend } from '@agenthub/testing';
import { failure, operator, startStack, type Stack, type TestAgent } from './harness.js';

const { Role } = workspacev1;

describe.each(backends().map((b) => [b.name, b] as const))('workspaces (%s)', (_name, backend: Backend) => {
  let stack: Stack;
  let owner: TestAgent;
  let sameTenant: TestAgent;
  let otherTenant: TestAgent;

  beforeAll(async () => {
    stack = await startStack(backend);
    owner = await stack.agent('acme', 'Owner');
    sameTenant = await stack.agent('acme', 'Colleague');
    otherTenant = await stack.agent('globex', 'Stranger');
  });

  afterAll(async () => {
    await stack?.stop();
  });

  const create = (name = 'Research', description = 'Shared notes') =>
    stack.workspace.createWorkspace({ name, description }, owner.as).then((r) => r.workspace!);

  test('CreateWorkspace returns the workspace, owned by the caller, who is its admin', async () => {
    const before = Date.now();
    const workspace = await create('  Research  ', 'Shared notes');
    expect(workspace.id).toMatch(/^ws_[a-z0-9]{20}$/);
    expect(workspace).toMatchObject({ name: 'Research', description: 'Shared notes', ownerAgentId: owner.id });
    expect(Number(workspace.createdAt)).toBeGreaterThanOrEqual(before);
    expect(Number(workspace.createdAt)).toBeLessThanOrEqual(Date.now());

    const { members } = await stack.workspace.listMembers({ workspaceId: workspace.id }, owner.as);
    expect(members).toHaveLength(1);
    expect(members[0]).toMatchObject({
      agentId: owner.id,
      agentName: 'Owner',
      role: Role.ADMIN,
      tenantId: 'acme',
      addedBy: owner.id,
      addedAt: workspace.createdAt,
    });
  });

  test('CreateWorkspace accepts an omitted description', async () => {
    const { workspace } = await stack.workspace.createWorkspace({ name: 'No description' }, owner.as);
    expect(workspace?.description).toBe('');
  });

  test('CreateWorkspace names the bad field', async () => {
    const invalid = (field: string, problem: string) => ({ reason: Reason.INVALID_PARAMS, message: `Invalid params: ${field} ${problem}`, field });
    expect(await failure(stack.workspace.createWorkspace({ name: '' }, owner.as))).toEqual(invalid('name', 'is required'));
    expect(await failure(stack.workspace.createWorkspace({ name: '   ' }, owner.as))).toEqual(invalid('name', 'is required'));
    expect(await failure(stack.workspace.createWorkspace({ name: 'x'.repeat(201) }, owner.as))).toEqual(
      invalid('name', 'must be at most 200 characters'),
    );
    expect(await failure(stack.workspace.createWorkspace({ name: 'ok', description: 'd'.repeat(2001) }, owner.as))).toEqual(
      invalid('description', 'must be at most 2000 characters'),
    );
    const longest = await stack.workspace.createWorkspace({ name: 'é'.repeat(200), description: 'd'.repeat(2000) }, owner.as);
    expect(longest.workspace?.name).toHaveLength(200);
  });

  test('GetWorkspace gives any member the workspace, its role and the member count', async () => {
    const workspace = await create();
    const got = await stack.workspace.getWorkspace({ workspaceId: workspace.id }, owner.as);
    expect(got.workspace).toEqual(workspace);
    expect(got.role).toBe(Role.ADMIN);
    expect(got.memberCount).toBe(1);

    await stack.workspace.addMember({ workspaceId: workspace.id, agentId: sameTenant.id, role: Role.READ }, owner.as);
    const asReader = await stack.workspace.getWorkspace({ workspaceId: workspace.id }, sameTenant.as);
    expect(asReader.role).toBe(Role.READ);
    expect(asReader.memberCount).toBe(2);
  });

  test('ResolveAccess reports the role and whether the caller owns the workspace', async () => {
    const workspace = await create();
    await stack.workspace.addMember({ workspaceId: workspace.id, agentId: sameTenant.id, role: Role.WRITE }, owner.as);
    expect(await stack.workspace.resolveAccess({ workspaceId: workspace.id }, owner.as)).toMatchObject({ role: Role.ADMIN, owner: true });
    expect(await stack.workspace.resolveAccess({ workspaceId: workspace.id }, sameTenant.as)).toMatchObject({ role: Role.WRITE, owner: false });
  });

  test('ListWorkspaces lists the memberships in creation order with the caller role', async () => {
    const lister = await stack.agent('initech', 'Lister');
    const first = (await stack.workspace.createWorkspace({ name: 'First' }, lister.as)).workspace!;
    const second = (await stack.workspace.createWorkspace({ name: 'Second' }, lister.as)).workspace!;
    const foreign = await create('Someone else’s');
    await stack.grant(owner, lister);
    await stack.workspace.addMember({ workspaceId: foreign.id, agentId: lister.id, role: Role.READ }, owner.as);

    // Workspaces created within the same millisecond fall back to id order.
    const expected = [
      [first, Role.ADMIN],
      [second, Role.ADMIN],
      [foreign, Role.READ],
    ] as const;
    const ordered = [...expected].sort(([a], [b]) => Number(a.createdAt - b.createdAt) || (a.id < b.id ? -1 : 1));
    const { workspaces } = await stack.workspace.listWorkspaces({}, lister.as);
    expect(workspaces.map((w) => [w.workspace, w.role])).toEqual(ordered);
  });

  test('non-members, of the owner tenant or another, are denied and see nothing listed', async () => {
    const workspace = await create();
    const id = { workspaceId: workspace.id };
    for (const stranger of [sameTenant, otherTenant]) {
      const denied = { reason: Reason.ACCESS_DENIED, message: 'Access denied', field: '' };
      expect(await failure(stack.workspace.getWorkspace(id, stranger.as))).toEqual(denied);
      expect(await failure(stack.workspace.listMembers(id, stranger.as))).toEqual(denied);
      expect(await failure(stack.workspace.resolveAccess(id, stranger.as))).toEqual(denied);
      expect(await failure(stack.workspace.deleteWorkspace(id, stranger.as))).toEqual(denied);
      expect(await failure(stack.workspace.addMember({ ...id, agentId: stranger.id, role: Role.READ }, stranger.as))).toEqual(denied);
      expect(await failure(stack.workspace.removeMember({ ...id, agentId: owner.id }, stranger.as))).toEqual(denied);
      const { workspaces } = await stack.workspace.listWorkspaces({}, stranger.as);
      expect(workspaces.map((w) => w.workspace?.id)).not.toContain(workspace.id);
    }
  });

  test('a malformed workspace_id is INVALID_PARAMS, a missing workspace NOT_FOUND, on every RPC', async () => {
    const calls = (workspaceId: string) => [
      () => stack.workspace.getWorkspace({ workspaceId }, owner.as),
      () => stack.workspace.deleteWorkspace({ workspaceId }, owner.as),
      () => stack.workspace.addMember({ workspaceId, agentId: sameTenant.id, role: Role.READ }, owner.as),
      () => stack.workspace.removeMember({ workspaceId, agentId: sameTenant.id }, owner.as),
      () => stack.workspace.listMembers({ workspaceId }, owner.as),
      () => stack.workspace.resolveAccess({ workspaceId }, owner.as),
    ];
    for (const malformed of ['', 'nope', 'ws_', 'ws_UPPER', `ws_${'a'.repeat(65)}`, 'ws_a-b']) {
      for (const call of calls(malformed)) {
        expect(await failure(call())).toEqual({
          reason: Reason.INVALID_PARAMS,
          message: 'Invalid params: workspace_id must be a workspace id of the form ws_…',
          field: 'workspace_id',
        });
      }
    }
    for (const call of calls('ws_doesnotexist0000000')) {
      expect(await failure(call())).toEqual({ reason: Reason.NOT_FOUND, message: 'Workspace not found', field: '' });
    }
  });

  test('DeleteWorkspace is for the owner only and takes the members with it', async () => {
    const workspace = await create();
    const id = { workspaceId: workspace.id };
    await stack.workspace.addMember({ ...id, agentId: sameTenant.id, role: Role.ADMIN }, owner.as);
    expect(await failure(stack.workspace.deleteWorkspace(id, sameTenant.as))).toEqual({
      reason: Reason.PERMISSION_REQUIRED,
      message: 'Owner access required',
      field: '',
    });

    expect(await stack.workspace.deleteWorkspace(id, owner.as)).toMatchObject({ workspaceId: workspace.id });
    const gone = { reason: Reason.NOT_FOUND, message: 'Workspace not found', field: '' };
    expect(await failure(stack.workspace.getWorkspace(id, owner.as))).toEqual(gone);
    expect(await failure(stack.workspace.listMembers(id, sameTenant.as))).toEqual(gone);
    expect(await failure(stack.workspace.deleteWorkspace(id, owner.as))).toEqual(gone);
    for (const agent of [owner, sameTenant]) {
      const { workspaces } = await stack.workspace.listWorkspaces({}, agent.as);
      expect(workspaces.map((w) => w.workspace?.id)).not.toContain(workspace.id);
    }
  });

  test('ListMemoryTypes returns the six types in order', async () => {
    const { types } = await stack.workspace.listMemoryTypes({}, owner.as);
    expect(types.map(({ type, description }) => [type, description])).toEqual([
      ['fact', 'Objective information.'],
      ['decision', 'Choices made.'],
      ['preference', 'Preferences.'],
      ['todo', 'Action items.'],
      ['context', 'Background information.'],
      ['reference', 'Links and resources.'],
    ]);
  });

  test('every RPC needs an agent principal', async () => {
    const unauthenticated = { reason: Reason.UNAUTHENTICATED, message: 'Missing or invalid API key', field: '' };
    for (const options of [{}, operator]) {
      expect(await failure(stack.workspace.createWorkspace({ name: 'x' }, options))).toEqual(unauthenticated);
      expect(await failure(stack.workspace.listWorkspaces({}, options))).toEqual(unauthenticated);
      expect(await failure(stack.workspace.listMemoryTypes({}, options))).toEqual(unauthenticated);
      expect(await failure(stack.workspace.getWorkspace({ workspaceId: 'ws_abc' }, options))).toEqual(unauthenticated);
    }
    expect(await failure(stack.workspace.resolveAccess({ workspaceId: 'bad' }, {}))).toEqual(unauthenticated);
  });

  test('ResolveAccess for the operator itself: admin of every workspace that exists, NOT_FOUND otherwise', async () => {
    const workspace = await create();
    expect(await stack.workspace.resolveAccess({ workspaceId: workspace.id }, operator)).toMatchObject({ role: Role.ADMIN, owner: false });
    expect(await failure(stack.workspace.resolveAccess({ workspaceId: 'ws_doesnotexist' }, operator))).toEqual({ reason: Reason.NOT_FOUND, message: 'Workspace not found', field: '' });
    expect(await failure(stack.workspace.resolveAccess({ workspaceId: 'bad' }, operator))).toMatchObject({ reason: Reason.INVALID_PARAMS, field: 'workspace_id' });
  });
});

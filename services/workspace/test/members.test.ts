import { workspacev1 } from '@agenthub/proto';
import { Reason } from '@agenthub/runtime';
import { backends, type Backend } from '@agenthub/testing';
import { failure, operator, startStack, type Stack, type TestAgent } from './harness.js';

const { Role } = workspacev1;

const denied = { reason: Reason.ACCESS_DENIED, message: 'Access denied', field: '' };
const adminRequired = { reason: Reason.PERMISSION_REQUIRED, message: 'Admin access required', field: '' };
const grantRequired = {
  reason: Reason.GRANT_REQUIRED,
  message: 'No access grant to target agent. Request access first with x-hub/grants.request.',
  field: '',
};

describe.each(backends().map((b) => [b.name, b] as const))('members (%s)', (_name, backend: Backend) => {
  let stack: Stack;
  // Tenant acme owns the workspaces; globex is the other tenant.
  let owner: TestAgent;
  let reader: TestAgent;
  let writer: TestAgent;
  let admin: TestAgent;
  let colleague: TestAgent;
  let partner: TestAgent;

  beforeAll(async () => {
    stack = await startStack(backend);
    owner = await stack.agent('acme', 'Owner');
    reader = await stack.agent('acme', 'Reader');
    writer = await stack.agent('acme', 'Writer');
    admin = await stack.agent('acme', 'Admin');
    colleague = await stack.agent('acme', 'Colleague');
    partner = await stack.agent('globex', 'Partner');
  });

  afterAll(async () => {
    await stack?.stop();
  });

  /** A workspace of the owner's with reader, writer and admin added by the owner. */
  async function staffed(): Promise<string> {
    const { workspace } = await stack.workspace.createWorkspace({ name: 'Team' }, owner.as);
    const workspaceId = workspace!.id;
    for (const [agent, role] of [[reader, Role.READ], [writer, Role.WRITE], [admin, Role.ADMIN]] as const) {
      await stack.workspace.addMember({ workspaceId, agentId: agent.id, role }, owner.as);
    }
    return workspaceId;
  }

  test('members_per_workspace (the owner tenant’s override): concurrent adds stop at the quota; a role change needs no room', async () => {
    const boss = await stack.agent('initech', 'Boss');
    const staff = await Promise.all(['P', 'Q', 'R', 'S'].map((name) => stack.agent('initech', name)));
    await stack.identity.setTenantLimits({ tenantId: 'initech', limits: { quotas: { members_per_workspace: 3n } } }, operator);
    const { workspace } = await stack.workspace.createWorkspace({ name: 'Small' }, boss.as);
    const workspaceId = workspace!.id;
    const results = await Promise.allSettled(staff.map((a) => stack.workspace.addMember({ workspaceId, agentId: a.id, role: Role.READ }, boss.as)));
    const added = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value.member!.agentId] : []));
    expect(added).toHaveLength(2);
    for (const r of results.filter((r) => r.status === 'rejected')) {
      expect(r.reason).toMatchObject({ reason: Reason.QUOTA_EXCEEDED, field: 'members_per_workspace', message: 'Quota exceeded: a workspace has at most 3 members; remove one first' });
    }
    expect((await stack.workspace.addMember({ workspaceId, agentId: added[0]!, role: Role.WRITE }, boss.as)).created).toBe(false);
    const { usage } = await stack.workspace.getTenantUsage({ tenantId: 'initech' }, operator);
    expect(usage.find((u) => u.quota === 'members_per_workspace' && u.scope === workspaceId)).toMatchObject({ used: 3n, limit: 3n });
  });

  test('AddMember returns the new member; adding it again changes only its role', async () => {
    const { workspace } = await stack.workspace.createWorkspace({ name: 'Team' }, owner.as);
    const workspaceId = workspace!.id;
    const before = Date.now();
    const added = await stack.workspace.addMember({ workspaceId, agentId: colleague.id, role: Role.READ }, owner.as);
    expect(added.created).toBe(true);
    expect(added.member).toMatchObject({ agentId: colleague.id, agentName: 'Colleague', role: Role.READ, tenantId: 'acme', addedBy: owner.id });
    expect(Number(added.member?.addedAt)).toBeGreaterThanOrEqual(before);

    await stack.workspace.addMember({ workspaceId, agentId: admin.id, role: Role.ADMIN }, owner.as);
    const changed = await stack.workspace.addMember({ workspaceId, agentId: colleague.id, role: Role.WRITE }, admin.as);
    expect(changed.created).toBe(false);
    expect(changed.member).toEqual({ ...added.member, role: Role.WRITE });
    expect((await stack.workspace.getWorkspace({ workspaceId }, colleague.as)).role).toBe(Role.WRITE);
  });

  test('AddMember names bad parameters before looking anything up', async () => {
    const invalid = (field: string, problem: string) => ({ reason: Reason.INVALID_PARAMS, message: `Invalid params: ${field} ${problem}`, field });
    const workspaceId = 'ws_doesnotexist';
    expect(await failure(stack.workspace.addMember({ workspaceId, agentId: '', role: Role.READ }, owner.as))).toEqual(
      invalid('agent_id', 'is required'),
    );
    for (const role of [Role.UNSPECIFIED, 7 as workspacev1.Role]) {
      expect(await failure(stack.workspace.addMember({ workspaceId, agentId: reader.id, role }, owner.as))).toEqual(
        invalid('role', 'must be one of read, write, admin'),
      );
    }
    expect(await failure(stack.workspace.removeMember({ workspaceId, agentId: '' }, owner.as))).toEqual(invalid('agent_id', 'is required'));
  });

  test('AddMember of an unknown agent passes on identity’s NOT_FOUND', async () => {
    const workspaceId = await staffed();
    expect(await failure(stack.workspace.addMember({ workspaceId, agentId: 'nobody', role: Role.READ }, owner.as))).toEqual({
      reason: Reason.NOT_FOUND,
      message: 'Agent not found',
      field: '',
    });
  });

  test('read and write members can read the workspace and its members, not change them', async () => {
    const workspaceId = await staffed();
    for (const [member, role] of [[reader, Role.READ], [writer, Role.WRITE]] as const) {
      expect((await stack.workspace.getWorkspace({ workspaceId }, member.as)).role).toBe(role);
      expect((await stack.workspace.listMembers({ workspaceId }, member.as)).members).toHaveLength(4);
      expect(await stack.workspace.resolveAccess({ workspaceId }, member.as)).toMatchObject({ role, owner: false });
      expect(await failure(stack.workspace.addMember({ workspaceId, agentId: colleague.id, role: Role.READ }, member.as))).toEqual(adminRequired);
      expect(await failure(stack.workspace.removeMember({ workspaceId, agentId: reader.id }, member.as))).toEqual(adminRequired);
      // The role check comes before the operation rules.
      expect(await failure(stack.workspace.removeMember({ workspaceId, agentId: owner.id }, member.as))).toEqual(adminRequired);
      expect(await failure(stack.workspace.deleteWorkspace({ workspaceId }, member.as))).toEqual({
        reason: Reason.PERMISSION_REQUIRED,
        message: 'Owner access required',
        field: '',
      });
      const { workspaces } = await stack.workspace.listWorkspaces({}, member.as);
      expect(workspaces.find((w) => w.workspace?.id === workspaceId)?.role).toBe(role);
    }
  });

  test('an admin adds and removes members but neither removes nor demotes the owner', async () => {
    const workspaceId = await staffed();
    await stack.workspace.addMember({ workspaceId, agentId: colleague.id, role: Role.READ }, admin.as);
    expect(await stack.workspace.removeMember({ workspaceId, agentId: colleague.id }, admin.as)).toMatchObject({
      workspaceId,
      agentId: colleague.id,
    });
    expect(await failure(stack.workspace.getWorkspace({ workspaceId }, colleague.as))).toEqual(denied);
    expect(await failure(stack.workspace.removeMember({ workspaceId, agentId: colleague.id }, admin.as))).toEqual({
      reason: Reason.NOT_FOUND,
      message: 'Member not found',
      field: '',
    });
    expect(await failure(stack.workspace.removeMember({ workspaceId, agentId: owner.id }, admin.as))).toEqual({
      reason: Reason.INVALID_OPERATION,
      message: 'Cannot remove workspace owner',
      field: '',
    });
    expect(await failure(stack.workspace.addMember({ workspaceId, agentId: owner.id, role: Role.WRITE }, admin.as))).toEqual({
      reason: Reason.INVALID_OPERATION,
      message: "Cannot change the workspace owner's role",
      field: '',
    });
    const owned = await stack.workspace.addMember({ workspaceId, agentId: owner.id, role: Role.ADMIN }, admin.as);
    expect(owned.created).toBe(false);
    expect(owned.member).toMatchObject({ role: Role.ADMIN, addedBy: owner.id });
  });

  test('ListMembers orders by added_at, then agent_id', async () => {
    const workspaceId = await staffed();
    const { members } = await stack.workspace.listMembers({ workspaceId }, reader.as);
    expect(members.map((m) => m.agentId)).toEqual(
      [...members].sort((a, b) => Number(a.addedAt - b.addedAt) || (a.agentId < b.agentId ? -1 : 1)).map((m) => m.agentId),
    );
    expect(new Set(members.map((m) => m.agentId))).toEqual(new Set([owner.id, reader.id, writer.id, admin.id]));
  });

  test('another tenant’s agent joins only with an approved grant and loses access when it is revoked', async () => {
    const workspaceId = await staffed();
    const addPartner = (by: TestAgent, role = Role.WRITE) => stack.workspace.addMember({ workspaceId, agentId: partner.id, role }, by.as);
    expect(await failure(addPartner(owner))).toEqual(grantRequired);

    const grantId = await stack.grant(partner, owner);
    // The grant links partner and owner; the admin has none with partner.
    expect(await failure(addPartner(admin))).toEqual(grantRequired);
    const added = await addPartner(owner);
    expect(added.member).toMatchObject({ agentId: partner.id, tenantId: 'globex', role: Role.WRITE, addedBy: owner.id });

    expect((await stack.workspace.getWorkspace({ workspaceId }, partner.as)).role).toBe(Role.WRITE);
    expect(await stack.workspace.resolveAccess({ workspaceId }, partner.as)).toMatchObject({ role: Role.WRITE, owner: false });
    expect((await stack.workspace.listWorkspaces({}, partner.as)).workspaces.map((w) => w.workspace?.id)).toContain(workspaceId);
    expect(await failure(addPartner(partner, Role.ADMIN))).toEqual(adminRequired);

    await stack.revoke(owner, grantId);
    expect(await failure(stack.workspace.getWorkspace({ workspaceId }, partner.as))).toEqual(denied);
    expect(await failure(stack.workspace.resolveAccess({ workspaceId }, partner.as))).toEqual(denied);
    expect(await failure(stack.workspace.listMembers({ workspaceId }, partner.as))).toEqual(denied);
    expect((await stack.workspace.listWorkspaces({}, partner.as)).workspaces.map((w) => w.workspace?.id)).not.toContain(workspaceId);
    // The membership stays on record, without effect.
    const { members } = await stack.workspace.listMembers({ workspaceId }, owner.as);
    expect(members.find((m) => m.agentId === partner.id)).toMatchObject({ role: Role.WRITE, addedBy: owner.id });
    expect(await failure(addPartner(owner, Role.READ))).toEqual(grantRequired);

    await stack.grant(owner, partner);
    expect((await stack.workspace.getWorkspace({ workspaceId }, partner.as)).role).toBe(Role.WRITE);
    expect((await stack.workspace.listWorkspaces({}, partner.as)).workspaces.map((w) => w.workspace?.id)).toContain(workspaceId);
  });

  test('a cross-tenant membership rests on the grant with the admin who added it', async () => {
    const workspaceId = await staffed();
    const grantId = await stack.grant(admin, partner);
    await stack.workspace.addMember({ workspaceId, agentId: partner.id, role: Role.ADMIN }, admin.as);
    expect((await stack.workspace.getWorkspace({ workspaceId }, partner.as)).role).toBe(Role.ADMIN);

    // A cross-tenant admin changes its own role without a grant with itself.
    const demoted = await stack.workspace.addMember({ workspaceId, agentId: partner.id, role: Role.WRITE }, partner.as);
    expect(demoted.member).toMatchObject({ role: Role.WRITE, addedBy: admin.id });

    // An owner's grant does not stand in for the adder's: added_by stays the admin.
    const ownerGrant = await stack.grant(owner, partner);
    await stack.revoke(partner, grantId);
    expect(await failure(stack.workspace.getWorkspace({ workspaceId }, partner.as))).toEqual(denied);
    // Re-added by the owner, whose grant is approved: the membership rests on that grant now.
    const readded = await stack.workspace.addMember({ workspaceId, agentId: partner.id, role: Role.WRITE }, owner.as);
    expect(readded.member).toMatchObject({ role: Role.WRITE, addedBy: owner.id });
    expect((await stack.workspace.getWorkspace({ workspaceId }, partner.as)).role).toBe(Role.WRITE);
    // A same-tenant agent's membership needs no grant, so a role change leaves its added_by alone.
    await stack.workspace.addMember({ workspaceId, agentId: reader.id, role: Role.WRITE }, admin.as);
    expect((await stack.workspace.listMembers({ workspaceId }, owner.as)).members.find((m) => m.agentId === reader.id)).toMatchObject({ addedBy: owner.id });
    await stack.revoke(partner, ownerGrant);
    expect(await failure(stack.workspace.getWorkspace({ workspaceId }, partner.as))).toEqual(denied);
  });

  test('an agent of another tenant is added only by an admin of the owner\'s tenant: a grant the owner\'s side can revoke', async () => {
    const workspaceId = await staffed();
    const outsider = await stack.agent('initech', 'Outsider');
    await stack.grant(owner, partner);
    await stack.workspace.addMember({ workspaceId, agentId: partner.id, role: Role.ADMIN }, owner.as);
    // The foreign admin holds an approved grant with the outsider, but nobody of the owner's side does.
    await stack.grant(partner, outsider);
    expect(await failure(stack.workspace.addMember({ workspaceId, agentId: outsider.id, role: Role.READ }, partner.as))).toMatchObject({ reason: Reason.GRANT_REQUIRED });
    expect((await stack.workspace.listMembers({ workspaceId }, owner.as)).members.map((m) => m.agentId)).not.toContain(outsider.id);
    // It may still add an agent of the owner's tenant (no grant needed) and change its own role.
    await stack.workspace.addMember({ workspaceId, agentId: colleague.id, role: Role.READ }, partner.as);
    await stack.workspace.addMember({ workspaceId, agentId: partner.id, role: Role.WRITE }, partner.as);
  });
});

import { workspacev1 } from '@agenthub/proto';
import { WORKSPACE_EVENTS_TOPIC } from '@agenthub/runtime';
import { backends, type Backend } from '@agenthub/testing';
import { failure, startStack, type Stack, type TestAgent } from './harness.js';

const { Role } = workspacev1;

interface Row {
  topic: string;
  partition_key: string;
  type: string;
  payload: { event: string; timestamp: string; data: Record<string, unknown> };
}

describe.each(backends().map((b) => [b.name, b] as const))('workspace and member events (%s)', (_name, backend: Backend) => {
  let stack: Stack;
  let owner: TestAgent;
  let colleague: TestAgent;

  beforeAll(async () => {
    stack = await startStack(backend);
    owner = await stack.agent('acme', 'Owner');
    colleague = await stack.agent('acme', 'Colleague');
  });
  afterAll(() => stack?.stop());

  const events = async (workspaceId: string) =>
    (await stack.workspaceDb.query<Row>(
      "SELECT topic, partition_key, type, payload FROM outbox WHERE partition_key = $1 AND type NOT LIKE 'workspace.memory.%' ORDER BY seq",
      [workspaceId],
    )).rows;

  test('create, add, role change, remove and delete announce exactly the four changes, in order', async () => {
    const { workspace } = await stack.workspace.createWorkspace({ name: 'Evented' }, owner.as);
    const workspaceId = workspace!.id;
    await stack.workspace.addMember({ workspaceId, agentId: colleague.id, role: Role.READ }, owner.as);
    await stack.workspace.addMember({ workspaceId, agentId: colleague.id, role: Role.WRITE }, owner.as);
    await stack.workspace.removeMember({ workspaceId, agentId: colleague.id }, owner.as);
    await stack.workspace.deleteWorkspace({ workspaceId }, owner.as);

    const rows = await events(workspaceId);
    expect(rows.map((r) => r.type)).toEqual(['workspace.created', 'workspace.member.added', 'workspace.member.removed', 'workspace.deleted']);
    for (const row of rows) {
      expect(row.topic).toBe(WORKSPACE_EVENTS_TOPIC);
      expect(row.payload.event).toBe(row.type);
      expect(new Date(row.payload.timestamp).toISOString()).toBe(row.payload.timestamp);
    }
    expect(rows.map((r) => r.payload.data)).toEqual([
      { workspace_id: workspaceId, name: 'Evented', owner_agent_id: owner.id, created_by: owner.id },
      { workspace_id: workspaceId, agent_id: colleague.id, role: 'read', added_by: owner.id },
      { workspace_id: workspaceId, agent_id: colleague.id, removed_by: owner.id },
      { workspace_id: workspaceId, deleted_by: owner.id },
    ]);
  });

  test('refused changes announce nothing', async () => {
    const { workspace } = await stack.workspace.createWorkspace({ name: 'Quiet' }, owner.as);
    const workspaceId = workspace!.id;
    expect((await failure(stack.workspace.removeMember({ workspaceId, agentId: colleague.id }, owner.as))).message).toBe('Member not found');
    expect((await failure(stack.workspace.deleteWorkspace({ workspaceId }, colleague.as))).message).toBe('Access denied');
    expect((await events(workspaceId)).map((r) => r.type)).toEqual(['workspace.created']);
  });
});

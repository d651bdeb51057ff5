import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { HubClient } from '@agenthub/client';
import { MCP_TOOLS } from '@agenthub/gateway';
import { backends } from '@agenthub/testing';
import { startTestHub, type Agent, type TestHub } from './harness.js';

/**
 * The MCP endpoint (`/mcp`, Streamable HTTP) driven by the MCP SDK's own client over real HTTP:
 * it lists every tool, calls each one, and gets the same refusals as the JSON-RPC methods
 * (a read member storing a memory is refused with -32102, as on `POST /a2a`).
 */

async function connect(hub: TestHub, agent: Agent): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', hub.url), {
    requestInit: { headers: { Authorization: `Bearer ${agent.api_key}` } },
  });
  const client = new Client({ name: 'agenthub-test', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

describe.each(backends().map((b) => [b.name, b] as const))('MCP endpoint (%s)', (_name, backend) => {
  let hub: TestHub;
  let owner: Agent;
  let reader: Agent;
  let echo: Agent;
  let mcp: Client;
  let readerMcp: Client;
  let workspaceId: string;
  const stopEcho = new AbortController();
  let echoing: Promise<void>;
  const called = new Set<string>();

  /** Calls a tool as the owner and returns its structured result, failing on a tool error. */
  async function tool(name: string, args: Record<string, unknown> = {}): Promise<any> {
    called.add(name);
    const result = await mcp.callTool({ name, arguments: args });
    if (result.isError) throw new Error(`${name} failed: ${JSON.stringify(result.structuredContent)}`);
    expect(JSON.parse((result.content as { text: string }[])[0]!.text)).toEqual(result.structuredContent);
    return result.structuredContent;
  }

  beforeAll(async () => {
    hub = await startTestHub(backend);
    owner = await hub.agent('mcp-acme', 'owner');
    reader = await hub.agent('mcp-acme', 'reader');
    echo = await hub.agent('mcp-acme', 'echo');
    ({ workspace: { id: workspaceId } } = await hub.ok(owner.api_key, 'x-hub/workspace.create', { name: 'Research', description: 'Shared notes' }));
    await hub.ok(owner.api_key, 'x-hub/workspace.members.add', { workspace_id: workspaceId, agent_id: reader.agent_id, role: 'read' });
    echoing = new HubClient({ url: hub.url, apiKey: echo.api_key }).serve(({ text }) => ({ text: `echo: ${text}` }), { signal: stopEcho.signal });
    mcp = await connect(hub, owner);
    readerMcp = await connect(hub, reader);
  });
  afterAll(async () => {
    stopEcho.abort();
    await echoing;
    await Promise.all([mcp?.close(), readerMcp?.close()]);
    await hub?.stop();
  });

  it('lists every tool, each with a description and a JSON Schema of its input', async () => {
    const { tools } = await mcp.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(MCP_TOOLS.map((t) => t.name).sort());
    expect(tools.map((t) => t.name)).toEqual(
      expect.arrayContaining(['list_workspaces', 'store_memory', 'query_memories', 'forget_memories', 'get_secret', 'send_message', 'read_inbox']),
    );
    for (const t of tools) {
      expect(t.description!.length).toBeGreaterThan(20);
      expect(t.inputSchema.type).toBe('object');
    }
    const store = tools.find((t) => t.name === 'store_memory')!;
    expect(store.inputSchema.required).toEqual(['workspace_id', 'content']);
    expect(store.inputSchema.properties!.type).toMatchObject({ enum: ['fact', 'decision', 'preference', 'todo', 'context', 'reference'] });
    expect(store.annotations).toMatchObject({ readOnlyHint: false });
  });

  it('workspaces: list, get, members', async () => {
    const list = await tool('list_workspaces');
    expect(list.workspaces).toEqual([expect.objectContaining({ id: workspaceId, name: 'Research', role: 'admin' })]);
    expect(await tool('get_workspace', { workspace_id: workspaceId })).toMatchObject({ workspace: { id: workspaceId }, role: 'admin', member_count: 2 });
    const members = await tool('list_workspace_members', { workspace_id: workspaceId });
    expect(members.members.map((m: { agent_id: string; role: string }) => [m.agent_id, m.role]).sort()).toEqual(
      [[owner.agent_id, 'admin'], [reader.agent_id, 'read']].sort(),
    );
  });

  it('memories: store, query, update, list, forget with a dry run first', async () => {
    const { memory } = await tool('store_memory', { workspace_id: workspaceId, content: 'The launch moved to March 3rd.', type: 'decision', tags: ['launch'] });
    expect(memory).toMatchObject({ content: 'The launch moved to March 3rd.', type: 'decision', tags: ['launch'], created_by: owner.agent_id });
    const found = await tool('query_memories', { workspace_id: workspaceId, query: 'When is the launch?', limit: 3 });
    expect(found.memories[0]).toMatchObject({ id: memory.id });
    const updated = await tool('update_memory', { workspace_id: workspaceId, id: memory.id, tags: ['launch', 'dates'] });
    expect(updated.memory.tags).toEqual(['launch', 'dates']);
    const listed = await tool('list_memories', { workspace_id: workspaceId, tags: ['dates'] });
    expect(listed).toMatchObject({ count: 1, total: 1, memories: [{ id: memory.id }] });
    const dry = await tool('forget_memories', { workspace_id: workspaceId, id: memory.id, dry_run: true });
    expect(dry).toMatchObject({ dry_run: true, deleted: 0, would_delete_ids: [memory.id] });
    expect((await tool('list_memories', { workspace_id: workspaceId })).total).toBe(1);
    expect(await tool('forget_memories', { workspace_id: workspaceId, id: memory.id })).toMatchObject({ dry_run: false, deleted_ids: [memory.id] });
  });

  it('secrets: set, list, get, delete', async () => {
    expect(await tool('set_secret', { workspace_id: workspaceId, key: 'API_TOKEN', value: 's3cr3t' })).toMatchObject({ key: 'API_TOKEN', created: true });
    expect((await tool('list_secrets', { workspace_id: workspaceId })).keys).toEqual([expect.objectContaining({ key: 'API_TOKEN' })]);
    expect(await tool('get_secret', { workspace_id: workspaceId, key: 'API_TOKEN' })).toMatchObject({ key: 'API_TOKEN', value: 's3cr3t' });
    expect(await tool('delete_secret', { workspace_id: workspaceId, key: 'API_TOKEN' })).toMatchObject({ deleted: true, key: 'API_TOKEN' });
  });

  it('messaging: send and wait for the answer, get and list tasks, read the inbox and answer', async () => {
    const task = await tool('send_message', { agent_id: echo.agent_id, text: 'ping' });
    const answered = task.status.state === 'completed' ? task : await tool('get_task', { task_id: task.id });
    expect(answered.status.state).toBe('completed');
    expect(answered.artifacts[0].parts).toEqual([{ kind: 'text', text: 'echo: ping' }]);
    expect((await tool('get_task', { task_id: task.id })).messages[0].parts).toEqual([{ kind: 'text', text: 'ping' }]);
    const listed = await tool('list_tasks', { context_id: task.contextId });
    expect(listed.tasks.map((t: { id: string }) => t.id)).toEqual([task.id]);

    // Someone asks the MCP agent; it reads its inbox and answers.
    const asked = await hub.ok(reader.api_key, 'SendMessage', { message: { role: 'user', parts: [{ kind: 'text', text: 'status?' }] }, configuration: { agentId: owner.agent_id } });
    const inbox = await tool('read_inbox', { wait_ms: 10_000 });
    expect(inbox.deliveries).toEqual([expect.objectContaining({ task_id: asked.id, from_agent_id: reader.agent_id })]);
    const done = await tool('update_task', { task_id: asked.id, state: 'completed', text: 'all green' });
    expect(done.status.state).toBe('completed');
    const seen = await hub.ok(reader.api_key, 'GetTask', { id: asked.id });
    expect(seen.artifacts[0].parts).toEqual([{ kind: 'text', text: 'all green' }]);
  });

  it('a read member storing a memory gets the refusal the JSON-RPC method gives', async () => {
    const args = { workspace_id: workspaceId, content: 'I should not be able to write this.' };
    const refused = await readerMcp.callTool({ name: 'store_memory', arguments: args });
    const viaRpc = await hub.call(reader.api_key, 'x-hub/workspace.store', args);
    expect(refused.isError).toBe(true);
    expect(viaRpc.body.error).toMatchObject({ code: -32102, data: { reason: 'permission_required' } });
    expect((refused.structuredContent as { error: unknown }).error).toEqual(viaRpc.body.error);
    expect((refused.content as { text: string }[])[0]!.text).toBe(`Error -32102: ${viaRpc.body.error!.message}`);
  });

  it('bad arguments are -32602 naming the field, of the tool or of the method', async () => {
    const noText = await mcp.callTool({ name: 'send_message', arguments: { agent_id: echo.agent_id } });
    expect(noText.structuredContent).toMatchObject({ error: { code: -32602, data: { field: 'text' } } });
    const longTag = await mcp.callTool({ name: 'store_memory', arguments: { workspace_id: workspaceId, content: 'x', tags: ['t'.repeat(65)] } });
    expect(longTag.structuredContent).toMatchObject({ error: { code: -32602, data: { field: 'tags.0' } } });
    // A tool's numeric argument has the method's range, and a refusal names the argument (issue 14 item 5).
    const tooLong = await mcp.callTool({ name: 'get_task', arguments: { task_id: 'task_x', history_length: 3e9 } });
    expect(tooLong.structuredContent).toMatchObject({ error: { code: -32602, data: { field: 'history_length' } } });
  });

  it('workspace memories are resources; reading one of a stranger\'s workspaces is refused with -32100', async () => {
    await hub.ok(owner.api_key, 'x-hub/workspace.store', { workspace_id: workspaceId, content: 'Budget is 10k.', type: 'fact' });
    const { resources } = await mcp.listResources();
    const uri = `agenthub://workspaces/${workspaceId}/memories`;
    expect(resources).toEqual([expect.objectContaining({ uri, name: 'Research memories', mimeType: 'application/json' })]);
    const { resourceTemplates } = await mcp.listResourceTemplates();
    expect(resourceTemplates.map((t) => t.uriTemplate)).toEqual(['agenthub://workspaces/{workspace_id}/memories']);
    const read = await mcp.readResource({ uri });
    expect(JSON.parse((read.contents[0] as { text: string }).text).memories).toEqual([expect.objectContaining({ content: 'Budget is 10k.' })]);

    const outsider = await hub.agent('mcp-acme', 'outsider');
    const outsiderMcp = await connect(hub, outsider);
    try {
      const refused = await outsiderMcp.readResource({ uri }).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(McpError);
      expect(refused).toMatchObject({ code: -32100 });
    } finally {
      await outsiderMcp.close();
    }
  });

  it('refuses a missing or unknown key with 401, and GET with 405', async () => {
    const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } };
    const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
    for (const auth of [{}, { Authorization: `Bearer ahk_${'x'.repeat(43)}` }] as Record<string, string>[]) {
      const response = await fetch(`${hub.url}/mcp`, { method: 'POST', headers: { ...headers, ...auth }, body: JSON.stringify(initialize) });
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Bearer');
      expect(await response.json()).toMatchObject({ error: { code: -32000 } });
    }
    const stranger = new Client({ name: 'stranger', version: '1' });
    await expect(stranger.connect(new StreamableHTTPClientTransport(new URL('/mcp', hub.url)))).rejects.toThrow();
    const get = await fetch(`${hub.url}/mcp`, { headers: { Authorization: `Bearer ${owner.api_key}`, Accept: 'text/event-stream' } });
    expect(get.status).toBe(405);
  });

  it('examples/mcp-client.mjs runs as the guide says', async () => {
    const example = fileURLToPath(new URL('../../../examples/mcp-client.mjs', import.meta.url));
    const { stdout } = await promisify(execFile)(process.execPath, [example], {
      env: { ...process.env, AGENTHUB_URL: hub.url, AGENTHUB_API_KEY: owner.api_key },
      timeout: 120_000,
    });
    expect(stdout).toContain('tools: list_workspaces, get_workspace');
    expect(stdout).toMatch(/^Research: The launch moved to March 3rd\. \(score 0\.\d\d\)$/m);
  });

  it('every tool was called above', () => {
    expect([...called].sort()).toEqual(MCP_TOOLS.map((t) => t.name).sort());
  });
});

// An MCP client using a workspace through the hub's MCP endpoint: it lists the tools, finds its
// workspaces, stores a memory and searches for it.
//
//   AGENTHUB_URL=http://127.0.0.1:8080 AGENTHUB_API_KEY=ahk_… node examples/mcp-client.mjs
//
// The agent needs a workspace it can write to (x-hub/workspace.create, see the README).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const url = new URL('/mcp', process.env.AGENTHUB_URL ?? 'http://127.0.0.1:8080');
const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: `Bearer ${process.env.AGENTHUB_API_KEY}` } } });
const client = new Client({ name: 'agenthub-example', version: '1.0.0' });
await client.connect(transport);

const call = async (name, args = {}) => {
  const result = await client.callTool({ name, arguments: args });
  if (result.isError) throw new Error(`${name}: ${result.content[0].text}`);
  return result.structuredContent;
};

console.log('tools:', (await client.listTools()).tools.map((t) => t.name).join(', '));
const { workspaces } = await call('list_workspaces');
const workspace = workspaces.find((w) => w.role !== 'read');
if (!workspace) throw new Error('create a workspace first (README, "First calls")');
await call('store_memory', { workspace_id: workspace.id, content: 'The launch moved to March 3rd.', type: 'decision' });
const { memories } = await call('query_memories', { workspace_id: workspace.id, query: 'When is the launch?', limit: 1 });
console.log(`${workspace.name}: ${memories[0].content} (score ${memories[0].score.toFixed(2)})`);
await client.close();

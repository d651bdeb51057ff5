import type { IncomingMessage, ServerResponse } from 'node:http';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import { HubError, Reason, type Logger, type Principal } from '@agenthub/runtime';
import { BodyTooLarge, readBody } from '../app.js';
import type { Authenticator } from '../auth.js';
import { protocolError, RpcCode, toRpcError, type RpcError } from '../errors.js';
import type { JsonRpcHandler, RpcContext } from '../jsonrpc.js';
import type { Limits } from '../limits/index.js';
import type { Route } from '../route.js';
import { describeTool, paramsOf, TOOLS, type ToolDescription } from './tools.js';

export { TOOLS, describeTool } from './tools.js';

export interface McpOptions {
  /** The agent JSON-RPC handler of `POST /a2a`: every tool call goes through it. */
  rpc: JsonRpcHandler;
  /** Its method table, whose params schemas describe the tools. */
  methods: ReadonlyMap<string, Route>;
  authenticator: Authenticator;
  /**
   * The agent's waiting-call cap (HUB_MAX_WAITING_PER_AGENT), which a tool call that waits (a send
   * waiting for its answer, an inbox read with `wait_ms`) counts against like the JSON-RPC call
   * it makes; absent, nothing is capped.
   */
  limits?: Pick<Limits, 'holdWaiting'>;
  maxBodyBytes: number;
  log: Logger;
}

/** `POST /mcp`, `GET /mcp`, `DELETE /mcp` on the gateway's HTTP server. */
export type McpEndpoint = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

const SERVER_INFO = { name: 'agenthub', title: 'AgentHub', version: '1.0.0' };
const MEMORIES_URI = /^agenthub:\/\/workspaces\/([^/]+)\/memories$/;
/** Memories a resource read returns: the method's largest page. */
const RESOURCE_MEMORIES = 200;

/**
 * The hub as an MCP server (Streamable HTTP, stateless: each POST is a whole exchange, answered
 * as JSON). The caller authenticates with its API key as a bearer token; each tool is one
 * agent JSON-RPC method called through the same handler as `POST /a2a`, so validation,
 * authorization and errors are the same. A refusal is a tool result with `isError` and the
 * JSON-RPC error (code, message, data.reason) as `structuredContent.error`.
 */
export function mcpEndpoint(options: McpOptions): McpEndpoint {
  const tools = TOOLS.map((tool) => describeTool(tool, options.methods));
  const byName = new Map(TOOLS.map((tool) => [tool.name, tool]));
  let calls = 0;

  const serve: McpEndpoint = async (req, res) => {
    if (req.method !== 'POST') {
      // Stateless: no session to stream server-initiated messages on, none to delete.
      return reply(res, 405, { jsonrpc: '2.0', id: null, error: protocolError(RpcCode.INVALID_REQUEST, 'Method not allowed: this endpoint is stateless; use POST') }, { Allow: 'POST' });
    }
    // Created before authentication, whose lookups stop when the client leaves.
    const left = new AbortController();
    res.once('close', () => left.abort());
    let body: unknown;
    try {
      body = JSON.parse((await readBody(req, options.maxBodyBytes)).toString('utf8'));
    } catch (err) {
      if (err instanceof BodyTooLarge) {
        return reply(res, 413, { jsonrpc: '2.0', id: null, error: protocolError(RpcCode.INVALID_REQUEST, `Invalid Request: the body exceeds ${options.maxBodyBytes} bytes`) }, { Connection: 'close' });
      }
      if (!(err instanceof SyntaxError)) throw err;
      return reply(res, 400, { jsonrpc: '2.0', id: null, error: protocolError(RpcCode.PARSE_ERROR, 'Parse error: the body is not valid JSON') });
    }
    let principal: Principal;
    try {
      ({ principal } = await options.authenticator.agent(req.headers.authorization, left.signal));
    } catch (err) {
      const hubError = HubError.from(err);
      if (hubError.reason === Reason.UNAUTHENTICATED) {
        return reply(res, 401, { jsonrpc: '2.0', id: null, error: protocolError(RpcCode.UNAUTHENTICATED, 'Unauthorized: Missing or invalid API key') }, { 'WWW-Authenticate': 'Bearer' });
      }
      return reply(res, 503, { jsonrpc: '2.0', id: null, error: toRpcError(hubError) });
    }

    const call = async (method: string, params: Record<string, unknown>, signal: AbortSignal) => {
      const ctx: RpcContext = { principal, signal: AbortSignal.any([signal, left.signal]) };
      const response = await options.rpc.handle({ jsonrpc: '2.0', id: ++calls, method, params }, ctx);
      const single = Array.isArray(response) ? response[0] : response;
      return single?.error ? { error: single.error } : { result: single?.result };
    };

    const server = new Server(SERVER_INFO, { capabilities: { tools: {}, resources: {} } });
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: tools as ToolDescription[] as never }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
      const tool = byName.get(request.params.name);
      if (!tool) throw new McpError(RpcCode.INVALID_PARAMS, `Unknown tool: ${request.params.name}`, { field: 'name' });
      let params: Record<string, unknown>;
      try {
        params = paramsOf(tool, request.params.arguments ?? {});
      } catch (err) {
        return toolError(toRpcError(HubError.from(err)));
      }
      // `POST /mcp` was admitted before its messages were read: a waiting call takes its slot here.
      const held = (await options.limits?.holdWaiting(principal, { method: tool.method, params })) ?? { release: () => {} };
      if ('error' in held) return toolError(held.error);
      const { result, error } = await call(tool.method, params, extra.signal).finally(held.release);
      if (error) return toolError(error);
      return { content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: result as Record<string, unknown> };
    });
    server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
      resourceTemplates: [
        {
          uriTemplate: 'agenthub://workspaces/{workspace_id}/memories',
          name: 'workspace-memories',
          title: 'Workspace memories',
          description: `The newest ${RESOURCE_MEMORIES} memories of a workspace you are a member of.`,
          mimeType: 'application/json',
        },
      ],
    }));
    server.setRequestHandler(ListResourcesRequestSchema, async (_request, extra) => {
      const { result, error } = await call('x-hub/workspace.list', {}, extra.signal);
      if (error) throw new McpError(error.code, error.message, error.data);
      const workspaces = (result as { workspaces: { id: string; name: string; description: string }[] }).workspaces;
      return {
        resources: workspaces.map((w) => ({
          uri: `agenthub://workspaces/${encodeURIComponent(w.id)}/memories`,
          name: `${w.name} memories`,
          ...(w.description ? { description: w.description } : {}),
          mimeType: 'application/json',
        })),
      };
    });
    server.setRequestHandler(ReadResourceRequestSchema, async (request, extra) => {
      const match = MEMORIES_URI.exec(request.params.uri);
      if (!match) throw new McpError(RpcCode.INVALID_PARAMS, 'Invalid params: uri must be agenthub://workspaces/{workspace_id}/memories', { field: 'uri' });
      const { result, error } = await call('x-hub/workspace.memories', { workspace_id: decodeURIComponent(match[1]!), limit: RESOURCE_MEMORIES }, extra.signal);
      if (error) throw new McpError(error.code, error.message, error.data);
      return { contents: [{ uri: request.params.uri, mimeType: 'application/json', text: JSON.stringify(result) }] };
    });

    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.once('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  };
  return async (req, res) => {
    try {
      await serve(req, res);
    } catch (err) {
      options.log.error({ err, path: '/mcp' }, 'request failed');
      if (!res.headersSent) reply(res, 500, { jsonrpc: '2.0', id: null, error: protocolError(RpcCode.INTERNAL_ERROR, 'Internal error') });
      else res.end();
    }
  };
}

function toolError(error: RpcError): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: `Error ${error.code}: ${error.message}` }], structuredContent: { error } };
}

function reply(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

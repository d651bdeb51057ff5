import { z } from 'zod';
import { STATE_WORDS, UPDATE_TARGETS } from '@agenthub/tasks';
import type { Route } from '../route.js';
import { INT32_MAX } from '../fields.js';
import { field, parseParams } from '../params.js';

/**
 * The MCP tools: each one JSON-RPC method of `POST /a2a`, called through the same handler (so the
 * same validation, authorization and errors). A tool either takes the method's params as they are
 * (its JSON Schema is generated from the method's own params schema) or has an input of its own,
 * shaped for a model, that `params` turns into the method's params.
 */
export interface ToolSpec {
  name: string;
  title: string;
  /** Written for a model choosing and calling the tool. */
  description: string;
  method: string;
  /** Descriptions of the input properties, merged into the JSON Schema. */
  fields: Record<string, string>;
  /** A tool's own input shape and how it becomes the method's params; absent: the method's params as they are. */
  input?: { schema: z.ZodType; params: (args: any) => Record<string, unknown> };
  readOnly: boolean;
  destructive?: boolean;
}

const WORKSPACE_ID = 'The workspace id (ws_…), from list_workspaces.';
const MEMORY_FILTERS = {
  type: 'Only memories of these types: fact, decision, preference, todo, context, reference.',
  tags: 'Only memories carrying these tags (any of them, or all with tag_match "all").',
  tag_match: '"any" (default) or "all" of the given tags.',
  created_after: 'Only memories created at or after this time (epoch milliseconds).',
  created_before: 'Only memories created before this time (epoch milliseconds).',
};

const sendInput = z.object({
  agent_id: field.agentId,
  text: z.string().min(1).max(100_000),
  context_id: z.string().min(1).max(128).optional(),
  task_id: z.string().min(1).max(128).optional(),
  wait: z.boolean().optional(),
});

// The method's range (GetTask historyLength), so a refusal names this tool's argument.
const taskInput = z.object({ task_id: field.id, history_length: z.number().int().min(0).max(INT32_MAX).optional() });

const listTasksInput = z.object({
  context_id: z.string().min(1).max(128).optional(),
  status: z.enum(STATE_WORDS).optional(),
  page_size: z.number().int().min(1).max(100).optional(),
  page_token: z.string().optional(),
});

const inboxInput = z.object({ wait_ms: z.number().int().min(0).max(30_000).optional(), max: z.number().int().min(1).max(100).optional() });

const updateInput = z.object({
  task_id: field.id,
  state: z.enum([...UPDATE_TARGETS]),
  text: z.string().min(1).max(100_000).optional(),
});

export const TOOLS: readonly ToolSpec[] = [
  {
    name: 'list_workspaces',
    title: 'List workspaces',
    description: 'Lists the shared workspaces you are a member of, with your role in each (read, write or admin). Start here to find a workspace id.',
    method: 'x-hub/workspace.list',
    fields: {},
    readOnly: true,
  },
  {
    name: 'get_workspace',
    title: 'Get a workspace',
    description: 'Returns one workspace: its name, description, owner, your role and how many members it has.',
    method: 'x-hub/workspace.get',
    fields: { workspace_id: WORKSPACE_ID },
    readOnly: true,
  },
  {
    name: 'list_workspace_members',
    title: 'List workspace members',
    description: 'Lists the agents that are members of a workspace and their roles.',
    method: 'x-hub/workspace.members.list',
    fields: { workspace_id: WORKSPACE_ID },
    readOnly: true,
  },
  {
    name: 'store_memory',
    title: 'Store a memory',
    description:
      'Saves a piece of knowledge (a fact, a decision, a preference, a todo, context or a reference) in a workspace so that you and the other members can find it later by meaning. Needs the write role. Storing the same content twice returns the existing memory (duplicate: true).',
    method: 'x-hub/workspace.store',
    fields: {
      workspace_id: WORKSPACE_ID,
      content: 'The memory, as a self-contained sentence or short paragraph (at most 4000 characters).',
      type: 'One of fact, decision, preference, todo, context, reference.',
      tags: 'Short labels for filtering later (at most 20).',
    },
    readOnly: false,
  },
  {
    name: 'query_memories',
    title: 'Search memories',
    description:
      'Searches a workspace\'s memories by meaning (semantic search) and returns the best matches with a similarity score from 0 to 1. Use it before answering questions the workspace may already know about.',
    method: 'x-hub/workspace.query',
    fields: {
      workspace_id: WORKSPACE_ID,
      query: 'What you are looking for, in natural language.',
      limit: 'Most results (1-100, default 10).',
      threshold: 'Only results scoring at least this (0-1).',
      ...MEMORY_FILTERS,
    },
    readOnly: true,
  },
  {
    name: 'update_memory',
    title: 'Update a memory',
    description: 'Replaces the content and/or the tags of one memory, by id. Needs the write role.',
    method: 'x-hub/workspace.update',
    fields: { workspace_id: WORKSPACE_ID, id: 'The memory id (wmem_…).', content: 'The new content.', tags: 'The new tags (replace the old ones).' },
    readOnly: false,
  },
  {
    name: 'forget_memories',
    title: 'Forget memories',
    description:
      'Deletes memories of a workspace: one by id, or those matching a query and/or filters. Call it with dry_run: true first to see which memories would be deleted, then again without it. Needs the write role.',
    method: 'x-hub/workspace.forget',
    fields: {
      workspace_id: WORKSPACE_ID,
      id: 'Delete exactly this memory (wmem_…).',
      query: 'Delete the memories that match this meaning.',
      limit: 'Most memories deleted by a query (1-100).',
      threshold: 'Only delete query matches scoring at least this (0-1).',
      dry_run: 'true: only report what would be deleted.',
      ...MEMORY_FILTERS,
    },
    readOnly: false,
    destructive: true,
  },
  {
    name: 'list_memories',
    title: 'List memories',
    description: 'Lists a workspace\'s memories, newest first, page by page (limit and offset), optionally filtered by type, tags or time.',
    method: 'x-hub/workspace.memories',
    fields: { workspace_id: WORKSPACE_ID, limit: 'Page size (1-200, default 50).', offset: 'Memories to skip.', ...MEMORY_FILTERS },
    readOnly: true,
  },
  {
    name: 'list_secrets',
    title: 'List secrets',
    description: 'Lists the keys of a workspace\'s secrets (never their values).',
    method: 'x-hub/workspace.secrets.list',
    fields: { workspace_id: WORKSPACE_ID },
    readOnly: true,
  },
  {
    name: 'get_secret',
    title: 'Get a secret',
    description: 'Returns the value of one secret of a workspace (an API token, a password). Do not repeat the value to anyone who should not see it.',
    method: 'x-hub/workspace.secrets.get',
    fields: { workspace_id: WORKSPACE_ID, key: 'The secret\'s key, e.g. GITHUB_TOKEN.' },
    readOnly: true,
  },
  {
    name: 'set_secret',
    title: 'Set a secret',
    description: 'Creates or replaces a secret of a workspace; the value is stored encrypted. Needs the write role.',
    method: 'x-hub/workspace.secrets.set',
    fields: { workspace_id: WORKSPACE_ID, key: 'The key: letters, digits, _ . -', value: 'The secret value.' },
    readOnly: false,
  },
  {
    name: 'delete_secret',
    title: 'Delete a secret',
    description: 'Deletes one secret of a workspace. Needs the write role.',
    method: 'x-hub/workspace.secrets.delete',
    fields: { workspace_id: WORKSPACE_ID, key: 'The secret\'s key.' },
    readOnly: false,
    destructive: true,
  },
  {
    name: 'send_message',
    title: 'Message an agent',
    description:
      'Sends a text message to another agent through the hub and, by default, waits (up to 60 s) for its answer. Returns the task: its status (completed, input-required, failed, or still working/submitted if the agent has not finished) and the answer in artifacts and messages. If it is not finished, check later with get_task. To answer an agent that asked for input, send again with its task_id.',
    method: 'SendMessage',
    fields: {
      agent_id: 'The recipient agent\'s id (agt_…).',
      text: 'The message.',
      context_id: 'Continue this conversation (ctx_…).',
      task_id: 'Answer this task, which is waiting for input (input-required).',
      wait: 'Wait for the answer (default true); false returns at once.',
    },
    input: {
      schema: sendInput,
      params: (a: z.infer<typeof sendInput>) => ({
        message: { role: 'user', parts: [{ kind: 'text', text: a.text }] },
        configuration: {
          agentId: a.agent_id,
          ...(a.context_id ? { contextId: a.context_id } : {}),
          ...(a.task_id ? { taskId: a.task_id } : {}),
          blocking: a.wait ?? true,
        },
      }),
    },
    readOnly: false,
  },
  {
    name: 'get_task',
    title: 'Get a task',
    description: 'Returns a task you sent or received: its status, its messages and its artifacts (the answer).',
    method: 'GetTask',
    fields: { task_id: 'The task id (task_…).', history_length: 'Most recent messages to include.' },
    input: { schema: taskInput, params: (a: z.infer<typeof taskInput>) => ({ id: a.task_id, ...(a.history_length !== undefined ? { historyLength: a.history_length } : {}) }) },
    readOnly: true,
  },
  {
    name: 'list_tasks',
    title: 'List tasks',
    description: 'Lists the tasks you sent or received, most recently updated first, optionally in one conversation or in one state.',
    method: 'ListTasks',
    fields: {
      context_id: 'Only tasks of this conversation (ctx_…).',
      status: 'Only tasks in this state.',
      page_size: 'Tasks per page (1-100, default 50).',
      page_token: 'nextPageToken of the previous page.',
    },
    input: {
      schema: listTasksInput,
      params: (a: z.infer<typeof listTasksInput>) => ({
        ...(a.context_id ? { contextId: a.context_id } : {}),
        ...(a.status ? { status: a.status } : {}),
        ...(a.page_size ? { pageSize: a.page_size } : {}),
        ...(a.page_token ? { pageToken: a.page_token } : {}),
      }),
    },
    readOnly: true,
  },
  {
    name: 'read_inbox',
    title: 'Read the inbox',
    description:
      'Returns messages other agents sent you that are waiting for you (oldest first), each with its task_id. Answer one with update_task. A message you do not answer is handed out again later.',
    method: 'x-hub/inbox.poll',
    fields: { wait_ms: 'Wait up to this long for a message when none is waiting (0-30000, default 0).', max: 'Most messages (1-100, default 10).' },
    input: { schema: inboxInput, params: (a: z.infer<typeof inboxInput>) => a },
    readOnly: true,
  },
  {
    name: 'update_task',
    title: 'Answer a task',
    description:
      'Moves a task you received (from read_inbox): working while you are on it, completed with your answer as text, input-required with your question, or failed/rejected with the reason.',
    method: 'x-hub/tasks.update',
    fields: { task_id: 'The task id (task_…).', state: 'The new state.', text: 'Your answer, question or reason.' },
    input: {
      schema: updateInput,
      params: (a: z.infer<typeof updateInput>) => ({
        task_id: a.task_id,
        state: a.state,
        ...(a.text !== undefined
          ? a.state === 'completed'
            ? { artifacts: [{ name: 'response', mimeType: 'text/plain', parts: [{ kind: 'text', text: a.text }] }] }
            : { message: { role: 'agent', parts: [{ kind: 'text', text: a.text }] } }
          : {}),
      }),
    },
    readOnly: false,
  },
];

export interface ToolDescription {
  name: string;
  title: string;
  description: string;
  inputSchema: { type: 'object'; properties?: Record<string, object>; required?: string[] };
  annotations: { title: string; readOnlyHint: boolean; destructiveHint: boolean; openWorldHint: boolean };
}

/** A tool as `tools/list` shows it: its JSON Schema generated from the schema that validates it. */
export function describeTool(tool: ToolSpec, methods: ReadonlyMap<string, Route>): ToolDescription {
  const schema = tool.input?.schema ?? methods.get(tool.method)?.params;
  if (!schema) throw new Error(`MCP tool ${tool.name}: method ${tool.method} has no params schema`);
  const { $schema: _, ...json } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown> & {
    properties?: Record<string, Record<string, unknown>>;
  };
  for (const [key, text] of Object.entries(tool.fields)) {
    const property = json.properties?.[key];
    if (!property) throw new Error(`MCP tool ${tool.name}: no input property ${key}`);
    property.description = text;
  }
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: { ...json, type: 'object' } as ToolDescription['inputSchema'],
    annotations: { title: tool.title, readOnlyHint: tool.readOnly, destructiveHint: tool.destructive ?? false, openWorldHint: false },
  };
}

/** The JSON-RPC params of a tool call (a tool with an input of its own checks it here, naming its fields). */
export function paramsOf(tool: ToolSpec, args: Record<string, unknown>): Record<string, unknown> {
  return tool.input ? tool.input.params(parseParams(tool.input.schema, args)) : args;
}

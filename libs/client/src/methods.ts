import type {
  AgentInfo,
  ArtifactInput,
  Delivery,
  Grant,
  Member,
  Memory,
  MemoryFilter,
  MemoryType,
  Message,
  Role,
  SendParams,
  Task,
  TaskEvent,
  TaskState,
  Webhook,
  WebhookDelivery,
  Workspace,
} from './types.js';

type WorkspaceRef = { workspace_id: string };
/** A workspace's webhooks, or with `scope: "agent"` (and no workspace_id) the caller's agent-wide ones. */
type WebhookScope = { workspace_id?: string; scope?: 'workspace' | 'agent' };
type WebhookRef = WebhookScope & { webhook_id: string };
type Unary<P, R> = { params: P; result: R; stream: false };
type Stream<P, E> = { params: P; result: E; stream: true };

/**
 * Every agent-facing method of `POST /a2a`: its params and its result (for a stream, the type of
 * each event). The test `libs/client/test/methods.test.ts` fails when the gateway's method table
 * and this one differ in a name or in being a stream.
 */
export interface HubMethods {
  'x-hub/workspace.create': Unary<{ name: string; description?: string }, { workspace: Workspace }>;
  'x-hub/workspace.get': Unary<WorkspaceRef, { workspace: Workspace; role: Role; member_count: number }>;
  'x-hub/workspace.list': Unary<Record<string, never>, { workspaces: (Workspace & { role: Role })[]; count: number }>;
  'x-hub/workspace.delete': Unary<WorkspaceRef, { deleted: true; workspace_id: string }>;
  'x-hub/workspace.members.add': Unary<WorkspaceRef & { agent_id: string; role: Role }, { member: Member; created: boolean }>;
  'x-hub/workspace.members.remove': Unary<WorkspaceRef & { agent_id: string }, { removed: true; workspace_id: string; agent_id: string }>;
  'x-hub/workspace.members.list': Unary<WorkspaceRef, { members: Member[]; count: number }>;
  'x-hub/workspace.types': Unary<Record<string, never>, { types: string[]; descriptions: Record<string, string> }>;

  'x-hub/workspace.store': Unary<WorkspaceRef & { content: string; type?: MemoryType; tags?: string[] }, { memory: Memory; duplicate: boolean }>;
  'x-hub/workspace.query': Unary<
    WorkspaceRef & MemoryFilter & { query: string; limit?: number; threshold?: number },
    { memories: Memory[]; count: number; model: string }
  >;
  'x-hub/workspace.update': Unary<WorkspaceRef & { id: string; content?: string; tags?: string[] }, { memory: Memory; reembedded: boolean }>;
  'x-hub/workspace.forget': Unary<
    WorkspaceRef & MemoryFilter & { id?: string; query?: string; limit?: number; threshold?: number; dry_run?: boolean },
    { dry_run: boolean; deleted: number; deleted_ids: string[]; would_delete_ids?: string[]; memories: Memory[] }
  >;
  'x-hub/workspace.memories': Unary<
    WorkspaceRef & MemoryFilter & { limit?: number; offset?: number },
    { memories: Memory[]; count: number; total: number; limit: number; offset: number; has_more: boolean }
  >;

  'x-hub/grants.request': Unary<{ agent_id: string }, { grant: Grant; created: boolean }>;
  'x-hub/grants.approve': Unary<{ grant_id: string }, { grant: Grant }>;
  'x-hub/grants.revoke': Unary<{ grant_id: string }, { grant: Grant }>;
  'x-hub/grants.list': Unary<{ status?: Grant['status']; page_size?: number; page_token?: string }, { grants: Grant[]; count: number; next_page_token: string | null }>;
  'x-hub/agents.get': Unary<{ agent_id: string }, { agent: AgentInfo }>;

  'x-hub/workspace.secrets.set': Unary<WorkspaceRef & { key: string; value: string }, { key: string; created: boolean; created_at: number; updated_at: number }>;
  'x-hub/workspace.secrets.get': Unary<WorkspaceRef & { key: string }, { key: string; value: string; created_at: number; updated_at: number }>;
  'x-hub/workspace.secrets.list': Unary<WorkspaceRef, { keys: { key: string; created_at: number; updated_at: number }[]; count: number }>;
  'x-hub/workspace.secrets.delete': Unary<WorkspaceRef & { key: string }, { deleted: true; workspace_id: string; key: string }>;

  SendMessage: Unary<SendParams, Task>;
  GetTask: Unary<{ id: string; historyLength?: number }, Task>;
  CancelTask: Unary<{ id: string }, Task>;
  ListTasks: Unary<
    { contextId?: string; status?: TaskState; pageSize?: number; pageToken?: string; historyLength?: number; lastUpdatedAfter?: string; includeArtifacts?: boolean },
    { tasks: Task[]; nextPageToken: string; totalSize: number }
  >;
  SendStreamingMessage: Stream<SendParams, TaskEvent>;
  SubscribeToTask: Stream<{ id: string; historyLength?: number }, TaskEvent>;
  'x-hub/inbox.poll': Unary<{ wait_ms?: number; max?: number }, { deliveries: Delivery[] }>;
  'x-hub/inbox.stream': Stream<{ max?: number }, { kind: 'delivery' } & Delivery>;
  'x-hub/inbox.ack': Unary<{ delivery_id: string }, { acked: boolean }>;
  'x-hub/tasks.update': Unary<
    { task_id: string; state: 'working' | 'input-required' | 'completed' | 'failed' | 'rejected'; message?: Message; artifacts?: ArtifactInput[] },
    Task
  >;

  'x-hub/webhooks.create': Unary<WebhookScope & { url: string; events?: string[]; description?: string }, { webhook: Webhook }>;
  'x-hub/webhooks.list': Unary<WebhookScope, { webhooks: Webhook[] }>;
  'x-hub/webhooks.get': Unary<WebhookRef, { webhook: Webhook }>;
  'x-hub/webhooks.delete': Unary<WebhookRef, { deleted: true; webhook_id: string }>;
  'x-hub/webhooks.rotate_secret': Unary<WebhookRef, { webhook: Webhook; previous_secret_expires_at: string }>;
  'x-hub/webhooks.test': Unary<
    WebhookRef,
    { delivery: { event_id: string; status_code: number; latency_ms: number; error?: string; delivered: boolean } }
  >;
  'x-hub/webhooks.deliveries': Unary<WebhookRef & { limit?: number; status?: WebhookDelivery['status'] }, { deliveries: WebhookDelivery[] }>;
  'x-hub/webhooks.replay': Unary<WebhookRef & ({ event_id: string; since?: never } | { since: string; event_id?: never }), { replayed: number }>;
}

export type MethodName = keyof HubMethods;
export type UnaryMethod = { [K in MethodName]: HubMethods[K]['stream'] extends false ? K : never }[MethodName];
export type StreamMethod = { [K in MethodName]: HubMethods[K]['stream'] extends true ? K : never }[MethodName];
export type ParamsOf<M extends MethodName> = HubMethods[M]['params'];
export type ResultOf<M extends MethodName> = HubMethods[M]['result'];

/** Each method and whether it answers with a stream: the runtime twin of HubMethods. */
export const METHODS: { readonly [K in MethodName]: { readonly stream: HubMethods[K]['stream'] } } = {
  'x-hub/workspace.create': { stream: false },
  'x-hub/workspace.get': { stream: false },
  'x-hub/workspace.list': { stream: false },
  'x-hub/workspace.delete': { stream: false },
  'x-hub/workspace.members.add': { stream: false },
  'x-hub/workspace.members.remove': { stream: false },
  'x-hub/workspace.members.list': { stream: false },
  'x-hub/workspace.types': { stream: false },
  'x-hub/workspace.store': { stream: false },
  'x-hub/workspace.query': { stream: false },
  'x-hub/workspace.update': { stream: false },
  'x-hub/workspace.forget': { stream: false },
  'x-hub/workspace.memories': { stream: false },
  'x-hub/grants.request': { stream: false },
  'x-hub/grants.approve': { stream: false },
  'x-hub/grants.revoke': { stream: false },
  'x-hub/grants.list': { stream: false },
  'x-hub/agents.get': { stream: false },
  'x-hub/workspace.secrets.set': { stream: false },
  'x-hub/workspace.secrets.get': { stream: false },
  'x-hub/workspace.secrets.list': { stream: false },
  'x-hub/workspace.secrets.delete': { stream: false },
  SendMessage: { stream: false },
  GetTask: { stream: false },
  CancelTask: { stream: false },
  ListTasks: { stream: false },
  SendStreamingMessage: { stream: true },
  SubscribeToTask: { stream: true },
  'x-hub/inbox.poll': { stream: false },
  'x-hub/inbox.stream': { stream: true },
  'x-hub/inbox.ack': { stream: false },
  'x-hub/tasks.update': { stream: false },
  'x-hub/webhooks.create': { stream: false },
  'x-hub/webhooks.list': { stream: false },
  'x-hub/webhooks.get': { stream: false },
  'x-hub/webhooks.delete': { stream: false },
  'x-hub/webhooks.rotate_secret': { stream: false },
  'x-hub/webhooks.test': { stream: false },
  'x-hub/webhooks.deliveries': { stream: false },
  'x-hub/webhooks.replay': { stream: false },
};

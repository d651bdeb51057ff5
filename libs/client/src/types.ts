/** The JSON shapes of the hub's interface (README "Messaging methods", "Workspace methods"). */

export type Role = 'read' | 'write' | 'admin';
export type MemoryType = 'fact' | 'decision' | 'preference' | 'todo' | 'context' | 'reference';
export type TaskState = 'submitted' | 'working' | 'input-required' | 'completed' | 'failed' | 'canceled' | 'rejected';

export type Part =
  | { kind: 'text'; text: string }
  | { kind: 'file'; mimeType: string; name?: string; data?: string; uri?: string }
  | { kind: 'data'; mimeType: string; data: string };

export interface Message {
  role: 'user' | 'agent';
  parts: Part[];
  messageId?: string;
  contextId?: string;
  taskId?: string;
}

export interface Artifact {
  id: string;
  name?: string;
  mimeType?: string;
  parts: Part[];
}

/** An artifact as an agent hands it in (`x-hub/tasks.update`); the hub assigns its id. */
export interface ArtifactInput {
  name?: string;
  mimeType?: string;
  parts: Part[];
}

export interface Task {
  id: string;
  contextId: string;
  status: { state: TaskState; timestamp: string; message?: Message };
  messages?: Message[];
  artifacts: Artifact[];
}

export interface Workspace {
  id: string;
  name: string;
  description: string;
  owner_agent_id: string;
  created_at: number;
}

export interface Member {
  agent_id: string;
  agent_name: string;
  role: Role;
  added_at: number;
}

export interface Memory {
  id: string;
  workspace_id: string;
  content: string;
  type: MemoryType | string;
  tags: string[];
  /** Only on ranked results (query, forget by query). */
  score?: number;
  created_at: number;
  created_by: string;
  updated_at: number;
  updated_by: string;
}

export interface MemoryFilter {
  type?: MemoryType | MemoryType[];
  tags?: string[];
  tag_match?: 'any' | 'all';
  created_after?: number;
  created_before?: number;
}

export interface Grant {
  id: string;
  requester_agent_id: string;
  target_agent_id: string;
  status: 'pending' | 'approved' | 'revoked';
  created_at: number;
  updated_at: number;
}

export interface AgentInfo {
  id: string;
  tenant_id: string;
  name: string;
  endpoint_url: string | null;
  output_modes: string[];
  created_at: number;
}

/** One queued message for a connected agent (`x-hub/inbox.poll`, `x-hub/inbox.stream`). */
export interface Delivery {
  delivery_id: string;
  task_id: string;
  context_id: string;
  from_agent_id: string;
  message?: Message;
  created_at: number;
  attempt: number;
}

export interface Webhook {
  id: string;
  workspace_id: string;
  url: string;
  events: string[];
  description: string;
  enabled: boolean;
  disabled_reason?: string;
  disabled_at?: string;
  created_at: string;
  /** Only in the results of create and rotate_secret. */
  secret?: string;
}

export interface WebhookDelivery {
  event_id: string;
  event: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: { at: string; status_code?: number; latency_ms: number; error?: string }[];
  next_attempt_at?: string;
  created_at: string;
}

export interface SendConfiguration {
  agentId?: string;
  contextId?: string;
  taskId?: string;
  blocking?: boolean;
  historyLength?: number;
  acceptedOutputModes?: string[];
  /** Seconds a delivery may wait for an offline recipient; 0 fails at once. */
  'x-ttl'?: number;
}

export interface SendParams {
  message: Message;
  configuration?: SendConfiguration;
}

/** Events of `SendStreamingMessage` and `SubscribeToTask`. */
export type TaskEvent =
  | ({ kind: 'task' } & Task)
  | { kind: 'artifact-update'; taskId: string; contextId: string; artifact: Artifact }
  | { kind: 'status-update'; taskId: string; contextId: string; status: Task['status']; final: boolean };

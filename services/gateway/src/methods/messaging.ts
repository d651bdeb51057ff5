import type { GenService, GenServiceMethods } from '@bufbuild/protobuf/codegenv2';
import { messagingv1 } from '@agenthub/proto';
import { HubError } from '@agenthub/runtime';
import type { RpcContext } from '../jsonrpc.js';
import type { Clients, Route } from '../route.js';

/**
 * Messaging and tasks in the interface's dialect (A2A: camelCase, parts tagged by `kind`,
 * lowercase states, ISO timestamps): `SendMessage`, `GetTask`, `CancelTask`; and the inbox of
 * connected agents (`x-hub/inbox.poll`, `x-hub/inbox.ack`, `x-hub/tasks.update`).
 *
 * Params are checked here by hand so that each malformed part is named by index and field
 * (`message.parts[2].mimeType`); the messaging service checks them again.
 */

/** Largest inline `data` of a file part, in base64 characters (512 KiB decoded). */
export const MAX_INLINE_DATA_CHARS = 4 * Math.ceil((512 * 1024) / 3);
/** Parts per message or artifact. */
export const MAX_PARTS = 100;
/** Calls that may wait (blocking sends, inbox long-polls) get this long before the gateway gives up. */
const WAITING_CALL_MS = 70_000;

const { TaskState } = messagingv1;
const STATES: Record<string, messagingv1.TaskState> = {
  submitted: TaskState.SUBMITTED,
  working: TaskState.WORKING,
  'input-required': TaskState.INPUT_REQUIRED,
  completed: TaskState.COMPLETED,
  failed: TaskState.FAILED,
  canceled: TaskState.CANCELED,
  rejected: TaskState.REJECTED,
};
const stateWord = (state: messagingv1.TaskState) => Object.keys(STATES).find((k) => STATES[k] === state) ?? 'unknown';

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const bad = (field: string, problem: string) => HubError.invalidParams(field, problem);

function str(obj: Json, key: string, at: string, required: boolean): string | undefined {
  const value = obj[key];
  if (value === undefined || value === null) {
    if (required) throw bad(`${at}${key}`, 'is required');
    return undefined;
  }
  if (typeof value !== 'string') throw bad(`${at}${key}`, 'must be a string');
  if (required && value === '') throw bad(`${at}${key}`, 'must not be empty');
  return value;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** One wire part to its proto form, naming the field at fault. */
function partIn(raw: unknown, at: string): messagingv1.Part {
  if (!isObject(raw)) throw bad(at, 'must be an object');
  const p = `${at}.`;
  switch (raw.kind) {
    case 'text':
      return { $typeName: 'agenthub.messaging.v1.Part', content: { case: 'text', value: { $typeName: 'agenthub.messaging.v1.TextPart', text: str(raw, 'text', p, true)! } } };
    case 'file': {
      const mimeType = str(raw, 'mimeType', p, true)!;
      const name = str(raw, 'name', p, false) ?? '';
      const data = str(raw, 'data', p, false);
      const uri = str(raw, 'uri', p, false);
      if (data === undefined && uri === undefined) throw bad(`${p}data`, 'or uri is required');
      if (data !== undefined && uri !== undefined) throw bad(`${p}uri`, 'must not be given together with data');
      if (data !== undefined) {
        if (data.length > MAX_INLINE_DATA_CHARS) throw bad(`${p}data`, `must be at most ${MAX_INLINE_DATA_CHARS} base64 characters; send a uri for larger files`);
        if (data.length % 4 !== 0 || !BASE64.test(data)) throw bad(`${p}data`, 'must be base64');
      }
      if (uri !== undefined && !URL.canParse(uri)) throw bad(`${p}uri`, 'must be a URL');
      return {
        $typeName: 'agenthub.messaging.v1.Part',
        content: { case: 'file', value: { $typeName: 'agenthub.messaging.v1.FilePart', name, mimeType, data: data ?? '', uri: uri ?? '' } },
      };
    }
    case 'data':
      return {
        $typeName: 'agenthub.messaging.v1.Part',
        content: { case: 'data', value: { $typeName: 'agenthub.messaging.v1.DataPart', mimeType: str(raw, 'mimeType', p, true)!, data: str(raw, 'data', p, true)! } },
      };
    case undefined:
      throw bad(`${p}kind`, 'is required');
    default:
      throw bad(`${p}kind`, 'must be one of text, file, data');
  }
}

function partsIn(raw: unknown, at: string): messagingv1.Part[] {
  if (!Array.isArray(raw)) throw bad(at, raw === undefined ? 'is required' : 'must be an array');
  if (raw.length === 0) throw bad(at, 'must have at least 1 items');
  if (raw.length > MAX_PARTS) throw bad(at, `must have at most ${MAX_PARTS} items`);
  return raw.map((part, i) => partIn(part, `${at}[${i}]`));
}

function messageIn(raw: unknown, at: string, defaultRole: string): messagingv1.Message {
  if (!isObject(raw)) throw bad(at, raw === undefined ? 'is required' : 'must be an object');
  const role = str(raw, 'role', `${at}.`, false) ?? defaultRole;
  if (role !== 'user' && role !== 'agent') throw bad(`${at}.role`, 'must be one of user, agent');
  return {
    $typeName: 'agenthub.messaging.v1.Message',
    role,
    parts: partsIn(raw.parts, `${at}.parts`),
    messageId: str(raw, 'messageId', `${at}.`, false) ?? '',
  };
}

function partOut(part: messagingv1.Part) {
  const c = part.content;
  switch (c.case) {
    case 'text':
      return { kind: 'text', text: c.value.text };
    case 'file':
      return {
        kind: 'file',
        ...(c.value.name ? { name: c.value.name } : {}),
        mimeType: c.value.mimeType,
        ...(c.value.uri ? { uri: c.value.uri } : { data: c.value.data }),
      };
    case 'data':
      return { kind: 'data', mimeType: c.value.mimeType, data: c.value.data };
    default:
      return { kind: 'unknown' };
  }
}

function messageOut(m: messagingv1.Message) {
  return { role: m.role, parts: m.parts.map(partOut), ...(m.messageId ? { messageId: m.messageId } : {}) };
}

/** A Task as the interface shows it; `messages` only where asked for (GetTask, blocking sends). */
export function taskOut(task: messagingv1.Task | undefined, options: { messages: boolean }) {
  if (!task) return undefined;
  return {
    id: task.id,
    contextId: task.contextId,
    status: { state: stateWord(task.state), timestamp: new Date(Number(task.updatedAt)).toISOString() },
    ...(options.messages ? { messages: task.messages.map(messageOut) } : {}),
    artifacts: task.artifacts.map((a) => ({
      id: a.id,
      ...(a.name ? { name: a.name } : {}),
      ...(a.mimeType ? { mimeType: a.mimeType } : {}),
      parts: a.parts.map(partOut),
    })),
  };
}

function optionalInt(obj: Json, key: string, at: string, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  const value = obj[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value)) throw bad(`${at}${key}`, 'must be an integer');
  if (value < min) throw bad(`${at}${key}`, `must be at least ${min}`);
  if (value > max) throw bad(`${at}${key}`, `must be at most ${max}`);
  return value;
}

function optionalBool(obj: Json, key: string, at: string): boolean | undefined {
  const value = obj[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw bad(`${at}${key}`, 'must be a boolean');
  return value;
}

/** A method forwarding to one messaging RPC (the contract test walks `service` and `rpc`). */
function method(
  clients: Clients,
  rpc: keyof typeof messagingv1.MessagingService.method & string,
  build: (params: Json, ctx: RpcContext) => unknown,
  result: (response: any, params: Json) => unknown,
  timeoutMs?: number,
): Route {
  const service = messagingv1.MessagingService;
  return {
    service: service as unknown as GenService<GenServiceMethods>,
    rpc,
    async invoke(params, ctx) {
      const request = build(params, ctx);
      const client = clients.get(service.typeName);
      if (!client) throw new Error(`No client for ${service.typeName}`);
      const response = await client[rpc]!(request, { principal: ctx.principal, signal: ctx.signal, ...(timeoutMs ? { timeoutMs } : {}) });
      return result(response, params);
    },
  };
}

function sendRequest(params: Json, ctx: RpcContext) {
  const message = messageIn(params.message, 'message', 'user');
  const raw = params.configuration ?? {};
  if (!isObject(raw)) throw bad('configuration', 'must be an object');
  const c = 'configuration.';
  const agentId = str(raw, 'agentId', c, false);
  const msg = params.message as Json;
  const contextId = str(raw, 'contextId', c, false) ?? str(msg, 'contextId', 'message.', false);
  const taskId = str(raw, 'taskId', c, false) ?? str(msg, 'taskId', 'message.', false);
  const target = ctx.targetAgentId ?? agentId;
  if (ctx.targetAgentId && agentId && agentId !== ctx.targetAgentId) throw bad(`${c}agentId`, 'must match the agent of the path');
  if (!target && !taskId) throw bad(`${c}agentId`, 'is required');
  const modes = raw.acceptedOutputModes;
  if (modes !== undefined && (!Array.isArray(modes) || modes.some((m) => typeof m !== 'string'))) {
    throw bad(`${c}acceptedOutputModes`, 'must be an array of strings');
  }
  const historyLength = optionalInt(raw, 'historyLength', c, 0);
  const ttl = optionalInt(raw, 'x-ttl', c, 0);
  return {
    recipientAgentId: target ?? '',
    message,
    contextId: contextId ?? '',
    taskId: taskId ?? '',
    historyLength,
    acceptedOutputModes: (modes as string[] | undefined) ?? [],
    blocking: optionalBool(raw, 'blocking', c) ?? false,
    ttlSeconds: ttl === undefined ? undefined : BigInt(ttl),
  };
}

const taskId = (params: Json) => str(params, 'id', '', true)!;

export function messagingMethods(clients: Clients): [string, Route][] {
  const withHistory = (params: Json) => {
    const cfg = isObject(params.configuration) ? params.configuration : {};
    return cfg.historyLength !== undefined || cfg.blocking === true;
  };
  return [
    ['SendMessage', method(clients, 'sendMessage', sendRequest, (r, p) => taskOut(r.task, { messages: withHistory(p) }), WAITING_CALL_MS)],
    ['GetTask', method(
      clients,
      'getTask',
      (p) => ({ taskId: taskId(p), historyLength: optionalInt(p, 'historyLength', '', 0) }),
      (r) => taskOut(r.task, { messages: true }),
    )],
    ['CancelTask', method(clients, 'cancelTask', (p) => ({ taskId: taskId(p) }), (r) => taskOut(r.task, { messages: false }))],
    ['x-hub/inbox.poll', method(
      clients,
      'pollInbox',
      (p) => ({ waitMs: optionalInt(p, 'wait_ms', '', 0, 30_000) ?? 0, max: optionalInt(p, 'max', '', 1, 100) ?? 10 }),
      (r: messagingv1.PollInboxResponse) => ({
        deliveries: r.deliveries.map((d) => ({
          delivery_id: d.id,
          task_id: d.taskId,
          context_id: d.contextId,
          from_agent_id: d.senderAgentId,
          message: d.message ? messageOut(d.message) : undefined,
          created_at: Number(d.createdAt),
          attempt: d.attempt,
        })),
      }),
      WAITING_CALL_MS,
    )],
    ['x-hub/inbox.ack', method(clients, 'ackDelivery', (p) => ({ deliveryId: str(p, 'delivery_id', '', true)! }), (r) => ({ acked: r.acked }))],
    ['x-hub/tasks.update', method(
      clients,
      'updateTask',
      (p) => {
        const state = str(p, 'state', '', true)!;
        if (!['working', 'input-required', 'completed', 'failed', 'rejected'].includes(state)) {
          throw bad('state', 'must be one of working, input-required, completed, failed, rejected');
        }
        const artifacts = p.artifacts ?? [];
        if (!Array.isArray(artifacts)) throw bad('artifacts', 'must be an array');
        return {
          taskId: str(p, 'task_id', '', true)!,
          state: STATES[state],
          message: p.message === undefined ? undefined : messageIn(p.message, 'message', 'agent'),
          artifacts: artifacts.map((a: unknown, i: number) => {
            const at = `artifacts[${i}]`;
            if (!isObject(a)) throw bad(at, 'must be an object');
            return {
              name: str(a, 'name', `${at}.`, false) ?? '',
              mimeType: str(a, 'mimeType', `${at}.`, false) ?? '',
              parts: partsIn(a.parts, `${at}.parts`),
            };
          }),
        };
      },
      (r) => taskOut(r.task, { messages: true }),
    )],
  ];
}

import { z } from 'zod';
import { STATE_WORDS, UPDATE_TARGETS } from '@agenthub/tasks';
import { INT32_MAX } from '../fields.js';
import { parseParams } from '../params.js';
import type { Route } from '../route.js';

/**
 * The params of the messaging methods in the interface's dialect, as schemas: each method checks
 * its params against one before its hand-written decoder (messaging.ts) names a bad part by index
 * and field, and docs/openrpc.json is generated from them. Parts are described here; the decoder
 * holds their per-kind rules (`@agenthub/tasks`).
 */

const part = z
  .object({
    kind: z.enum(['text', 'file', 'data']),
    text: z.string().nullish().describe('kind text'),
    name: z.string().nullish().describe('kind file'),
    mimeType: z.string().nullish().describe('kind file and data: required'),
    data: z.string().nullish().describe('kind file: base64 (at most 699052 characters); kind data: the serialized content'),
    uri: z.string().nullish().describe('kind file: instead of data; passed through, never fetched'),
  })
  .describe('A part: text {text}, file {name?, mimeType, data | uri}, data {mimeType, data}');
const parts = z.array(part).min(1).max(100);

const message = z.object({
  role: z.enum(['user', 'agent']).nullish(),
  parts,
  messageId: z.string().nullish().describe('Makes the send idempotent: a repeat from the same sender within the window returns the first task'),
  contextId: z.string().nullish(),
  taskId: z.string().nullish(),
});

const historyLength = z.number().int().min(0).max(INT32_MAX).nullish();
const taskIdParams = z.object({ id: z.string().min(1) });

const send = z.object({
  message,
  configuration: z
    .object({
      agentId: z.string().nullish().describe('The recipient; required on POST /a2a unless taskId is given'),
      contextId: z.string().nullish().describe('Continue a conversation the caller has a task in, or start one under this id'),
      taskId: z.string().nullish().describe('Continue a task in input-required (its sender only)'),
      historyLength,
      acceptedOutputModes: z.array(z.string()).nullish(),
      blocking: z.boolean().nullish(),
      'x-ttl': z.number().int().min(0).max(315_360_000).nullish().describe('Seconds a queued delivery waits; 0: fail unless the recipient is online'),
    })
    .nullish(),
});

export const MESSAGING_PARAMS: Record<string, z.ZodType> = {
  SendMessage: send,
  SendStreamingMessage: send,
  GetTask: taskIdParams.extend({ historyLength }),
  CancelTask: taskIdParams,
  SubscribeToTask: taskIdParams.extend({ historyLength }),
  ListTasks: z.object({
    contextId: z.string().nullish(),
    status: z.enum(STATE_WORDS as unknown as [string, ...string[]]).nullish(),
    pageSize: z.number().int().min(1).max(100).nullish(),
    pageToken: z.string().nullish(),
    historyLength,
    includeArtifacts: z.boolean().nullish(),
    lastUpdatedAfter: z.string().nullish().describe('ISO 8601 timestamp'),
  }),
  'x-hub/inbox.poll': z.object({ wait_ms: z.number().int().min(0).max(30_000).nullish(), max: z.number().int().min(1).max(100).nullish() }),
  'x-hub/inbox.stream': z.object({ max: z.number().int().min(1).max(100).nullish() }),
  'x-hub/inbox.ack': z.object({ delivery_id: z.string().min(1) }),
  'x-hub/tasks.update': z.object({
    task_id: z.string().min(1),
    state: z.enum([...UPDATE_TARGETS] as [string, ...string[]]),
    message: message.nullish(),
    artifacts: z.array(z.object({ name: z.string().nullish(), mimeType: z.string().nullish(), parts })).nullish(),
  }),
};

/** The route, checking params against `schema` before its own decoder reads them (unchanged). */
export function checked(route: Route, schema: z.ZodType | undefined): Route {
  if (!schema) throw new Error('A messaging method without a params schema');
  if (route.stream) {
    const open = route.stream.bind(route);
    return {
      ...route,
      params: schema,
      stream: async (params, ctx) => {
        parseParams(schema, params, 'brackets');
        return open(params, ctx);
      },
    };
  }
  const invoke = route.invoke.bind(route);
  return {
    ...route,
    params: schema,
    invoke: async (params, ctx) => {
      parseParams(schema, params, 'brackets');
      return invoke(params, ctx);
    },
  };
}

/**
 * @agenthub/client: a typed client of AgentHub's agent JSON-RPC, for Node 20+ (global fetch).
 */

/** The client: `call` (unary methods, typed by name, retried when the hub says so), `stream` (SSE with resume), `serve`. */
export { HubClient, type HubClientOptions, type CallOptions, type StreamOptions, type StreamItem, type RetryPolicy } from './client.js';
/** Runs a connected agent: inbox stream → handler → task update → ack, reconnecting. */
export { serve, type Handler, type Job, type Reply, type ServeOptions } from './serve.js';
/** A refused call: JSON-RPC `code`, `message`, `reason` and `field` from `data`, HTTP status, `retryable`. */
export { HubRpcError, ErrorCode, type RpcErrorBody } from './errors.js';
/** Every agent method by name, with its params and result types; METHODS says which ones stream. */
export { METHODS, type HubMethods, type MethodName, type UnaryMethod, type StreamMethod, type ParamsOf, type ResultOf } from './methods.js';
/** The interface's JSON shapes: tasks, messages, parts, workspaces, memories, deliveries. */
export type * from './types.js';
/** The SSE parser the streams use, for callers reading hub streams with fetch of their own. */
export { parseSse, type SseEvent } from './sse.js';

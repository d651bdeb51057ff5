import { HubError, Reason } from '@agenthub/runtime';

/** JSON-RPC 2.0 protocol codes and the A2A codes the hub uses. */
export const RpcCode = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  UNAUTHENTICATED: -32000,
  TASK_NOT_FOUND: -32001,
  TASK_NOT_CANCELABLE: -32002,
  CONTENT_TYPE_NOT_SUPPORTED: -32005,
  VERSION_NOT_SUPPORTED: -32009,
  ACCESS_DENIED: -32100,
  NOT_FOUND: -32101,
  PERMISSION_REQUIRED: -32102,
  INVALID_OPERATION: -32103,
  GRANT_REQUIRED: -32104,
  /** A rate limit, a concurrency cap or a quota (HTTP 429 where the whole request is refused). */
  RATE_LIMITED: -32029,
} as const;

export interface RpcError {
  code: number;
  message: string;
  data?: Record<string, unknown>;
}

/**
 * The one table from a service's error reason to the JSON-RPC code the caller sees. The message
 * is the service's own (it was written for callers); internal failures show a fixed message.
 */
const codeOf: Record<Reason, number> = {
  [Reason.UNSPECIFIED]: RpcCode.INTERNAL_ERROR,
  [Reason.INVALID_PARAMS]: RpcCode.INVALID_PARAMS,
  [Reason.NOT_FOUND]: RpcCode.NOT_FOUND,
  [Reason.ACCESS_DENIED]: RpcCode.ACCESS_DENIED,
  [Reason.PERMISSION_REQUIRED]: RpcCode.PERMISSION_REQUIRED,
  [Reason.INVALID_OPERATION]: RpcCode.INVALID_OPERATION,
  [Reason.GRANT_REQUIRED]: RpcCode.GRANT_REQUIRED,
  [Reason.UNAUTHENTICATED]: RpcCode.UNAUTHENTICATED,
  [Reason.ALREADY_EXISTS]: RpcCode.INVALID_OPERATION,
  [Reason.TASK_NOT_FOUND]: RpcCode.TASK_NOT_FOUND,
  [Reason.TASK_NOT_CANCELABLE]: RpcCode.TASK_NOT_CANCELABLE,
  [Reason.CONTENT_TYPE_NOT_SUPPORTED]: RpcCode.CONTENT_TYPE_NOT_SUPPORTED,
  [Reason.LIMIT_EXCEEDED]: RpcCode.INVALID_PARAMS,
  [Reason.UNAVAILABLE]: RpcCode.INTERNAL_ERROR,
  [Reason.DEADLINE_EXCEEDED]: RpcCode.INTERNAL_ERROR,
  [Reason.INTERNAL]: RpcCode.INTERNAL_ERROR,
  [Reason.RATE_LIMITED]: RpcCode.RATE_LIMITED,
  [Reason.QUOTA_EXCEEDED]: RpcCode.RATE_LIMITED,
};

export function toRpcError(err: HubError): RpcError {
  const data: Record<string, unknown> = { reason: Reason[err.reason]?.toLowerCase() ?? 'internal' };
  if (err.field) data.field = err.field;
  if (err.retryAfterMs !== undefined) data.retry_after_ms = err.retryAfterMs;
  const message = err.reason === Reason.INTERNAL || err.reason === Reason.UNSPECIFIED ? 'Internal error' : err.message;
  return { code: codeOf[err.reason] ?? RpcCode.INTERNAL_ERROR, message, data };
}

export function protocolError(code: number, message: string, data?: Record<string, unknown>): RpcError {
  return data ? { code, message, data } : { code, message };
}

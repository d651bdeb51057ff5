import { HubError, Reason } from '@agenthub/runtime';
import { RpcCode, type RpcError } from '../errors.js';

/**
 * A2A 1.0 error codes on the JSON-RPC binding (specification §5.4 and §9.5): the gateway's table
 * (JSON-RPC standard codes, the A2A codes the interface uses, and the hub's own conditions that A2A
 * has no name for, so a condition has one code on both endpoints) plus the codes only A2A defines.
 */
export const A2aCode = {
  ...RpcCode,
  PUSH_NOTIFICATION_NOT_SUPPORTED: -32003,
  UNSUPPORTED_OPERATION: -32004,
  INVALID_AGENT_RESPONSE: -32006,
  EXTENDED_AGENT_CARD_NOT_CONFIGURED: -32007,
} as const;

const ERROR_INFO = 'type.googleapis.com/google.rpc.ErrorInfo';
/** Errors A2A defines carry its domain; the hub's own carry ours. */
const A2A_DOMAIN = 'a2a-protocol.org';
const HUB_DOMAIN = 'agenthub';

interface Entry {
  code: number;
  /** `google.rpc.ErrorInfo.reason`: UPPER_SNAKE_CASE, as A2A names its errors without "Error". */
  reason: string;
  domain: string;
}

const a2a = (code: number, reason: string): Entry => ({ code, reason, domain: A2A_DOMAIN });
const hub = (code: number, reason: string): Entry => ({ code, reason, domain: HUB_DOMAIN });

/** The one table from a service's error reason to what an A2A 1.0 client sees. */
const entryOf: Record<Reason, Entry> = {
  [Reason.UNSPECIFIED]: a2a(A2aCode.INTERNAL_ERROR, 'INTERNAL_ERROR'),
  [Reason.INVALID_PARAMS]: a2a(A2aCode.INVALID_PARAMS, 'INVALID_PARAMS'),
  [Reason.NOT_FOUND]: hub(A2aCode.NOT_FOUND, 'NOT_FOUND'),
  [Reason.ACCESS_DENIED]: hub(A2aCode.ACCESS_DENIED, 'ACCESS_DENIED'),
  [Reason.PERMISSION_REQUIRED]: hub(A2aCode.PERMISSION_REQUIRED, 'PERMISSION_REQUIRED'),
  // A task that cannot take this message (e.g. continuing a finished one) is what A2A calls an
  // unsupported operation (CORE-SEND-002).
  [Reason.INVALID_OPERATION]: a2a(A2aCode.UNSUPPORTED_OPERATION, 'UNSUPPORTED_OPERATION'),
  [Reason.GRANT_REQUIRED]: hub(A2aCode.GRANT_REQUIRED, 'GRANT_REQUIRED'),
  [Reason.UNAUTHENTICATED]: hub(A2aCode.UNAUTHENTICATED, 'UNAUTHENTICATED'),
  [Reason.ALREADY_EXISTS]: hub(A2aCode.INVALID_OPERATION, 'ALREADY_EXISTS'),
  [Reason.TASK_NOT_FOUND]: a2a(A2aCode.TASK_NOT_FOUND, 'TASK_NOT_FOUND'),
  [Reason.TASK_NOT_CANCELABLE]: a2a(A2aCode.TASK_NOT_CANCELABLE, 'TASK_NOT_CANCELABLE'),
  [Reason.CONTENT_TYPE_NOT_SUPPORTED]: a2a(A2aCode.CONTENT_TYPE_NOT_SUPPORTED, 'CONTENT_TYPE_NOT_SUPPORTED'),
  [Reason.LIMIT_EXCEEDED]: a2a(A2aCode.INVALID_PARAMS, 'INVALID_PARAMS'),
  [Reason.UNAVAILABLE]: a2a(A2aCode.INTERNAL_ERROR, 'INTERNAL_ERROR'),
  [Reason.DEADLINE_EXCEEDED]: a2a(A2aCode.INTERNAL_ERROR, 'INTERNAL_ERROR'),
  [Reason.INTERNAL]: a2a(A2aCode.INTERNAL_ERROR, 'INTERNAL_ERROR'),
  [Reason.RATE_LIMITED]: hub(A2aCode.RATE_LIMITED, 'RATE_LIMITED'),
  [Reason.QUOTA_EXCEEDED]: hub(A2aCode.RATE_LIMITED, 'QUOTA_EXCEEDED'),
};

/** An error only A2A has a name for; the methods of the strict endpoint throw it. */
export class A2aError extends Error {
  override readonly name = 'A2aError';
  private constructor(
    readonly entry: Entry,
    message: string,
  ) {
    super(message);
  }

  static unsupportedOperation(message: string): A2aError {
    return new A2aError(a2a(A2aCode.UNSUPPORTED_OPERATION, 'UNSUPPORTED_OPERATION'), message);
  }

  static versionNotSupported(version: string | undefined): A2aError {
    const said = version === undefined || version.trim() === '' ? 'No A2A-Version header means version 0.3, which' : `A2A version ${version}`;
    return new A2aError(a2a(A2aCode.VERSION_NOT_SUPPORTED, 'VERSION_NOT_SUPPORTED'), `${said} is not supported on this endpoint; send A2A-Version: 1.0`);
  }
}

/** JSON-RPC envelope errors (parse, invalid request, method not found): code and message only. */
export function envelopeError(code: number, message: string): RpcError {
  return { code, message };
}

/**
 * Any failure as an A2A JSON-RPC error object: `data` is the list of error details the binding
 * prescribes, holding one `google.rpc.ErrorInfo`. Internal failures show a fixed message.
 */
export function toA2aRpcError(err: unknown): RpcError {
  if (err instanceof A2aError) return withInfo(err.entry, err.message, {});
  const hubError = HubError.from(err);
  const entry = entryOf[hubError.reason] ?? entryOf[Reason.INTERNAL];
  const message = entry.code === A2aCode.INTERNAL_ERROR ? 'Internal error' : hubError.message;
  const metadata: Record<string, string> = hubError.field ? { field: hubError.field } : {};
  if (hubError.retryAfterMs !== undefined) metadata.retry_after_ms = String(hubError.retryAfterMs);
  return withInfo(entry, message, metadata);
}

function withInfo(entry: Entry, message: string, metadata: Record<string, string>): RpcError {
  const info = { '@type': ERROR_INFO, reason: entry.reason, domain: entry.domain, ...(Object.keys(metadata).length ? { metadata } : {}) };
  // RpcError types `data` as an object for the other dialect; A2A's is a list of details.
  return { code: entry.code, message, data: [info] as unknown as Record<string, unknown> };
}

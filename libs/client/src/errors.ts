/** A JSON-RPC error object as the hub sends it. */
export interface RpcErrorBody {
  code: number;
  message: string;
  data?: Record<string, unknown>;
}

/** JSON-RPC codes of the hub's error table (README "Errors"). */
export const ErrorCode = {
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
  RATE_LIMITED: -32029,
  ACCESS_DENIED: -32100,
  NOT_FOUND: -32101,
  PERMISSION_REQUIRED: -32102,
  INVALID_OPERATION: -32103,
  GRANT_REQUIRED: -32104,
} as const;

/** Reasons (`data.reason`) of a failure that may pass if the same call is made again later. */
const TRANSIENT_REASONS = new Set(['unavailable', 'deadline_exceeded', 'rate_limited']);
/** HTTP statuses that say the hub did not act on the call. */
const TRANSIENT_STATUSES = new Set([429, 503]);

/**
 * A call the hub refused: the JSON-RPC `code` and `message`, `reason` and `field` from `data`,
 * the HTTP status, and how long the hub asked the caller to wait (`Retry-After`,
 * `data.retry_after_ms`) when it did.
 */
export class HubRpcError extends Error {
  override readonly name = 'HubRpcError';
  readonly code: number;
  readonly data: Record<string, unknown> | undefined;
  readonly httpStatus: number;
  readonly retryAfterMs: number | undefined;

  constructor(body: RpcErrorBody, httpStatus: number, retryAfterMs?: number) {
    super(body.message);
    this.code = body.code;
    this.data = body.data;
    this.httpStatus = httpStatus;
    const fromData = typeof body.data?.retry_after_ms === 'number' ? body.data.retry_after_ms : undefined;
    this.retryAfterMs = retryAfterMs ?? fromData;
  }

  /** `data.reason`: the hub's machine-readable reason (`permission_required`, `not_found`, …). */
  get reason(): string | undefined {
    return typeof this.data?.reason === 'string' ? this.data.reason : undefined;
  }

  /** `data.field`: the param at fault of an invalid-params error. */
  get field(): string | undefined {
    return typeof this.data?.field === 'string' ? this.data.field : undefined;
  }

  /** Whether the same call may succeed later: rate limits, an unavailable service. */
  get retryable(): boolean {
    return TRANSIENT_STATUSES.has(this.httpStatus) || this.code === ErrorCode.RATE_LIMITED || (this.reason !== undefined && TRANSIENT_REASONS.has(this.reason));
  }
}

/** `Retry-After` (delta-seconds or an HTTP date) as milliseconds from now; undefined if absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (!header) return undefined;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

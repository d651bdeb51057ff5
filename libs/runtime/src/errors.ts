import { commonv1 } from '@agenthub/proto';

export const Reason = commonv1.ErrorReason;
export type Reason = commonv1.ErrorReason;

/** The hub's own trouble; every other reason is an answer to the caller (bad params, not found, denied, limited). */
const FAILURE_REASONS: ReadonlySet<Reason> = new Set([Reason.INTERNAL, Reason.UNAVAILABLE, Reason.DEADLINE_EXCEEDED]);

/** Whether `err` is a failure of the hub (anything but a HubError of an answering reason). */
export function isFailure(err: unknown): boolean {
  return !(err instanceof HubError) || FAILURE_REASONS.has(err.reason);
}

/**
 * The only error a service throws on purpose: a reason from the closed set in
 * `proto/agenthub/common/v1/error.proto` plus a message safe to show to the caller.
 * Anything else that escapes a handler is turned into an INTERNAL error by `HubError.from`,
 * which keeps the cause for the log and shows nothing of it on the wire.
 */
export class HubError extends Error {
  override readonly name = 'HubError';
  readonly reason: Reason;
  /** The parameter at fault, as a dotted path, when there is one. */
  readonly field: string;
  /** When a retry can succeed (RATE_LIMITED), in milliseconds. */
  readonly retryAfterMs: number | undefined;

  constructor(reason: Reason, message: string, options: { field?: string; cause?: unknown; retryAfterMs?: number } = {}) {
    // An answer (a refusal, a missing workspace) is never debugged from its stack, and capturing
    // one cost a rate-limit refusal more than the rest of its own work: only failures keep theirs.
    const stackFrames = Error.stackTraceLimit;
    if (!FAILURE_REASONS.has(reason)) Error.stackTraceLimit = 0;
    super(message, { cause: options.cause });
    Error.stackTraceLimit = stackFrames;
    this.reason = reason;
    this.field = options.field ?? '';
    this.retryAfterMs = options.retryAfterMs;
  }

  static from(err: unknown): HubError {
    if (err instanceof HubError) return err;
    return new HubError(Reason.INTERNAL, 'Internal error', { cause: err });
  }

  static invalidParams(field: string, problem: string): HubError {
    return new HubError(Reason.INVALID_PARAMS, `Invalid params: ${field} ${problem}`, { field });
  }

  static notFound(message = 'Workspace not found'): HubError {
    return new HubError(Reason.NOT_FOUND, message);
  }

  static accessDenied(): HubError {
    return new HubError(Reason.ACCESS_DENIED, 'Access denied');
  }

  static permissionRequired(message: 'Admin access required' | 'Write access required' | 'Owner access required'): HubError {
    return new HubError(Reason.PERMISSION_REQUIRED, message);
  }

  static invalidOperation(message: string): HubError {
    return new HubError(Reason.INVALID_OPERATION, message);
  }

  static grantRequired(): HubError {
    return new HubError(
      Reason.GRANT_REQUIRED,
      'No access grant to target agent. Request access first with x-hub/grants.request.',
    );
  }

  /** A rate limit or concurrency cap; `retryAfterMs` when waiting that long lets a retry succeed. */
  static rateLimited(retryAfterMs?: number, message = 'Rate limit exceeded'): HubError {
    return new HubError(Reason.RATE_LIMITED, message, { retryAfterMs });
  }

  /** A quota is used up; `quota` names it (e.g. `workspaces_per_tenant`). */
  static quotaExceeded(quota: string, message: string): HubError {
    return new HubError(Reason.QUOTA_EXCEEDED, message, { field: quota });
  }

  static unauthenticated(message = 'Missing or invalid API key'): HubError {
    return new HubError(Reason.UNAUTHENTICATED, message);
  }
}

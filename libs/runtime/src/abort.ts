import { HubError, Reason } from './errors.js';

/**
 * The error a call stopped by `signal` fails with: the signal's reason when it is a HubError (a
 * server aborts a call at its deadline with DEADLINE_EXCEEDED), DEADLINE_EXCEEDED for a timeout
 * signal, else UNAVAILABLE (the caller went away).
 */
export function abortError(signal: AbortSignal): HubError {
  const reason: unknown = signal.reason;
  if (reason instanceof HubError) return reason;
  if (reason instanceof DOMException && reason.name === 'TimeoutError') {
    return new HubError(Reason.DEADLINE_EXCEEDED, 'The request took too long and was abandoned', { cause: reason });
  }
  return new HubError(Reason.UNAVAILABLE, 'The call was cancelled', { cause: reason });
}

/** Throws `abortError(signal)` when the signal is aborted, so no IO starts for a caller that left. */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw abortError(signal);
}

/** The reason a server aborts a call's signal with when the call's deadline passes. */
export function deadlineExceeded(): HubError {
  return new HubError(Reason.DEADLINE_EXCEEDED, 'The request took too long and was abandoned');
}

/** How long IO detached from its caller (see `detachedSignal`) may take. */
export const DETACHED_TIMEOUT_MS = 10_000;

/**
 * A signal for IO that must run even though the caller left: undoing a call's work (claims
 * handed back, keys released) or finishing what a committed change requires. The caller's own
 * signal would stop it before it started, so it is bounded on its own instead.
 */
export function detachedSignal(): AbortSignal {
  return AbortSignal.timeout(DETACHED_TIMEOUT_MS);
}

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

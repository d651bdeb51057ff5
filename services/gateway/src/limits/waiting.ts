/**
 * Calls that hold a connection open while they wait: streams, long-polls and blocking sends.
 * Named here by method and params, for both endpoints' dialects.
 */
const STREAMS = new Set(['SendStreamingMessage', 'SubscribeToTask', 'x-hub/inbox.stream']);

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function waits(call: unknown, strict: boolean): boolean {
  if (!isObject(call) || typeof call.method !== 'string') return false;
  if (STREAMS.has(call.method)) return true;
  const params = isObject(call.params) ? call.params : {};
  const cfg = isObject(params.configuration) ? params.configuration : {};
  if (call.method === 'SendMessage') return strict ? cfg.returnImmediately !== true : cfg.blocking === true;
  if (call.method === 'x-hub/inbox.poll') return typeof params.wait_ms === 'number' && params.wait_ms > 0;
  return false;
}

/** How many calls of a request body (one call or a batch) may wait. */
export function waitingCalls(body: unknown, strict: boolean): number {
  const calls = Array.isArray(body) ? body : [body];
  return calls.filter((call) => waits(call, strict)).length;
}

/**
 * Waiting calls open per agent on this replica. Each replica caps its own: a waiting call holds
 * a socket and memory here, which is what the cap protects.
 */
export class WaitingCalls {
  private readonly open = new Map<string, number>();

  /** Admits `count` more waiting calls of `agentId`, or none when that would pass `max`. */
  acquire(agentId: string, count: number, max: number): (() => void) | undefined {
    const now = this.open.get(agentId) ?? 0;
    if (now + count > max) return undefined;
    this.open.set(agentId, now + count);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.open.get(agentId) ?? count) - count;
      if (left > 0) this.open.set(agentId, left);
      else this.open.delete(agentId);
    };
  }
}

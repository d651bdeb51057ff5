import { randomUUID } from 'node:crypto';
import type { Kv, Logger } from '@agenthub/runtime';

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
 * How long a waiting call's slot outlives the last renewal by its replica: a replica that dies
 * holding slots gives them back within this time.
 */
export const WAITING_LEASE_MS = 30_000;

/**
 * Waiting calls open per agent, counted in the shared Kv (Redis), so the cap holds across gateway
 * replicas (in-process in embedded mode). Each call holds a leased slot that this replica renews
 * while the call is open and releases when it ends.
 */
export class WaitingCalls {
  /** Slots this replica holds, by Kv key. */
  private readonly held = new Map<string, Set<string>>();
  private renewal: NodeJS.Timeout | undefined;

  constructor(private readonly kv: Kv, private readonly log: Logger, private readonly leaseMs = WAITING_LEASE_MS) {}

  /** Admits `count` more waiting calls of `agentId`, or none when that would pass `max`. */
  async acquire(agentId: string, count: number, max: number): Promise<(() => void) | undefined> {
    const key = `wait:${agentId}`;
    const ids = Array.from({ length: count }, () => randomUUID());
    if (!(await this.kv.acquireSlots(key, ids, max, this.leaseMs))) return undefined;
    const mine = this.held.get(key) ?? new Set<string>();
    for (const id of ids) mine.add(id);
    this.held.set(key, mine);
    this.renewal ??= setInterval(() => this.renew(), this.leaseMs / 3).unref();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const id of ids) mine.delete(id);
      if (!mine.size && this.held.get(key) === mine) this.held.delete(key);
      if (!this.held.size) {
        clearInterval(this.renewal);
        this.renewal = undefined;
      }
      this.kv.releaseSlots(key, ids).catch((err) => this.log.warn({ err }, 'could not release waiting-call slots; they free themselves when their lease runs out'));
    };
  }

  private renew(): void {
    for (const [key, ids] of this.held) {
      this.kv.renewSlots(key, [...ids], this.leaseMs).catch((err) => this.log.warn({ err }, 'could not renew waiting-call slots'));
    }
  }
}

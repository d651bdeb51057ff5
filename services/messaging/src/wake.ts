import type { Kv, Logger, TakeResult } from '@agenthub/runtime';

/** A Kv channel a waiting call listens on (see `listen`). */
export interface Listener {
  /**
   * Resolves at the next accepted message (at once if one came since the last wait or reset),
   * after `ms`, or when the signal aborts.
   */
  wait(ms: number): Promise<void>;
  /** Forgets a message that came before: the caller is about to read what it announced. */
  reset(): void;
  close(): Promise<void>;
}

/**
 * Subscribes to `channel` before the caller reads the state it guards, so a change between the
 * read and the wait still wakes it, whichever replica made the change (blocking sends, inbox
 * long-polls, task streams).
 */
export async function listen(kv: Kv, channel: string, signal: AbortSignal, accept: (message: string) => boolean = () => true): Promise<Listener> {
  let heard = false;
  let wake: (() => void) | undefined;
  const unsubscribe = await kv.subscribe(channel, (message) => {
    if (!accept(message)) return;
    heard = true;
    wake?.();
  });
  const onAbort = () => wake?.();
  signal.addEventListener('abort', onAbort);
  return {
    wait(ms) {
      if (heard || signal.aborted) {
        heard = false;
        return Promise.resolve();
      }
      return new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          wake = undefined;
          heard = false;
          resolve();
        };
        const timer = setTimeout(done, ms);
        wake = done;
      });
    },
    reset() {
      heard = false;
    },
    async close() {
      signal.removeEventListener('abort', onAbort);
      await unsubscribe().catch(() => undefined);
    },
  };
}

/**
 * Publishes inbox wake-ups, at most one per recipient per event-loop turn however many sends it
 * got in that turn (a wake-up only says "look"): concurrent sends committed together cost one
 * PUBLISH, not one each. Called after the sends' deliveries are committed.
 */
export class InboxWakes {
  private readonly pending = new Map<string, Logger>();
  private readonly local = new Set<(agentId: string) => void>();

  constructor(
    private readonly kv: Kv,
    private readonly channel: (agentId: string) => string,
  ) {}

  wake(agentId: string, log: Logger): void {
    if (this.pending.size === 0) setImmediate(() => this.flush());
    if (!this.pending.has(agentId)) this.pending.set(agentId, log);
  }

  /**
   * Tells `listener` of every wake-up this process publishes, whoever listens on its channel (the
   * push worker of this replica starts on a send it served at once, for agents it has no
   * subscription to; LocalFirstKv reaches only the subscribers of a channel). Returns how to stop.
   */
  listenLocally(listener: (agentId: string) => void): () => void {
    this.local.add(listener);
    return () => this.local.delete(listener);
  }

  private flush(): void {
    const due = [...this.pending];
    this.pending.clear();
    for (const [agentId, log] of due) {
      for (const listener of this.local) listener(agentId);
      this.kv.publish(this.channel(agentId), '1').catch((err) => log.warn({ err, agent_id: agentId }, 'could not wake an inbox'));
    }
  }
}

/**
 * Kv whose pub/sub also delivers within this process: a publish reaches this process's
 * subscribers on the next microtask, without the round trip through Redis, and every other
 * process through Kv as before. A blocking send and the inbox it wakes usually share a messaging
 * process, so the wake-ups on its path (send → inbox, update → waiting sender) skip two hops.
 * Subscribers here hear such a message twice (in-process, then back from Kv): every channel of
 * this service carries wake-ups that say "look again", which hearing twice costs one read at most.
 */
export class LocalFirstKv implements Kv {
  private readonly local = new Map<string, Set<(message: string) => void>>();

  constructor(private readonly kv: Kv) {}

  get(key: string, signal?: AbortSignal): Promise<string | undefined> {
    return this.kv.get(key, signal);
  }

  set(key: string, value: string, ttlMs?: number, signal?: AbortSignal): Promise<void> {
    return this.kv.set(key, value, ttlMs, signal);
  }

  setIfAbsent(key: string, value: string, ttlMs: number, signal?: AbortSignal): Promise<boolean> {
    return this.kv.setIfAbsent(key, value, ttlMs, signal);
  }

  del(key: string, signal?: AbortSignal): Promise<void> {
    return this.kv.del(key, signal);
  }

  take(key: string, capacity: number, refillPerSec: number, cost: number, signal?: AbortSignal): Promise<TakeResult> {
    return this.kv.take(key, capacity, refillPerSec, cost, signal);
  }

  acquireSlots(key: string, ids: readonly string[], max: number, ttlMs: number, signal?: AbortSignal): Promise<boolean> {
    return this.kv.acquireSlots(key, ids, max, ttlMs, signal);
  }

  renewSlots(key: string, ids: readonly string[], ttlMs: number, signal?: AbortSignal): Promise<void> {
    return this.kv.renewSlots(key, ids, ttlMs, signal);
  }

  releaseSlots(key: string, ids: readonly string[], signal?: AbortSignal): Promise<void> {
    return this.kv.releaseSlots(key, ids, signal);
  }

  publish(channel: string, message: string, signal?: AbortSignal): Promise<void> {
    const here = signal?.aborted ? undefined : this.local.get(channel);
    if (here) {
      // Not inline: a publisher never runs subscribers within its own call (as with Kv).
      for (const onMessage of [...here]) queueMicrotask(() => onMessage(message));
    }
    return this.kv.publish(channel, message, signal);
  }

  async subscribe(channel: string, onMessage: (message: string) => void, onGap?: () => void): Promise<() => Promise<void>> {
    // Registered before the Kv subscription exists: a publish here meanwhile is heard already.
    let here = this.local.get(channel);
    if (!here) this.local.set(channel, (here = new Set()));
    const handler = (message: string) => onMessage(message);
    here.add(handler);
    const forget = () => {
      here.delete(handler);
      if (!here.size && this.local.get(channel) === here) this.local.delete(channel);
    };
    let unsubscribe: () => Promise<void>;
    try {
      unsubscribe = await this.kv.subscribe(channel, handler, onGap);
    } catch (err) {
      forget();
      throw err;
    }
    return async () => {
      forget();
      await unsubscribe();
    };
  }

  ping(signal?: AbortSignal): Promise<void> {
    return this.kv.ping(signal);
  }

  close(): Promise<void> {
    this.local.clear();
    return this.kv.close();
  }
}

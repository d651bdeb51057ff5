import type { Kv, Logger } from '@agenthub/runtime';

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

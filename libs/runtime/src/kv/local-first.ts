import type { Kv, TakeResult } from './kv.js';

/** How long a publish's own copy may take to come back through the Kv before it counts as lost. */
const DEFAULT_ECHO_WAIT_MS = 2_000;

/** One subscriber of this process, with the copies of its own process's publishes still to come back. */
interface LocalSubscriber {
  onMessage(message: string): void;
  /** Whether the Kv subscription exists: only then does a publish come back to it. */
  live: boolean;
  /** Per message, when each publish it heard in-process was sent, oldest first. */
  owed: Map<string, number[]>;
}

/**
 * Kv whose pub/sub also delivers within this process: a publish reaches this process's
 * subscribers on the next microtask, without the round trip through the Kv, and every other
 * process through the Kv as before. The copy that then comes back through the Kv to a subscriber
 * that heard it in-process is dropped, so each subscriber hears a publish once: every wake-up
 * heard twice cost its listener a second read for nothing. A copy that has not come back within
 * `echoWaitMs` (the connection dropped meanwhile) is given up, so it cannot swallow a later
 * message of another process. The other commands go to the Kv unchanged.
 */
export class LocalFirstKv implements Kv {
  private readonly local = new Map<string, Set<LocalSubscriber>>();
  private readonly echoWaitMs: number;

  constructor(
    private readonly kv: Kv,
    options: { echoWaitMs?: number } = {},
  ) {
    this.echoWaitMs = options.echoWaitMs ?? DEFAULT_ECHO_WAIT_MS;
  }

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
    if (!here) return this.kv.publish(channel, message, signal);
    const sentAt = performance.now();
    const awaiting: LocalSubscriber[] = [];
    for (const subscriber of here) {
      // Not inline: a publisher never runs subscribers within its own call (as with Kv).
      queueMicrotask(() => subscriber.onMessage(message));
      if (!subscriber.live) continue;
      const owed = subscriber.owed.get(message);
      if (owed) {
        this.dropGivenUp(owed, sentAt);
        owed.push(sentAt);
      } else {
        subscriber.owed.set(message, [sentAt]);
      }
      awaiting.push(subscriber);
    }
    return this.kv.publish(channel, message, signal).catch((err: unknown) => {
      // Nothing comes back from a publish that failed.
      for (const subscriber of awaiting) forget(subscriber, message, sentAt);
      throw err;
    });
  }

  async subscribe(channel: string, onMessage: (message: string) => void, onGap?: () => void): Promise<() => Promise<void>> {
    // Registered before the Kv subscription exists: a publish here meanwhile is heard already.
    let here = this.local.get(channel);
    if (!here) this.local.set(channel, (here = new Set()));
    const subscriber: LocalSubscriber = { onMessage: (message) => onMessage(message), live: false, owed: new Map() };
    here.add(subscriber);
    const leave = () => {
      here.delete(subscriber);
      if (!here.size && this.local.get(channel) === here) this.local.delete(channel);
    };
    const fromKv = (message: string) => {
      if (!this.cameBack(subscriber, message)) subscriber.onMessage(message);
    };
    const gap = onGap
      ? () => {
          subscriber.owed.clear();
          onGap();
        }
      : undefined;
    let unsubscribe: () => Promise<void>;
    try {
      unsubscribe = await this.kv.subscribe(channel, fromKv, gap);
    } catch (err) {
      leave();
      throw err;
    }
    subscriber.live = true;
    return async () => {
      leave();
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

  /** Whether `message` is the copy of a publish `subscriber` heard in-process (and takes it off the list). */
  private cameBack(subscriber: LocalSubscriber, message: string): boolean {
    const owed = subscriber.owed.get(message);
    if (!owed) return false;
    this.dropGivenUp(owed, performance.now());
    const cameBack = owed.shift() !== undefined;
    if (owed.length === 0) subscriber.owed.delete(message);
    return cameBack;
  }

  /** Drops from `owed` (oldest first) the copies that should have come back by `now`. */
  private dropGivenUp(owed: number[], now: number): void {
    while (owed.length > 0 && owed[0]! < now - this.echoWaitMs) owed.shift();
  }
}

function forget(subscriber: LocalSubscriber, message: string, sentAt: number): void {
  const owed = subscriber.owed.get(message);
  const at = owed?.indexOf(sentAt) ?? -1;
  if (at < 0) return;
  owed!.splice(at, 1);
  if (owed!.length === 0) subscriber.owed.delete(message);
}

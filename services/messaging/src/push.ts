/**
 * The push worker: forwards the queued deliveries of push agents (recipients registered with an
 * A2A endpoint) with the A2A 1.0 JSON-RPC client of `@a2a-js/sdk` (push-calls.ts), and relays each
 * answer into the hub task (push-relay.ts).
 *
 * - Work is claimed in the database with FOR UPDATE SKIP LOCKED and leases (push-store.ts), so the
 *   replicas of the service share it: an agent's queue is forwarded by one replica at a time,
 *   started oldest first, up to `perAgent` deliveries at once; the deliveries of one task go one
 *   at a time, in order (a continuation names the agent's task the earlier one created). A
 *   delivery is acknowledged only after the agent accepted it (at-least-once, and the A2A
 *   messageId is the hub message's, so the agent can recognise a redelivery).
 * - Every call holds one of the replica's slots, bounded in all, per tenant and per agent
 *   (push-slots.ts): slow agents of one tenant cannot delay another tenant's deliveries.
 * - A send wakes the worker of its replica at once, and the others through the agent's inbox
 *   channel; `pollMs` only bounds how long work that no wake-up announced (an expired claim, a
 *   backoff that ended on another replica) waits.
 * - An agent that does not answer (connection refused, timeout, HTTP 5xx/408/429) keeps its queue
 *   and is retried with exponential backoff up to `maxBackoffMs`; an agent that answers with an
 *   A2A error or another HTTP status refused the message, and the task fails with a fixed text
 *   naming the A2A error code or the HTTP status.
 * - The agent's task is recorded against the hub task (continuations and cancels name it) and,
 *   while it works, followed with GetTask at a backing-off pace until it is terminal or waits for
 *   input. A hub cancel is forwarded, best effort.
 */
import { detachedSignal, type CallContext, type EgressPolicy, type Logger, type Metrics } from '@agenthub/runtime';
import { PushCaller, PushMetrics, type PushCredentials } from './push-calls.js';
import { PushForwarder, type Forwarded } from './push-forward.js';
import { PushRelay } from './push-relay.js';
import { PushSlots } from './push-slots.js';
import type { ClaimedDelivery, PushAgentRecord } from './push-store.js';
import { inboxChannel, type MessagingEnv } from './env.js';

export interface PushOptions {
  /** Deadline of one call to an agent (MESSAGING_PUSH_TIMEOUT_MS). */
  timeoutMs: number;
  /** Longest wait between attempts at an agent that does not answer, and between follow-ups (MESSAGING_PUSH_MAX_BACKOFF_MS). */
  maxBackoffMs: number;
  /** First wait at an agent that does not answer; each next one doubles. */
  minBackoffMs: number;
  /** Longest a replica goes without looking for due work that no wake-up announced. */
  pollMs: number;
  /** Calls to push agents one replica makes at once (MESSAGING_PUSH_CONCURRENCY). */
  concurrency: number;
  /** Calls to one push agent at once (MESSAGING_PUSH_CONCURRENCY_PER_AGENT); 1 forwards its queue one message at a time, in order. */
  perAgent: number;
  /** Calls to the push agents of one tenant at once; default a quarter of `concurrency`. */
  perTenant?: number;
  /** Largest answer read from an agent (MESSAGING_PUSH_MAX_RESPONSE_BYTES); a longer one fails the task. */
  maxResponseBytes: number;
}

export const DEFAULT_PUSH_OPTIONS: PushOptions = {
  timeoutMs: 30_000,
  maxBackoffMs: 30_000,
  minBackoffMs: 250,
  pollMs: 1_000,
  concurrency: 64,
  perAgent: 8,
  maxResponseBytes: 4 * 1024 * 1024,
};

/**
 * How long a replica keeps forwarding one agent's queue while agents it has no slot for may wait;
 * then the agent goes back to the claim, behind those that waited longer.
 */
const TURN_MS = 1_000;
/** Lease beyond one call's deadline: a replica that dies mid-call frees its work after this. */
const LEASE_SLACK_MS = 30_000;

/** One agent's queue being forwarded by this replica; `poke` says a delivery may have been queued since the last claim. */
interface Drain {
  poked: boolean;
  poke(): void;
  /** A slot freed: the drain may have room again. */
  nudge(): void;
}

class PushWorker {
  private readonly abort = new AbortController();
  private readonly ctx: CallContext;
  private readonly hubCtx: CallContext;
  private readonly caller: PushCaller;
  private readonly forwarder: PushForwarder;
  private readonly slots: PushSlots;
  /** Inbox channels of the agents this replica served: a send to one on another replica wakes this worker. */
  private readonly listening = new Map<string, Promise<() => Promise<void>>>();
  private readonly stopLocal: () => void;
  /** Agents whose queue this replica is forwarding. */
  private readonly drains = new Map<string, Drain>();
  private readonly active = new Set<Promise<void>>();
  private passing: Promise<void> | undefined;
  private again = false;
  /** A pass found every slot taken while work may have waited: drains end their turn. */
  private contended = false;
  /** Tenants holding their share while other agents of theirs have deliveries: their drains end their turn. */
  private waiting = new Set<string>();
  private readonly interval: NodeJS.Timeout;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  /** Agents' and push tasks' leases (wall clock). */
  private readonly leaseMs: number;
  /** How long a delivery being forwarded stays hidden from inbox polls (service clock). */
  private readonly claimMs: number;

  constructor(
    private readonly env: MessagingEnv,
    private readonly options: PushOptions,
    private readonly log: Logger,
    metrics: Metrics,
    policy: EgressPolicy,
    credentials: PushCredentials,
  ) {
    this.ctx = { principal: undefined, deadline: undefined, signal: this.abort.signal, log };
    // The worker's own calls to identity (the agent's tenant, grants): no caller is behind them.
    this.hubCtx = { ...this.ctx, principal: { kind: 'operator' } };
    const relay = new PushRelay(env, this.hubCtx, log);
    this.caller = new PushCaller(
      { policy, timeoutMs: options.timeoutMs, maxResponseBytes: options.maxResponseBytes, maxSockets: options.perAgent, onlineMs: env.limits.onlineMs },
      env.kv,
      credentials,
      new PushMetrics(metrics),
      this.abort.signal,
      log,
    );
    const schedule = { now: () => this.kick(), in: (ms: number) => this.wakeIn(ms) };
    this.forwarder = new PushForwarder(env, this.caller, relay, schedule, options.maxBackoffMs, this.abort.signal, log);
    this.slots = new PushSlots({
      total: options.concurrency,
      perTenant: options.perTenant ?? Math.max(1, Math.floor(options.concurrency / 4)),
      perAgent: options.perAgent,
    });
    this.leaseMs = options.timeoutMs + LEASE_SLACK_MS;
    this.claimMs = options.timeoutMs + env.limits.claimMs;
    this.stopLocal = env.wakes.listenLocally((agentId) => this.heard(agentId));
    this.interval = setInterval(() => {
      for (const drain of this.drains.values()) drain.poke();
      this.kick();
    }, options.pollMs);
    this.interval.unref();
    this.kick();
  }

  /**
   * This replica queued a delivery for the agent. Every send wakes its recipient; only a push
   * agent's is work here (the send just looked its recipient up, so this asks the cache). An
   * agent whose inbox channel the worker listens on hears it there already: the service's Kv
   * (LocalFirstKv) delivers this process's publishes in-process too.
   */
  private heard(agentId: string): void {
    if (this.listening.has(agentId)) return;
    this.env.recipients.get(agentId, this.hubCtx).then(
      (agent) => {
        if (!agent || agent.endpointUrl) this.wake(agentId);
      },
      () => this.wake(agentId),
    );
  }

  /** A delivery was queued for the agent: its drain claims it, or a pass looks for it. */
  private wake(agentId: string): void {
    const drain = this.drains.get(agentId);
    if (drain) drain.poke();
    else this.kick();
  }

  /** Looks for due work now; kicks during a pass run one more pass after it. */
  private kick(): void {
    if (this.abort.signal.aborted) return;
    if (this.passing) {
      this.again = true;
      return;
    }
    this.passing = this.pass()
      // A claim its stop cancelled is no failure.
      .catch((err) => {
        if (!this.abort.signal.aborted) this.log.error({ err }, 'the push worker could not look for work');
      })
      .finally(() => {
        this.passing = undefined;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  async stop(): Promise<void> {
    this.abort.abort();
    this.stopLocal();
    clearInterval(this.interval);
    clearTimeout(this.timer);
    for (const drain of this.drains.values()) drain.poke();
    await this.passing;
    await Promise.all(this.active);
    for (const subscribed of this.listening.values()) {
      const unsubscribe = await subscribed.catch(() => undefined);
      await unsubscribe?.().catch(() => undefined);
    }
    this.caller.close();
  }

  private wakeIn(ms: number): void {
    const at = Date.now() + ms;
    if (at >= this.timerAt || this.abort.signal.aborted) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timerAt = Infinity;
      this.kick();
    }, ms);
    this.timer.unref();
  }

  /** The wait after `failures` attempts in a row found the agent unavailable. */
  private backoff(failures: number): number {
    return Math.min(this.options.minBackoffMs * 2 ** (failures - 1), this.options.maxBackoffMs);
  }

  private async pass(): Promise<void> {
    this.contended = false;
    if (this.slots.free() > 0) {
      const now = Date.now();
      const due = await this.env.pushes.claimPushFollowUps(
        this.abort.signal,
        now,
        now + this.leaseMs,
        this.slots.free(),
        this.slots.busyTenants(),
        this.slots.busyAgents(),
      );
      for (const push of due) {
        // One claim may bring more of a tenant or agent than its share: the rest go back.
        if (this.slots.room(push.tenantId, push.agentId) === 0) await this.env.pushes.releasePushFollowUp(detachedSignal(), push.taskId, Date.now());
        else {
          this.slots.take(push.tenantId, push.agentId);
          this.occupy(push.tenantId, push.agentId, () => this.forwarder.followUp(push));
        }
      }
    }
    const free = this.slots.free();
    if (free === 0) {
      this.contended = true;
      return;
    }
    const now = Date.now();
    const { agents, waiting } = await this.env.pushes.claimPushAgents(this.abort.signal, this.env.now(), now, now + this.leaseMs, free, this.slots.busyTenants());
    this.waiting = new Set(waiting);
    for (const agent of agents) this.track(this.drain(agent));
  }

  /** Runs `work` in a slot of the agent's, taken before; the freed slot may let a waiting drain or pass go on. */
  private occupy(tenantId: string, agentId: string, work: () => Promise<unknown>): Promise<unknown> {
    const running = work().finally(() => {
      this.slots.give(tenantId, agentId);
      this.slotFreed(tenantId, agentId);
    });
    this.track(running.then(() => undefined));
    return running;
  }

  /**
   * Other drains held back by a full replica or tenant may claim again; a pass that found no room,
   * or left agents of this tenant unclaimed for want of its share, runs again.
   */
  private slotFreed(tenantId: string, agentId: string): void {
    for (const [id, drain] of this.drains) if (id !== agentId) drain.nudge();
    if (this.contended || this.waiting.has(tenantId)) this.kick();
  }

  private track(work: Promise<void>): void {
    const done: Promise<void> = work
      .catch((err) => this.log.error({ err }, 'push work failed'))
      .finally(() => this.active.delete(done));
    this.active.add(done);
  }

  private listen(agentId: string): void {
    if (this.listening.has(agentId)) return;
    const subscribed = this.env.kv.subscribe(inboxChannel(agentId), () => this.wake(agentId));
    subscribed.catch((err) => {
      this.log.warn({ err, agent_id: agentId }, 'could not listen for sends to a push agent');
      this.listening.delete(agentId);
    });
    this.listening.set(agentId, subscribed);
  }

  /**
   * Forwards the agent's queue while it has deliveries, the agent answers and its turn lasts:
   * claims as many as its slots allow, oldest first, and claims again when a delivery finishes
   * only if the last claim filled its room or a wake-up came since (no query per delivery to
   * learn that the queue is still empty).
   */
  private async drain(agent: PushAgentRecord): Promise<void> {
    this.listen(agent.agentId);
    let wakeUp: (() => void) | undefined;
    const drain: Drain = {
      poked: true,
      poke() {
        this.poked = true;
        wakeUp?.();
      },
      nudge: () => wakeUp?.(),
    };
    this.drains.set(agent.agentId, drain);
    const started = performance.now();
    let leaseUntil = Date.now() + this.leaseMs;
    const running = new Set<Promise<void>>();
    const held = new Set<string>();
    /** The last delivery of each task in flight: the task's next one waits for it. */
    const tails = new Map<string, Promise<Forwarded>>();
    let unavailable = false;
    let stopped = false;
    try {
      for (;;) {
        const others = this.contended || this.waiting.has(agent.tenantId);
        const over = this.abort.signal.aborted || unavailable || stopped || (others && performance.now() - started >= TURN_MS);
        const room = over ? 0 : this.slots.room(agent.tenantId, agent.agentId);
        if (room > 0 && drain.poked) {
          drain.poked = false;
          // Taken before the claim, so drains claiming at once stay within the tenant's share.
          for (let i = 0; i < room; i += 1) this.slots.take(agent.tenantId, agent.agentId);
          let claimed: ClaimedDelivery[] = [];
          try {
            if (Date.now() > leaseUntil - this.leaseMs / 2) {
              leaseUntil = Date.now() + this.leaseMs;
              await this.env.pushes.renewPushAgent(detachedSignal(), agent.agentId, leaseUntil);
            }
            const now = this.env.now();
            claimed = (await this.env.pushes.claimPushDeliveries(detachedSignal(), agent.agentId, now, now + this.claimMs, room)).filter(
              // A delivery waiting behind its task's earlier one past its claim comes back: it is still ours.
              (item) => !held.has(item.delivery.id),
            );
          } finally {
            for (let i = claimed.length; i < room; i += 1) this.slots.give(agent.tenantId, agent.agentId);
          }
          for (const item of claimed) {
            held.add(item.delivery.id);
            const before = tails.get(item.task.id);
            const forwarded = this.occupy(agent.tenantId, agent.agentId, () => this.forwarder.forward(agent, item, before)).then(
              (result) => result as Forwarded,
              // Logged where it is tracked; the drain stops, and its task's later deliveries with it.
              () => 'stopped' as const,
            );
            tails.set(item.task.id, forwarded);
            const settled: Promise<void> = forwarded.then((result) => {
              if (result === 'unavailable') unavailable = true;
              if (result === 'stopped') stopped = true;
              held.delete(item.delivery.id);
              if (tails.get(item.task.id) === forwarded) tails.delete(item.task.id);
              running.delete(settled);
              wakeUp?.();
            });
            running.add(settled);
          }
          // A full claim may have left more behind.
          if (claimed.length === room) drain.poked = true;
          if (claimed.length < room) this.slotFreed(agent.tenantId, agent.agentId);
          continue;
        }
        // Nothing in flight: the queue is empty, the turn is over, or the tenant's or replica's
        // slots are all held (the agent goes back, to be claimed where there is room).
        if (!running.size && (over || !drain.poked || room === 0)) break;
        await new Promise<void>((resolve) => {
          wakeUp = resolve;
        });
        wakeUp = undefined;
      }
    } finally {
      await Promise.all(running);
      const failures = unavailable ? agent.failures + 1 : 0;
      const backoff = failures ? this.backoff(failures) : 0;
      const now = Date.now();
      try {
        await this.env.pushes.releasePushAgent(detachedSignal(), agent.agentId, failures, failures ? now + backoff : 0, now);
      } finally {
        this.drains.delete(agent.agentId);
        if (failures) this.wakeIn(backoff);
        // A wake-up after the last claim, or a turn ended for agents that wait: a pass takes them.
        else if (drain.poked || this.contended || this.waiting.has(agent.tenantId)) this.kick();
      }
    }
  }
}

/**
 * Starts the push worker of one replica; returns how to stop it (in-flight calls are aborted and
 * their deliveries stay queued).
 */
export function startPushWorker(
  env: MessagingEnv,
  deps: { log: Logger; metrics: Metrics; policy: EgressPolicy; credentials: PushCredentials; options?: Partial<PushOptions> },
): () => Promise<void> {
  const worker = new PushWorker(env, { ...DEFAULT_PUSH_OPTIONS, ...deps.options }, deps.log, deps.metrics, deps.policy, deps.credentials);
  return () => worker.stop();
}

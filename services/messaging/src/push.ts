/**
 * The push worker: forwards the queued deliveries of push agents (recipients registered with an
 * A2A endpoint) with the A2A 1.0 JSON-RPC client of `@a2a-js/sdk`, and relays each answer into the
 * hub task through the store transition UpdateTask uses, announced on the task's Kv channel.
 *
 * - Work is claimed in the database with FOR UPDATE SKIP LOCKED and leases, so the replicas of the
 *   service share it: an agent's queue is forwarded by one worker at a time, oldest first; a
 *   delivery is acknowledged only after the agent accepted it (at-least-once, and the A2A
 *   messageId is the hub message's, so the agent can recognise a redelivery).
 * - Every call goes through the hub's egress guard (`EgressClient`): only to addresses the policy
 *   allows (checked at each connection, DNS pinned), no redirects, answers up to a size cap.
 * - An agent that does not answer (connection refused, timeout, HTTP 5xx/408/429) keeps its queue
 *   and is retried with exponential backoff up to `maxBackoffMs`; an agent that answers with an
 *   A2A error or another HTTP status refused the message, and the task fails with a fixed text
 *   naming the A2A error code or the HTTP status: no byte the agent sent reaches the task, an
 *   error or a log line (a peer's body may be anything, including what an internal URL said).
 * - The agent's task is recorded against the hub task (continuations and cancels name it) and,
 *   while it works, followed with GetTask at a backing-off pace until it is terminal or waits for
 *   input. A hub cancel is forwarded, best effort.
 * - A push agent counts online (for `x-ttl: 0`) while its endpoint answers.
 * - Every call carries the agent's push secret as `Authorization: Bearer <secret>` (the scheme an
 *   A2A card declares), looked up in the identity service per call so a rotation applies at once.
 */
import { AgentCard, Role, TaskState, type Message as A2AMessage, type Task as A2ATask } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory, type Client, type RequestOptions } from '@a2a-js/sdk/client';
import { fromJson, type JsonValue } from '@bufbuild/protobuf';
import { messagingv1 } from '@agenthub/proto';
import { contextOf, EgressClient, EgressError, HubError, newId, Reason, SpanKind, withSpan, type CallContext, type EgressPolicy, type Logger, type Metrics } from '@agenthub/runtime';
import { FINAL, isSettled, stateFromAgent } from '@agenthub/tasks';
import { PushMetrics, verdict } from './push-calls.js';
import { agentText, fromA2AArtifact, fromA2AMessage, toA2AMessage } from './a2a-codec.js';
import type { DeliveryRecord, PushAgentRecord, PushTaskRecord, StateName, TaskRecord } from './store.js';
import { inboxChannel, onlineKey, type MessagingEnv } from './env.js';
import { announce } from './lifecycle.js';
import { taskGrowthCheck, validateParts } from './tasks.js';

export interface PushOptions {
  /** Deadline of one call to an agent (MESSAGING_PUSH_TIMEOUT_MS). */
  timeoutMs: number;
  /** Longest wait between attempts at an agent that does not answer, and between follow-ups (MESSAGING_PUSH_MAX_BACKOFF_MS). */
  maxBackoffMs: number;
  /** First wait at an agent that does not answer; each next one doubles. */
  minBackoffMs: number;
  /** How often a replica looks for due work besides being woken (a send to a push agent it has not served yet waits up to this long). */
  pollMs: number;
  /** Agents and follow-ups one replica works on at once. */
  concurrency: number;
  /** Largest answer read from an agent (MESSAGING_PUSH_MAX_RESPONSE_BYTES); a longer one fails the task. */
  maxResponseBytes: number;
}

export const DEFAULT_PUSH_OPTIONS: PushOptions = {
  timeoutMs: 30_000,
  maxBackoffMs: 30_000,
  minBackoffMs: 250,
  pollMs: 1_000,
  concurrency: 8,
  maxResponseBytes: 4 * 1024 * 1024,
};

/** First follow-up of a task the agent accepted but had not finished; each next one doubles. */
const FIRST_FOLLOW_UP_MS = 10;
/** Deliveries forwarded to one agent before its lease goes back, so busy agents take turns. */
const TURN = 20;
/** Lease beyond one call's deadline: a replica that dies mid-call frees its work after this. */
const LEASE_SLACK_MS = 30_000;
/** The failed task's message when the grant between sender and push agent was revoked meanwhile. */
const GRANT_REVOKED_TEXT = 'The access grant between the agents was revoked';

/** The push secret of an agent (empty: it has none, so no credential is sent). */
export type PushCredentials = (agentId: string, signal: AbortSignal) => Promise<string>;

type Outcome<T> = { kind: 'ok'; value: T } | { kind: 'unavailable' } | { kind: 'refused'; text: string; a2a: boolean };

const idOf = (stored: unknown, key: 'messageId' | 'id') => (stored as Record<string, unknown>)[key];

/** The items (with an id) whose id is neither held nor earlier in `items`: an agent repeats them. */
function unseen(items: unknown[], held: ReadonlySet<string>, key: 'messageId' | 'id'): unknown[] {
  const seen = new Set<unknown>(held);
  return items.filter((item) => {
    const id = idOf(item, key);
    if (!id || seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}

/**
 * What an agent answered passes the checks a connected recipient's UpdateTask does (parts,
 * inline file sizes); refused with INVALID_PARAMS naming the item.
 */
function validateAnswer(messages: unknown[], artifacts: unknown[], maxParts: number): void {
  messages.forEach((m, i) => validateParts(fromJson(messagingv1.MessageSchema, m as JsonValue).parts, `message[${i}].parts`, maxParts));
  artifacts.forEach((a, i) => validateParts(fromJson(messagingv1.ArtifactSchema, a as JsonValue).parts, `artifacts[${i}].parts`, maxParts));
}

/** An answer the hub will not store: the task fails with a message of the hub's own, never the agent's text. */
const isRefusedAnswer = (err: unknown) => err instanceof HubError && (err.reason === Reason.INVALID_PARAMS || err.reason === Reason.LIMIT_EXCEEDED);

class PushWorker {
  private readonly abort = new AbortController();
  private readonly ctx: CallContext;
  /** The worker's own calls to identity (the agent's tenant, grants): no caller is behind them. */
  private readonly hubCtx: CallContext;
  private readonly metrics: PushMetrics;
  private readonly clients = new Map<string, Promise<Client>>();
  /** Inbox channels of the agents this replica served: a send to one wakes the worker. */
  private readonly listening = new Map<string, Promise<() => Promise<void>>>();
  private readonly active = new Set<Promise<void>>();
  private passing: Promise<void> | undefined;
  private again = false;
  private readonly interval: NodeJS.Timeout;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  /** Agents' and push tasks' leases (wall clock). */
  private readonly leaseMs: number;
  /** How long a delivery being forwarded stays hidden from inbox polls (service clock). */
  private readonly claimMs: number;

  private readonly egress: EgressClient;

  constructor(
    private readonly env: MessagingEnv,
    private readonly options: PushOptions,
    private readonly log: Logger,
    metrics: Metrics,
    policy: EgressPolicy,
    private readonly credentials: PushCredentials,
  ) {
    this.ctx = { principal: undefined, deadline: undefined, signal: this.abort.signal, log };
    this.hubCtx = { ...this.ctx, principal: { kind: 'operator' } };
    this.metrics = new PushMetrics(metrics);
    this.egress = new EgressClient({
      policy,
      timeoutMs: options.timeoutMs,
      maxResponseBytes: options.maxResponseBytes,
      userAgent: 'AgentHub-Push/1',
      maxSockets: options.concurrency,
    });
    this.leaseMs = options.timeoutMs + LEASE_SLACK_MS;
    this.claimMs = options.timeoutMs + env.limits.claimMs;
    this.interval = setInterval(() => this.kick(), options.pollMs);
    this.interval.unref();
    this.kick();
  }

  /** Looks for due work now; kicks during a pass run one more pass after it. */
  kick(): void {
    if (this.abort.signal.aborted) return;
    if (this.passing) {
      this.again = true;
      return;
    }
    this.passing = this.pass()
      .catch((err) => this.log.error({ err }, 'the push worker could not look for work'))
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
    clearInterval(this.interval);
    clearTimeout(this.timer);
    await this.passing;
    await Promise.all(this.active);
    for (const subscribed of this.listening.values()) {
      const unsubscribe = await subscribed.catch(() => undefined);
      await unsubscribe?.().catch(() => undefined);
    }
    this.egress.close();
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

  /**
   * The wait before asking about a working task again, after one that lasted `previousMs` (0: the
   * first). The first is short: most agents finish at once, and accepted with returnImmediately
   * their answer is still `submitted`; waiting minBackoffMs there made every exchange take 250 ms.
   */
  private nextDelay(previousMs: number): number {
    return Math.min(previousMs ? previousMs * 2 : FIRST_FOLLOW_UP_MS, this.options.maxBackoffMs);
  }

  /** The wait after `failures` attempts in a row found the agent unavailable. */
  private backoff(failures: number): number {
    return Math.min(this.options.minBackoffMs * 2 ** (failures - 1), this.options.maxBackoffMs);
  }

  private async pass(): Promise<void> {
    const store = this.env.store;
    let room = this.options.concurrency - this.active.size;
    if (room > 0) {
      const now = Date.now();
      for (const push of await store.claimPushFollowUps(now, now + this.leaseMs, room)) this.track(this.followUp(push));
    }
    room = this.options.concurrency - this.active.size;
    if (room > 0) {
      const now = Date.now();
      for (const agent of await store.claimPushAgents(this.env.now(), now, now + this.leaseMs, room)) this.track(this.drain(agent));
    }
  }

  private track(work: Promise<void>): void {
    const done: Promise<void> = work
      .catch((err) => this.log.error({ err }, 'push work failed'))
      .finally(() => {
        this.active.delete(done);
        this.kick();
      });
    this.active.add(done);
  }

  private listen(agentId: string): void {
    if (this.listening.has(agentId)) return;
    const subscribed = this.env.kv.subscribe(inboxChannel(agentId), () => this.kick());
    subscribed.catch((err) => {
      this.log.warn({ err, agent_id: agentId }, 'could not listen for sends to a push agent');
      this.listening.delete(agentId);
    });
    this.listening.set(agentId, subscribed);
  }

  private client(endpointUrl: string): Promise<Client> {
    let client = this.clients.get(endpointUrl);
    if (!client) {
      // The registered URL is the agent's JSON-RPC endpoint, so a card naming it is all the
      // factory needs: no discovery round trip.
      const card = AgentCard.fromJSON({
        name: endpointUrl,
        supportedInterfaces: [{ url: endpointUrl, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
      });
      client = new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl: this.egress.fetch })] }).createFromAgentCard(card);
      client.catch(() => this.clients.delete(endpointUrl));
      this.clients.set(endpointUrl, client);
    }
    return client;
  }

  /** One A2A call with the deadline, metrics, presence and the unavailable/refused verdict. */
  private async call<T>(
    method: string,
    target: { agentId: string; endpointUrl: string },
    log: Logger,
    send: (client: Client, options: RequestOptions) => Promise<T>,
  ): Promise<Outcome<T>> {
    const end = this.metrics.seconds.startTimer({ method });
    const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(this.options.timeoutMs)]);
    let outcome: Outcome<T>;
    try {
      let secret: string;
      try {
        secret = await this.credentials(target.agentId, signal);
      } catch (err) {
        // The identity service, not the agent, is unavailable: retried like an agent that is down.
        log.warn({ method, err }, 'could not look up the push secret');
        throw new EgressError('unreachable', 'The push secret could not be looked up');
      }
      const options: RequestOptions = { signal, ...(secret ? { serviceParameters: { authorization: `Bearer ${secret}` } } : {}) };
      outcome = { kind: 'ok', value: await send(await this.client(target.endpointUrl), options) };
    } catch (err) {
      const judged = verdict(err);
      if (judged.kind === 'unavailable') {
        outcome = { kind: 'unavailable' };
        log.warn({ method, reason: judged.text }, 'push agent unavailable');
      } else {
        outcome = judged;
        log.info({ method, error: judged.text }, 'push agent refused');
      }
    } finally {
      end();
    }
    this.metrics.calls.inc({ method, outcome: outcome.kind });
    await this.presence(target.agentId, outcome.kind !== 'unavailable');
    return outcome;
  }

  private async presence(agentId: string, online: boolean): Promise<void> {
    try {
      if (online) await this.env.kv.set(onlineKey(agentId), '1', this.env.limits.onlineMs);
      else await this.env.kv.del(onlineKey(agentId));
    } catch (err) {
      this.log.warn({ err, agent_id: agentId }, 'could not record a push agent\'s presence');
    }
  }

  /** Forwards the agent's queue in order until it is empty, the agent stops answering, or its turn ends. */
  private async drain(agent: PushAgentRecord): Promise<void> {
    this.listen(agent.agentId);
    let failures = agent.failures;
    try {
      for (let turn = 0; turn < TURN && !this.abort.signal.aborted; turn += 1) {
        const now = this.env.now();
        const [delivery] = await this.env.store.claimDeliveries(agent.agentId, now, now + this.claimMs, 1);
        if (!delivery) return;
        if (turn > 0) await this.env.store.renewPushAgent(agent.agentId, Date.now() + this.leaseMs);
        // The delivery continues the trace of the send that queued it; the egress client passes it to the agent.
        const span = { kind: SpanKind.PRODUCER, parent: contextOf(delivery.traceparent), attributes: { 'agent.id': agent.agentId, 'delivery.id': delivery.id } };
        const result = await withSpan('push delivery', span, () => this.deliver(agent, delivery));
        if (result === 'stopped') return;
        if (result === 'unavailable') {
          failures += 1;
          return;
        }
        failures = 0;
      }
    } finally {
      const backoff = failures ? this.backoff(failures) : 0;
      await this.env.store.releasePushAgent(agent.agentId, failures, failures ? Date.now() + backoff : 0);
      if (failures) this.wakeIn(backoff);
    }
  }

  private async deliver(agent: PushAgentRecord, delivery: DeliveryRecord): Promise<'done' | 'unavailable' | 'stopped'> {
    const { store } = this.env;
    const log = this.log.child({ agent_id: agent.agentId, task_id: delivery.taskId, delivery_id: delivery.id, attempt: delivery.attempts });
    const task = await store.getTask(delivery.taskId, false);
    if (!task || FINAL.has(task.state)) {
      await store.ackDelivery(agent.agentId, delivery.id);
      return 'done';
    }
    if (!(await this.granted(task))) {
      await this.fail(delivery.taskId, GRANT_REVOKED_TEXT);
      await store.ackDelivery(agent.agentId, delivery.id);
      log.info('not forwarded: the access grant between the agents was revoked');
      return 'done';
    }
    const remote = await store.getPushTask(delivery.taskId);
    const message = toA2AMessage(delivery.message, { contextId: delivery.contextId, taskId: remote?.remoteTaskId ?? '' });
    // returnImmediately: the agent accepts and works on its own time; the worker follows up.
    const outcome = await this.call('SendMessage', agent, log, (client, options) =>
      client.sendMessage(
        {
          tenant: '',
          message,
          configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: true },
          metadata: undefined,
        },
        options,
      ),
    );
    if (outcome.kind === 'unavailable') {
      await store.releaseDelivery(delivery.id);
      return this.abort.signal.aborted ? 'stopped' : 'unavailable';
    }
    if (outcome.kind === 'refused') {
      await this.fail(delivery.taskId, outcome.a2a ? `The agent refused the message: ${outcome.text}` : `The message could not be delivered: ${outcome.text}`);
    }
    else await this.relay(agent.agentId, delivery.taskId, outcome.value, 0, remote === undefined);
    await store.ackDelivery(agent.agentId, delivery.id);
    log.info({ outcome: outcome.kind }, 'delivered to push agent');
    return 'done';
  }

  /** Asks the agent about its task again (or forwards a cancel of it). */
  private async followUp(push: PushTaskRecord): Promise<void> {
    const { store } = this.env;
    const log = this.log.child({ agent_id: push.agentId, task_id: push.taskId, remote_task_id: push.remoteTaskId });
    if (push.cancelRequested) {
      await this.call('CancelTask', push, log, (client, options) => client.cancelTask({ tenant: '', id: push.remoteTaskId, metadata: undefined }, options));
      // Cut short by shutdown: due again at once, for another replica.
      if (this.abort.signal.aborted) await store.requestPushCancel(push.taskId);
      else await store.pushCancelForwarded(push.taskId);
      return;
    }
    const task = await store.getTask(push.taskId, false);
    if (!task || FINAL.has(task.state)) {
      await store.stopPushFollowUp(push.taskId);
      return;
    }
    const outcome = await this.call('GetTask', push, log, (client, options) => client.getTask({ tenant: '', id: push.remoteTaskId }, options));
    if (outcome.kind === 'ok') {
      await this.relay(push.agentId, push.taskId, outcome.value, push.followDelayMs, false);
    } else if (outcome.kind === 'refused') {
      await this.fail(push.taskId, `The agent could not report on its task: ${outcome.text}`);
      await store.stopPushFollowUp(push.taskId);
    } else if (this.abort.signal.aborted) {
      // Cut short by shutdown: due again at once, for another replica.
      await store.savePushTask(push.taskId, push.agentId, push.remoteTaskId, Date.now(), push.followDelayMs);
    } else {
      const delay = this.nextDelay(push.followDelayMs);
      await store.savePushTask(push.taskId, push.agentId, push.remoteTaskId, Date.now() + delay, delay);
      this.wakeIn(delay);
    }
  }

  /**
   * Moves the hub task to what the agent answered: a bare message completes it; a task gives its
   * state, its agent messages and artifacts not relayed yet, and is followed up while it works.
   * `unrecorded`: the hub knew no agent task before this answer, so a hub cancel meanwhile could
   * not be forwarded and is forwarded now; otherwise CancelTask requested it itself, and asking
   * again would send the agent a second cancel.
   */
  private async relay(agentId: string, taskId: string, answer: A2AMessage | A2ATask, followDelayMs: number, unrecorded: boolean): Promise<void> {
    const task = await this.env.store.getTask(taskId, false);
    if (task && !FINAL.has(task.state) && !(await this.granted(task))) {
      // What the agent said after the grant went is not relayed; its own task is canceled.
      await this.fail(taskId, GRANT_REVOKED_TEXT);
      if (!('messageId' in answer)) {
        await this.env.store.savePushTask(taskId, agentId, answer.id, null, 0);
        await this.env.store.requestPushCancel(taskId);
        this.kick();
      }
      return;
    }
    if ('messageId' in answer) {
      await this.apply(taskId, 'completed', [fromA2AMessage(answer)], []);
      return;
    }
    const state = stateFromAgent(answer.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED);
    const said = [...answer.history, ...(answer.status?.message ? [answer.status.message] : [])].filter((m) => m.role === Role.ROLE_AGENT);
    const after = await this.apply(taskId, state, said.map(fromA2AMessage), answer.artifacts.filter((a) => a.parts.length).map(fromA2AArtifact));
    const settled = isSettled(state);
    const delay = settled ? 0 : this.nextDelay(followDelayMs);
    await this.env.store.savePushTask(taskId, agentId, answer.id, settled ? null : Date.now() + delay, delay);
    if (settled) return;
    if (after && FINAL.has(after) && unrecorded) {
      // The hub task ended (canceled, expired) while the agent took the message: tell the agent.
      await this.env.store.requestPushCancel(taskId);
      this.kick();
    } else {
      this.wakeIn(delay);
    }
  }

  /**
   * Across tenants, whether the grant that let the sender reach the agent still holds: asked of
   * identity every time (never cached), as for a connected recipient's UpdateTask.
   */
  private async granted(task: TaskRecord): Promise<boolean> {
    const agent = await this.env.recipients.get(task.recipientAgentId, this.hubCtx);
    if (!agent || agent.tenantId === task.senderTenantId) return true;
    const grant = await this.env.identity.checkGrant({ agentId: task.senderAgentId, otherAgentId: agent.id }, { parent: this.hubCtx });
    return grant.approved;
  }

  private async fail(taskId: string, text: string): Promise<void> {
    await this.apply(taskId, 'failed', [agentText(newId('msg'), text)], []);
  }

  /**
   * One transition of the hub task: the state and the messages and artifacts (hub proto JSON) it
   * does not hold yet, by id, so a repeated look at the agent's task adds nothing. A finished hub
   * task stays as it is. Returns the hub task's state afterwards.
   */
  private async apply(taskId: string, state: StateName, messages: unknown[], artifacts: unknown[]): Promise<StateName | undefined> {
    const now = this.env.now();
    let moved: Awaited<ReturnType<MessagingEnv['store']['transition']>>;
    try {
      validateAnswer(messages, artifacts, this.env.limits.maxParts);
      moved = await this.env.store.transition(
        taskId,
        (t, held) => {
          if (FINAL.has(t.state)) return { next: t };
          const newMessages = unseen(messages, held!.messages, 'messageId');
          const newArtifacts = unseen(artifacts, held!.artifacts, 'id');
          if (state === t.state && !newMessages.length && !newArtifacts.length) return { next: t };
          // As with UpdateTask, a finished task takes its queued deliveries with it, in the same commit.
          return { next: { state, updatedAt: now }, append: { messages: newMessages, artifacts: newArtifacts }, purge: FINAL.has(state) };
        },
        { held: true, check: taskGrowthCheck(this.env.limits), load: { historyLength: 0, artifacts: false } },
      );
    } catch (err) {
      if (!isRefusedAnswer(err)) throw err;
      this.log.info({ task_id: taskId, reason: (err as HubError).message }, 'push agent answer not accepted');
      const text = `The agent's answer was not accepted: ${(err as HubError).message}`;
      moved = await this.env.store.transition(
        taskId,
        (t) => (FINAL.has(t.state) ? { next: t } : { next: { state: 'failed', updatedAt: now }, append: { messages: [agentText(newId('msg'), text)] }, purge: true }),
        { load: { historyLength: 0, artifacts: false } },
      );
    }
    if (moved && moved.after.version !== moved.before.version) await announce(this.env, moved.after, this.ctx);
    return moved?.after.state;
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

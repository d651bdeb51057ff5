/**
 * One call of the push worker to a push agent: the A2A 1.0 JSON-RPC client of `@a2a-js/sdk` over
 * the egress guard, the agent's push secret, the deadline, metrics, presence, and the verdict on a
 * failure (retry later, or the task fails) with the hub's fixed text for the sender.
 */
import { AgentCard } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory, type Client, type RequestOptions } from '@a2a-js/sdk/client';
import { isJsonRpcError } from '@a2a-js/sdk/errors';
import { Counter, Histogram } from 'prom-client';
import { EgressClient, EgressError, type EgressPolicy, type Kv, type Logger, type Metrics } from '@agenthub/runtime';
import { onlineKey } from './env.js';

/** The push secret of an agent (empty: it has none, so no credential is sent). */
export type PushCredentials = (agentId: string, signal: AbortSignal) => Promise<string>;

export type Outcome<T> = { kind: 'ok'; value: T } | { kind: 'unavailable' } | { kind: 'refused'; text: string; a2a: boolean };

/** Whom a call goes to. */
export interface CallTarget {
  agentId: string;
  endpointUrl: string;
}

/**
 * How long an answering agent's presence stands before the next answer writes it again: at
 * hundreds of calls a second to one agent, one Kv write per call would be most of the worker's
 * Kv traffic; an agent that stops answering is marked offline at once.
 */
const PRESENCE_REFRESH_MS = 1_000;

export interface CallerOptions {
  policy: EgressPolicy;
  timeoutMs: number;
  maxResponseBytes: number;
  /** Kept-alive connections per agent endpoint: as many as calls to one agent at once. */
  maxSockets: number;
  /** A2A online window (MESSAGING_ONLINE_MS). */
  onlineMs: number;
}

/**
 * Makes the worker's calls. The secret is looked up in the identity service for every delivery
 * (once for its calls), so a rotation applies to the next one.
 */
export class PushCaller {
  private readonly egress: EgressClient;
  private readonly clients = new Map<string, Promise<Client>>();
  /** When each agent's presence was last written (wall clock). */
  private readonly present = new Map<string, number>();

  constructor(
    private readonly options: CallerOptions,
    private readonly kv: Kv,
    private readonly credentials: PushCredentials,
    private readonly metrics: PushMetrics,
    private readonly stopping: AbortSignal,
    private readonly log: Logger,
  ) {
    this.egress = new EgressClient({
      policy: options.policy,
      timeoutMs: options.timeoutMs,
      maxResponseBytes: options.maxResponseBytes,
      userAgent: 'AgentHub-Push/1',
      maxSockets: options.maxSockets,
    });
  }

  close(): void {
    this.egress.close();
  }

  /** The agent's push secret for the calls of one delivery or follow-up; a failed lookup fails those calls as unavailable. */
  secret(agentId: string): Promise<string> {
    const looked = this.credentials(agentId, AbortSignal.any([this.stopping, AbortSignal.timeout(this.options.timeoutMs)]));
    // Awaited by the calls that use it; this only keeps a failure from being unhandled meanwhile.
    looked.catch(() => undefined);
    return looked;
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

  /** One A2A call with the secret, the deadline, metrics, presence and the unavailable/refused verdict. */
  async call<T>(
    method: string,
    target: CallTarget,
    secret: Promise<string>,
    log: Logger,
    send: (client: Client, options: RequestOptions) => Promise<T>,
  ): Promise<Outcome<T>> {
    const end = this.metrics.seconds.startTimer({ method });
    const signal = AbortSignal.any([this.stopping, AbortSignal.timeout(this.options.timeoutMs)]);
    let outcome: Outcome<T>;
    try {
      let bearer: string;
      try {
        bearer = await secret;
      } catch (err) {
        // The identity service, not the agent, is unavailable: retried like an agent that is down.
        log.warn({ method, err }, 'could not look up the push secret');
        throw new EgressError('unreachable', 'The push secret could not be looked up');
      }
      const options: RequestOptions = { signal, ...(bearer ? { serviceParameters: { authorization: `Bearer ${bearer}` } } : {}) };
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

  /** A push agent counts online (for `x-ttl: 0`) while its endpoint answers. */
  private async presence(agentId: string, online: boolean): Promise<void> {
    const now = Date.now();
    if (online && now - (this.present.get(agentId) ?? -Infinity) < PRESENCE_REFRESH_MS) return;
    try {
      if (online) {
        if (this.present.size >= 10_000) this.present.clear();
        this.present.set(agentId, now);
        await this.kv.set(onlineKey(agentId), '1', this.options.onlineMs);
      } else {
        this.present.delete(agentId);
        await this.kv.del(onlineKey(agentId));
      }
    } catch (err) {
      this.present.delete(agentId);
      this.log.warn({ err, agent_id: agentId }, "could not record a push agent's presence");
    }
  }
}

/** Calls to push agents, registered in the process's registry. */
export class PushMetrics {
  readonly calls: Counter<'method' | 'outcome'>;
  readonly seconds: Histogram<'method'>;

  constructor(metrics: Metrics) {
    // A service restarted on the same registry (tests) reuses the metrics it registered before.
    const existing = (name: string) => metrics.registry.getSingleMetric(name);
    this.calls =
      (existing('agenthub_messaging_push_calls_total') as Counter<'method' | 'outcome'> | undefined) ??
      new Counter({
        name: 'agenthub_messaging_push_calls_total',
        help: 'A2A calls to push agents by method (SendMessage, GetTask, CancelTask) and outcome: ok, unavailable (retried), refused (an A2A error).',
        labelNames: ['method', 'outcome'],
        registers: [metrics.registry],
      });
    this.seconds =
      (existing('agenthub_messaging_push_call_seconds') as Histogram<'method'> | undefined) ??
      new Histogram({
        name: 'agenthub_messaging_push_call_seconds',
        help: 'Time of one A2A call to a push agent, by method.',
        labelNames: ['method'],
        buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
        registers: [metrics.registry],
      });
  }
}

/** A status that asks the caller to come back later is the agent being unavailable, not its answer. */
const RETRY_LATER = new Set([408, 429]);

/** Names of the A2A 1.0 JSON-RPC error codes, for the failed task's message. */
const A2A_ERRORS: Record<number, string> = {
  [-32700]: 'parse error',
  [-32600]: 'invalid request',
  [-32601]: 'method not found',
  [-32602]: 'invalid params',
  [-32603]: 'internal error',
  [-32001]: 'task not found',
  [-32002]: 'task not cancelable',
  [-32003]: 'push notifications not supported',
  [-32004]: 'unsupported operation',
  [-32005]: 'content type not supported',
  [-32006]: 'invalid agent response',
  [-32007]: 'extended agent card not configured',
  [-32008]: 'extension support required',
  [-32009]: 'version not supported',
};

/**
 * What came of a failed call, in the hub's words only: the verdict and a fixed text naming the
 * A2A error code or the HTTP status. The agent's own message, body or error text is never kept.
 */
export function verdict(err: unknown): { kind: 'unavailable'; text: string } | { kind: 'refused'; text: string; a2a: boolean } {
  if (err instanceof EgressError) {
    switch (err.failure) {
      case 'unreachable':
      case 'timeout':
      case 'aborted':
        return { kind: 'unavailable', text: err.message };
      case 'status':
        if (err.status >= 500 || RETRY_LATER.has(err.status)) return { kind: 'unavailable', text: `The agent's endpoint answered HTTP ${err.status}` };
        return { kind: 'refused', text: `The agent's endpoint answered HTTP ${err.status}`, a2a: false };
      case 'redirect':
        return { kind: 'refused', text: `The agent's endpoint answered HTTP ${err.status}, a redirect the hub does not follow`, a2a: false };
      case 'refused-address':
        return { kind: 'refused', text: "The agent's endpoint is on an address the hub may not call", a2a: false };
      case 'too-large':
        return { kind: 'refused', text: "The agent's answer is larger than the hub accepts", a2a: false };
      case 'bad-url':
        return { kind: 'refused', text: "The agent's endpoint URL is not usable", a2a: false };
    }
  }
  if (isJsonRpcError(err)) {
    const name = A2A_ERRORS[err.envelopeCode];
    return { kind: 'refused', text: `A2A error ${err.envelopeCode}${name ? ` (${name})` : ''}`, a2a: true };
  }
  // The signal's reason past the deadline or on shutdown. By name, not class: it may come from
  // another realm (a test VM).
  const name = (err as { name?: unknown } | undefined)?.name;
  if (name === 'TimeoutError' || name === 'AbortError') return { kind: 'unavailable', text: 'The call was cut short' };
  return { kind: 'refused', text: "The agent's answer could not be read", a2a: false };
}

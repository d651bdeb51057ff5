/**
 * What one call of the push worker to a push agent came to: its metrics, and the verdict on a
 * failure (retry later, or the task fails) with the hub's fixed text for the sender.
 */
import { isJsonRpcError } from '@a2a-js/sdk/errors';
import { Counter, Histogram } from 'prom-client';
import { EgressError, type Metrics } from '@agenthub/runtime';

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

import { ErrorCode, HubRpcError, retryAfterMs, type RpcErrorBody } from './errors.js';
import type { MethodName, ParamsOf, ResultOf, StreamMethod, UnaryMethod } from './methods.js';
import { serve, type Handler, type ServeOptions } from './serve.js';
import { parseSse } from './sse.js';
import type { SendConfiguration, Task } from './types.js';

export interface RetryPolicy {
  /** Tries in all, the first included; 1 never retries. */
  attempts: number;
  /** First backoff; doubled per try, with jitter. */
  baseMs: number;
  /** Longest backoff between two tries. */
  maxMs: number;
  /** A `Retry-After` longer than this is not waited for: the error is thrown instead. */
  maxRetryAfterMs: number;
}

export interface HubClientOptions {
  /** The hub's base URL, e.g. `http://127.0.0.1:8080`. */
  url: string;
  /** The agent's API key (`ahk_…`), sent as a bearer token. */
  apiKey: string;
  /** The JSON-RPC path; `/a2a` unless you talk to `/agents/{agentId}/a2a`. */
  path?: string;
  retry?: Partial<RetryPolicy>;
  /** A fetch of your own (proxies, tracing); the global one by default. */
  fetch?: typeof fetch;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** This call's retry policy, or false for a single try. */
  retry?: Partial<RetryPolicy> | false;
}

export interface StreamOptions extends CallOptions {
  /** Resume after this event id (`SubscribeToTask`). */
  lastEventId?: string;
}

/** One event of a stream and the SSE id to resume after it. */
export interface StreamItem<E> {
  id?: string;
  result: E;
}

const DEFAULT_RETRY: RetryPolicy = { attempts: 4, baseMs: 250, maxMs: 10_000, maxRetryAfterMs: 60_000 };

/**
 * Calls whose repetition is not the same as one call. They are retried only when the hub says it
 * did not act (429, 503, a transient reason), never after a lost connection.
 */
const NOT_REPEATABLE = new Set<MethodName>([
  'x-hub/workspace.create',
  'x-hub/workspace.forget',
  'x-hub/webhooks.create',
  'x-hub/webhooks.rotate_secret',
  'x-hub/webhooks.test',
  'x-hub/webhooks.replay',
  'x-hub/tasks.update',
  'CancelTask',
]);

const TERMINAL = new Set(['completed', 'failed', 'canceled', 'rejected']);

let nextId = 1;

/**
 * A typed client of the hub's agent JSON-RPC (`POST /a2a`). `call` answers unary methods and
 * throws HubRpcError for refusals; retryable failures are retried with backoff, honouring
 * `Retry-After`. `stream` yields a streaming method's events and reconnects where the stream
 * can resume without loss.
 */
export class HubClient {
  private readonly endpoint: string;
  private readonly fetch: typeof fetch;
  private readonly retry: RetryPolicy;

  constructor(private readonly options: HubClientOptions) {
    if (!options.apiKey) throw new TypeError('HubClient needs an apiKey');
    this.endpoint = new URL(options.path ?? '/a2a', options.url).toString();
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
  }

  /** Calls one unary method; resolves to its result or rejects with HubRpcError. */
  async call<M extends UnaryMethod>(method: M, params: ParamsOf<M>, options: CallOptions = {}): Promise<ResultOf<M>> {
    // A send carries a messageId so that a retry is the same send, not a second one.
    const sent = method === 'SendMessage' ? withMessageId(params as ParamsOf<'SendMessage'>) : params;
    return this.retrying(method, options, async () => {
      const response = await this.post(method, sent, options.signal);
      const body = await responseBody(response);
      if (body.error) throw body.error;
      return body.result as ResultOf<M>;
    });
  }

  /** `SendMessage` of one text part to `agentId`; `blocking` waits (up to the hub's 60 s) for the answer. */
  sendText(agentId: string, text: string, configuration: Omit<SendConfiguration, 'agentId'> = {}, options?: CallOptions): Promise<Task> {
    return this.call('SendMessage', { message: { role: 'user', parts: [{ kind: 'text', text }] }, configuration: { ...configuration, agentId } }, options);
  }

  /** Runs this agent as a connected agent until `options.signal` aborts; see `serve`. */
  serve(handler: Handler, options?: ServeOptions): Promise<void> {
    return serve(this, handler, options);
  }

  /**
   * Opens a streaming method and yields its events. When the connection drops or the hub closes
   * the stream (after 30 minutes), it reconnects: a task stream resumes after the last event id
   * (`SendStreamingMessage` continues as `SubscribeToTask`, never resending), the inbox reopens
   * (unacknowledged deliveries come again). A task stream ends after its final event.
   */
  async *stream<M extends StreamMethod>(method: M, params: ParamsOf<M>, options: StreamOptions = {}): AsyncGenerator<StreamItem<ResultOf<M>>> {
    let current: { method: StreamMethod; params: unknown } = {
      method,
      params: method === 'SendStreamingMessage' ? withMessageId(params as ParamsOf<'SendStreamingMessage'>) : params,
    };
    let lastEventId = options.lastEventId;
    let failures = 0;
    const policy = this.policy(options);
    while (true) {
      let response: Response;
      try {
        response = await this.post(current.method, current.params, options.signal, lastEventId);
        if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
          const body = await responseBody(response);
          throw body.error ?? new HubRpcError({ code: ErrorCode.INTERNAL_ERROR, message: `${method} did not answer with a stream` }, response.status);
        }
      } catch (err) {
        // Opening again is safe: a SendStreamingMessage carries its messageId, so a repeat is the same send.
        failures += 1;
        if (!this.shouldRetry(err, failures, policy, true)) throw err;
        await sleep(this.delay(err, failures, policy), options.signal);
        continue;
      }
      let finished = false;
      let yielded = false;
      try {
        for await (const event of parseSse(response.body!)) {
          const message = JSON.parse(event.data) as { result?: unknown; error?: RpcErrorBody };
          if (message.error) throw new HubRpcError(message.error, response.status);
          failures = 0;
          if (event.id !== undefined) lastEventId = event.id;
          const result = message.result as { kind?: string; id?: string; final?: boolean; status?: { state?: string } };
          if (current.method === 'SendStreamingMessage' && result.kind === 'task' && result.id) {
            current = { method: 'SubscribeToTask', params: { id: result.id } };
          }
          yield { ...(event.id !== undefined ? { id: event.id } : {}), result: message.result as ResultOf<M> };
          yielded = true;
          if (result.final === true || (result.kind === 'task' && TERMINAL.has(result.status?.state ?? ''))) finished = true;
        }
      } catch (err) {
        if (err instanceof HubRpcError || options.signal?.aborted) throw err;
        failures += 1;
        if (!this.shouldRetry(err, failures, policy, true)) throw err;
        await sleep(this.delay(err, failures, policy), options.signal);
        continue;
      }
      if (finished || current.method === 'SendStreamingMessage') return;
      // A peer that closes streams at once must not be called in a tight loop.
      if (!yielded) await sleep(this.delay(undefined, 1, policy), options.signal);
    }
  }

  private async post(method: string, params: unknown, signal?: AbortSignal, lastEventId?: string): Promise<Response> {
    const headers: Record<string, string> = {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'A2A-Version': '1.0',
      Authorization: `Bearer ${this.options.apiKey}`,
    };
    if (lastEventId !== undefined) headers['Last-Event-ID'] = lastEventId;
    return this.fetch(this.endpoint, {
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
      ...(signal ? { signal } : {}),
    });
  }

  private policy(options: CallOptions): RetryPolicy {
    return options.retry === false ? { ...this.retry, attempts: 1 } : { ...this.retry, ...options.retry };
  }

  private async retrying<T>(method: MethodName, options: CallOptions, attempt: () => Promise<T>): Promise<T> {
    const policy = this.policy(options);
    for (let tries = 1; ; tries++) {
      try {
        return await attempt();
      } catch (err) {
        if (!this.shouldRetry(err, tries, policy, !NOT_REPEATABLE.has(method))) throw err;
        await sleep(this.delay(err, tries, policy), options.signal);
      }
    }
  }

  private shouldRetry(err: unknown, tries: number, policy: RetryPolicy, repeatable: boolean): boolean {
    if (tries >= policy.attempts) return false;
    if (err instanceof HubRpcError) {
      if (err.retryAfterMs !== undefined && err.retryAfterMs > policy.maxRetryAfterMs) return false;
      return err.retryable || (repeatable && (err.httpStatus === 502 || err.httpStatus === 504));
    }
    if (err instanceof Error && err.name === 'AbortError') return false;
    // The connection failed: the hub may or may not have acted on the call.
    return repeatable;
  }

  private delay(err: unknown, tries: number, policy: RetryPolicy): number {
    if (err instanceof HubRpcError && err.retryAfterMs !== undefined) return err.retryAfterMs;
    const backoff = Math.min(policy.maxMs, policy.baseMs * 2 ** (tries - 1));
    return backoff / 2 + Math.random() * (backoff / 2);
  }
}

function withMessageId<P extends ParamsOf<'SendMessage'>>(params: P): P {
  if (params.message?.messageId) return params;
  return { ...params, message: { ...params.message, messageId: crypto.randomUUID() } };
}

/** A unary response: its result, or its error as HubRpcError (also for bodies that are not JSON-RPC). */
async function responseBody(response: Response): Promise<{ result?: unknown; error?: HubRpcError }> {
  const wait = retryAfterMs(response.headers.get('retry-after'));
  const text = await response.text();
  let body: { result?: unknown; error?: RpcErrorBody } | undefined;
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    body = undefined;
  }
  if (body?.error) return { error: new HubRpcError(body.error, response.status, wait) };
  if (!body || !response.ok || !('result' in body)) {
    return { error: new HubRpcError({ code: ErrorCode.INTERNAL_ERROR, message: `HTTP ${response.status} without a JSON-RPC response` }, response.status, wait) };
  }
  return { result: body.result };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

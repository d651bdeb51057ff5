import { HubError, SpanKind, SpanStatusCode, withSpan, type Logger, type Metrics, type Principal } from '@agenthub/runtime';
import { protocolError, RpcCode, toRpcError, type RpcError } from './errors.js';
import { checkParams, DEFAULT_MAX_JSON_DEPTH } from './input.js';

export type RpcId = string | number | null;

export interface RpcResponse {
  jsonrpc: '2.0';
  id: RpcId;
  result?: unknown;
  error?: RpcError;
}

/** What one HTTP request knows about its caller, shared by every call of a batch. */
export interface RpcContext {
  readonly principal: Principal;
  /** Path-selected target agent on `/agents/{agentId}/a2a`. */
  readonly targetAgentId?: string;
  /** The `A2A-Version` header as sent, if any. */
  readonly a2aVersion?: string;
  readonly signal?: AbortSignal;
  /** The SSE `Last-Event-ID` header of a reconnecting stream. */
  readonly lastEventId?: string;
  /** This hub's URL as the caller reached it (`https://host`), for documents naming absolute URLs. */
  readonly baseUrl?: string;
}

/** One event of a streaming method: the result of one JSON-RPC response object on the stream. */
export interface StreamEvent {
  /** The SSE event id a client may resume after. */
  id?: string;
  result: unknown;
}

/** One JSON-RPC method: validates its params, then performs the call. */
export type RpcMethod =
  | { invoke(params: Record<string, unknown>, ctx: RpcContext): Promise<unknown>; stream?: undefined }
  | {
      /** Checks the params and opens the stream; a refusal before the first event is a rejection. */
      stream(params: Record<string, unknown>, ctx: RpcContext): Promise<AsyncIterable<StreamEvent>>;
      invoke?: undefined;
    };

/** A streaming call accepted by `open`: the events to send as SSE under the request's id. */
export interface OpenStream {
  id: RpcId;
  events: AsyncIterable<StreamEvent>;
  /** A failure after the first event, in the endpoint's error dialect. */
  failure(err: unknown): RpcError;
}

/** How a handler writes its errors: the hub's table by default, A2A's on the strict endpoint. */
export interface ErrorDialect {
  /** A method's failure (a HubError, or anything thrown) as the error object to send. */
  failure(err: unknown): RpcError;
  /** Errors of the envelope itself: parse, invalid request, unknown method, params not an object. */
  envelope(code: number, message: string, data?: Record<string, unknown>): RpcError;
}

export const HUB_ERRORS: ErrorDialect = {
  failure: (err) => toRpcError(HubError.from(err)),
  envelope: protocolError,
};

export interface JsonRpcHandlerOptions {
  methods: ReadonlyMap<string, RpcMethod>;
  /** Most calls in one batch; 0 refuses batches (one request per HTTP call). */
  maxBatch: number;
  log: Logger;
  metrics: Metrics;
  /** Checked before dispatch of each call; an error here answers the call instead. */
  precheck?: (ctx: RpcContext) => RpcError | undefined;
  errors?: ErrorDialect;
  /** Prefix of the method label in metrics, to tell endpoints whose method names overlap apart. */
  metricPrefix?: string;
  /** Calls that wait by design (see waits.ts): timed in rpcWaitDuration, apart from rpcDuration. */
  waits?: (method: string, params: Record<string, unknown>) => boolean;
  /** How deep params may nest (HUB_MAX_JSON_DEPTH). */
  maxDepth?: number;
}

/**
 * JSON-RPC 2.0 over any transport: envelope validation, batches, notifications, dispatch and
 * error mapping. It knows nothing of HTTP; the Koa app only feeds it parsed bodies.
 */
export class JsonRpcHandler {
  private readonly errors: ErrorDialect;

  constructor(private readonly options: JsonRpcHandlerOptions) {
    this.errors = options.errors ?? HUB_ERRORS;
  }

  /** Handles a body that failed to parse as JSON. */
  parseError(): RpcResponse {
    return { jsonrpc: '2.0', id: null, error: this.errors.envelope(RpcCode.PARSE_ERROR, 'Parse error: the body is not valid JSON') };
  }

  /** Whether `body` is one call (not a batch) of a streaming method, to be answered with `open`. */
  isStream(body: unknown): boolean {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) return false;
    const name = (body as Record<string, unknown>).method;
    return typeof name === 'string' && this.options.methods.get(name)?.stream !== undefined;
  }

  /**
   * Opens a streaming call: the same envelope and params checks as `handle`, then either the
   * events or, when refused before the first one, an ordinary error response.
   */
  async open(body: unknown, ctx: RpcContext): Promise<OpenStream | RpcResponse> {
    let stream: AsyncIterable<StreamEvent> | undefined;
    const response = await this.handleOne(body, ctx, (events) => {
      stream = events;
    });
    if (stream) return { id: (body as { id?: RpcId }).id ?? null, events: stream, failure: (err) => this.errors.failure(err) };
    return response ?? this.invalid(null, 'Invalid Request: a stream needs an id');
  }

  /** Returns the response(s) to send, or undefined when everything was a notification. */
  async handle(body: unknown, ctx: RpcContext): Promise<RpcResponse | RpcResponse[] | undefined> {
    if (Array.isArray(body)) {
      if (this.options.maxBatch === 0) return this.invalid(null, 'Invalid Request: this endpoint takes one request per call, not a batch');
      if (body.length === 0) return this.invalid(null, 'Invalid Request: a batch must hold at least one request');
      if (body.length > this.options.maxBatch) {
        return this.invalid(null, `Invalid Request: a batch may hold at most ${this.options.maxBatch} requests`);
      }
      const responses = await Promise.all(body.map((call) => this.handleOne(call, ctx)));
      const sent = responses.filter((r): r is RpcResponse => r !== undefined);
      return sent.length ? sent : undefined;
    }
    return this.handleOne(body, ctx);
  }

  private async handleOne(call: unknown, ctx: RpcContext, opened?: (events: AsyncIterable<StreamEvent>) => void): Promise<RpcResponse | undefined> {
    if (call === null || typeof call !== 'object' || Array.isArray(call)) {
      return this.invalid(null, 'Invalid Request: expected a JSON-RPC request object');
    }
    const request = call as Record<string, unknown>;
    const hasId = Object.hasOwn(request, 'id');
    const id = request.id;
    if (hasId && !(typeof id === 'string' || typeof id === 'number' || id === null)) {
      return this.invalid(null, 'Invalid Request: id must be a string, a number or null');
    }
    const replyId = (hasId ? id : null) as RpcId;
    if (request.jsonrpc !== '2.0') return this.invalid(replyId, 'Invalid Request: jsonrpc must be "2.0"');
    if (typeof request.method !== 'string' || request.method === '') {
      return this.invalid(replyId, 'Invalid Request: method must be a non-empty string');
    }
    const params = request.params ?? {};
    if (opened && !hasId) return this.invalid(null, 'Invalid Request: a streaming call needs an id');
    const response = await this.dispatch(request.method, params, ctx, replyId, opened);
    return hasId ? response : undefined;
  }

  /** One call in its own server span: the root of the trace through every service it reaches. */
  private dispatch(
    name: string,
    params: unknown,
    ctx: RpcContext,
    id: RpcId,
    opened?: (events: AsyncIterable<StreamEvent>) => void,
  ): Promise<RpcResponse> {
    const known = this.options.methods.has(name) ? name : 'unknown';
    const attributes = { 'rpc.system': 'jsonrpc', 'rpc.method': known };
    return withSpan(`jsonrpc ${known}`, { kind: SpanKind.SERVER, attributes }, async (span) => {
      const response = await this.dispatchCall(name, params, ctx, id, opened);
      if (response.error) span?.setAttribute('rpc.jsonrpc.error_code', response.error.code);
      // A refusal is the caller's business; only the hub's own failure marks the span failed.
      if (response.error?.code === RpcCode.INTERNAL_ERROR) span?.setStatus({ code: SpanStatusCode.ERROR });
      return response;
    });
  }

  private async dispatchCall(
    name: string,
    params: unknown,
    ctx: RpcContext,
    id: RpcId,
    opened?: (events: AsyncIterable<StreamEvent>) => void,
  ): Promise<RpcResponse> {
    const started = process.hrtime.bigint();
    const method = this.options.methods.get(name);
    const label = `${this.options.metricPrefix ?? ''}${method ? name : 'unknown'}`;
    let response: RpcResponse;
    const refused = this.options.precheck?.(ctx);
    if (refused) {
      response = { jsonrpc: '2.0', id, error: refused };
    } else if (!method) {
      response = { jsonrpc: '2.0', id, error: this.errors.envelope(RpcCode.METHOD_NOT_FOUND, `Method not found: ${name}`) };
    } else if (params === null || typeof params !== 'object' || Array.isArray(params)) {
      response = {
        jsonrpc: '2.0',
        id,
        error: this.errors.envelope(RpcCode.INVALID_PARAMS, 'Invalid params: params must be an object', { field: 'params' }),
      };
    } else if (method.stream && !opened) {
      response = this.invalid(id, `Invalid Request: ${name} answers with a stream; send it alone, not in a batch`);
    } else {
      try {
        checkParams(params as Record<string, unknown>, this.options.maxDepth ?? DEFAULT_MAX_JSON_DEPTH);
        if (method.stream) {
          opened!(await method.stream(params as Record<string, unknown>, ctx));
          response = { jsonrpc: '2.0', id, result: null };
        } else {
          response = { jsonrpc: '2.0', id, result: await method.invoke(params as Record<string, unknown>, ctx) };
        }
      } catch (err) {
        const error = this.errors.failure(err);
        // Every internal error is logged here with its cause. One a service raised was logged there
        // too, but one raised on this side of the wire (a request the gRPC client could not
        // serialize, a transport failure, a bug of ours) is logged nowhere else.
        // A call the caller gave up on (its connection closed) was cancelled on purpose: nothing failed.
        if (error.code === RpcCode.INTERNAL_ERROR && ctx.signal?.aborted) this.options.log.debug({ method: name }, 'the caller went away before the answer');
        else if (error.code === RpcCode.INTERNAL_ERROR) this.options.log.error({ err, method: name }, 'method failed');
        response = { jsonrpc: '2.0', id, error };
      }
    }
    this.options.metrics.rpcRequests.inc({ method: label, code: String(response.error?.code ?? 0) });
    const waited = method !== undefined && !response.error && this.options.waits?.(name, params as Record<string, unknown>) === true;
    (waited ? this.options.metrics.rpcWaitDuration : this.options.metrics.rpcDuration).observe({ method: label }, Number(process.hrtime.bigint() - started) / 1e9);
    return response;
  }

  private invalid(id: RpcId, message: string): RpcResponse {
    return { jsonrpc: '2.0', id, error: this.errors.envelope(RpcCode.INVALID_REQUEST, message) };
  }
}

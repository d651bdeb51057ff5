import type { Logger, Metrics } from '@agenthub/runtime';
import type { OpenStream, RpcContext, RpcId, RpcMethod, RpcResponse, StreamEvent } from '../jsonrpc.js';
import { A2aCode, A2aError, envelopeError, toA2aRpcError } from './errors.js';

export interface A2aRpcHandlerOptions {
  methods: ReadonlyMap<string, RpcMethod>;
  log: Logger;
  metrics: Metrics;
}

/** `1.0`, or `1.0.x`: patch numbers take no part in negotiation (A2A §3.6). */
const SERVED_VERSION = /^1\.0(\.\d+)?$/;

/**
 * JSON-RPC 2.0 as A2A 1.0 binds it, for the strict per-agent endpoint: one request per body (A2A
 * defines no batches), `A2A-Version` negotiated before dispatch, and every error in A2A's code
 * table with its ErrorInfo detail. Like JsonRpcHandler it knows nothing of HTTP, and offers the
 * same four entry points so the Koa app mounts either the same way.
 */
export class A2aRpcHandler {
  constructor(private readonly options: A2aRpcHandlerOptions) {}

  parseError(): RpcResponse {
    return { jsonrpc: '2.0', id: null, error: envelopeError(A2aCode.PARSE_ERROR, 'Parse error: the body is not valid JSON') };
  }

  isStream(body: unknown): boolean {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) return false;
    const name = (body as Record<string, unknown>).method;
    return typeof name === 'string' && this.options.methods.get(name)?.stream !== undefined;
  }

  async open(body: unknown, ctx: RpcContext): Promise<OpenStream | RpcResponse> {
    let events: AsyncIterable<StreamEvent> | undefined;
    const response = await this.one(body, ctx, (opened) => (events = opened));
    if (events) return { id: (body as { id?: RpcId }).id ?? null, events };
    return response ?? { jsonrpc: '2.0', id: null, error: envelopeError(A2aCode.INVALID_REQUEST, 'Invalid Request: a stream needs an id') };
  }

  /** The response to send, or undefined for a notification. */
  async handle(body: unknown, ctx: RpcContext): Promise<RpcResponse | undefined> {
    if (Array.isArray(body)) return invalid(null, 'Invalid Request: A2A defines no batches; send one request per call');
    return this.one(body, ctx);
  }

  private async one(call: unknown, ctx: RpcContext, opened?: (events: AsyncIterable<StreamEvent>) => void): Promise<RpcResponse | undefined> {
    if (call === null || typeof call !== 'object' || Array.isArray(call)) return invalid(null, 'Invalid Request: expected a JSON-RPC request object');
    const request = call as Record<string, unknown>;
    const hasId = Object.hasOwn(request, 'id');
    const id = request.id;
    if (hasId && !(typeof id === 'string' || typeof id === 'number' || id === null)) return invalid(null, 'Invalid Request: id must be a string, a number or null');
    const replyId = (hasId ? id : null) as RpcId;
    if (request.jsonrpc !== '2.0') return invalid(replyId, 'Invalid Request: jsonrpc must be "2.0"');
    if (typeof request.method !== 'string' || request.method === '') return invalid(replyId, 'Invalid Request: method must be a non-empty string');
    if (opened && !hasId) return invalid(null, 'Invalid Request: a streaming call needs an id');
    const response = await this.dispatch(request.method, request.params ?? {}, ctx, replyId, opened);
    return hasId ? response : undefined;
  }

  private async dispatch(
    name: string,
    params: unknown,
    ctx: RpcContext,
    id: RpcId,
    opened?: (events: AsyncIterable<StreamEvent>) => void,
  ): Promise<RpcResponse> {
    const started = process.hrtime.bigint();
    const method = this.options.methods.get(name);
    let response: RpcResponse;
    if (ctx.a2aVersion === undefined || !SERVED_VERSION.test(ctx.a2aVersion.trim())) {
      response = { jsonrpc: '2.0', id, error: toA2aRpcError(A2aError.versionNotSupported(ctx.a2aVersion)) };
    } else if (!method) {
      response = { jsonrpc: '2.0', id, error: envelopeError(A2aCode.METHOD_NOT_FOUND, `Method not found: ${name}`) };
    } else if (params === null || typeof params !== 'object' || Array.isArray(params)) {
      response = { jsonrpc: '2.0', id, error: envelopeError(A2aCode.INVALID_PARAMS, 'Invalid params: params must be an object') };
    } else if (method.stream && !opened) {
      response = invalid(id, `Invalid Request: ${name} answers with a stream; open it as a stream`);
    } else {
      try {
        if (method.stream) {
          opened!(await method.stream(params as Record<string, unknown>, ctx));
          response = { jsonrpc: '2.0', id, result: null };
        } else {
          response = { jsonrpc: '2.0', id, result: await method.invoke(params as Record<string, unknown>, ctx) };
        }
      } catch (err) {
        response = { jsonrpc: '2.0', id, error: toA2aRpcError(err) };
        if (response.error!.code === A2aCode.INTERNAL_ERROR) this.options.log.error({ err, method: name }, 'a2a method failed');
      }
    }
    // Labelled apart from the interface's dialect, whose methods share these names.
    const label = method ? `a2a:${name}` : 'a2a:unknown';
    this.options.metrics.rpcRequests.inc({ method: label, code: String(response.error?.code ?? 0) });
    this.options.metrics.rpcDuration.observe({ method: label }, Number(process.hrtime.bigint() - started) / 1e9);
    return response;
  }
}

function invalid(id: RpcId, message: string): RpcResponse {
  return { jsonrpc: '2.0', id, error: envelopeError(A2aCode.INVALID_REQUEST, message) };
}

import { once } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { create, fromBinary, type DescMessage, type DescMethod, type MessageInitShape, type MessageShape } from '@bufbuild/protobuf';
import type { GenService, GenServiceMethods } from '@bufbuild/protobuf/codegenv2';
import { healthv1 } from '@agenthub/proto';
import { HubError, Reason } from '../errors.js';
import { deadlineExceeded } from '../abort.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import { SpanKind, TRACEPARENT, withRemoteParent, withSpan } from '../tracing.js';
import { groupShape, MAX_GROUPED_CALLS, twinRefusal, type GroupedCall, type GroupShape } from './groups.js';
import type { Principal } from './principal.js';
import { verifyCall, verifyGrouped, type InternalKey } from './signature.js';
import { errorDetail, toStatus } from './status.js';
import { serverCredentials, type GrpcTls } from './tls.js';
import { encodeMessage } from './wire.js';

/** What a handler knows about the call besides its request. */
export interface CallContext {
  /** The authenticated caller, when the gateway sent one. */
  readonly principal: Principal | undefined;
  /** When the caller stops waiting; pass it on to every call this one makes. */
  readonly deadline: Date | undefined;
  /** Aborted when the caller cancels or the deadline passes. */
  readonly signal: AbortSignal;
  /**
   * Aborted when the server begins shutting down: calls that wait (blocking sends, long polls,
   * streams) stop waiting and answer with what they have, so they end cleanly within the grace.
   */
  readonly drain?: AbortSignal;
  readonly log: Logger;
}

/** The agent a call acts for. */
export interface Caller {
  agentId: string;
  tenantId: string;
}

/** The calling agent; operators and anonymous calls are refused (UNAUTHENTICATED). */
export function callerOf(ctx: Pick<CallContext, 'principal'>): Caller {
  const principal = ctx.principal;
  if (principal?.kind !== 'agent') throw HubError.unauthenticated();
  return { agentId: principal.agentId, tenantId: principal.tenantId };
}

/** How long before the end of a shutdown's grace waiting calls are told to answer. */
const LAST_ANSWER_MS = 1_000;

/** What a waiting handler should stop on: its caller leaving, or the server draining. */
export function waitSignal(ctx: Pick<CallContext, 'signal' | 'drain'>): AbortSignal {
  return ctx.drain ? AbortSignal.any([ctx.signal, ctx.drain]) : ctx.signal;
}

/** A unary handler as called in-process: the server supplies the logger. */
export type LocalHandler = (request: unknown, call: Omit<CallContext, 'log'>) => Promise<unknown>;

type UnaryHandler<M extends DescMethod> = (
  request: MessageShape<M['input']>,
  ctx: CallContext,
) => Promise<MessageInitShape<M['output']>>;

type ServerStreamHandler<M extends DescMethod> = (
  request: MessageShape<M['input']>,
  ctx: CallContext,
) => AsyncIterable<MessageInitShape<M['output']>>;

/** One handler per RPC of the service; the compiler rejects a server that misses one. */
export type ServiceHandlers<S extends GenServiceMethods> = {
  [K in keyof S]: S[K] extends { methodKind: 'unary' }
    ? UnaryHandler<S[K] & DescMethod>
    : S[K] extends { methodKind: 'server_streaming' }
      ? ServerStreamHandler<S[K] & DescMethod>
      : never;
};

export interface GrpcServerOptions {
  log: Logger;
  metrics: Metrics;
  /**
   * Every call must be signed with this key (see signature.ts); only then is its principal
   * trusted. Health checks stay open: probes cannot sign, and they learn nothing.
   */
  internalKey: InternalKey;
  /** Serve over mutual TLS: clients must present a certificate signed by `tls.ca`. */
  tls?: GrpcTls;
  /** Largest message accepted, in bytes. */
  maxMessageBytes?: number;
  /**
   * A connection older than this (±10 % jitter) is told to go away (GOAWAY), so a client opens a
   * new one, re-resolving DNS first: replicas added by a scale-up get their share of the calls.
   * Calls already running on the old connection go on for `maxConnectionAgeGraceMs`.
   */
  maxConnectionAgeMs?: number;
  maxConnectionAgeGraceMs?: number;
}

/** GRPC_MAX_CONNECTION_AGE_MS's default: clients spread over new replicas within about 5 minutes. */
export const DEFAULT_MAX_CONNECTION_AGE_MS = 5 * 60_000;
/**
 * GRPC_MAX_CONNECTION_AGE_GRACE_MS's default: longer than any call the gateway makes (it ends SSE
 * streams at 30 minutes, and the client resumes them), so connection ageing never cuts a call.
 */
export const DEFAULT_MAX_CONNECTION_AGE_GRACE_MS = 31 * 60_000;

/**
 * A grpc-js server whose services are described by protobuf-es descriptors. It answers the
 * standard `grpc.health.v1.Health` protocol for every service added, and turns every error
 * that escapes a handler into a status carrying the hub's error detail.
 */
export class GrpcServer {
  private readonly server: grpc.Server;
  private readonly health = new Map<string, boolean>([['', true]]);
  private readonly active = new Set<AbortController>();
  private readonly draining = new AbortController();
  private readonly local = new Map<string, LocalHandler>();

  constructor(private readonly options: GrpcServerOptions) {
    const max = options.maxMessageBytes ?? 8 * 1024 * 1024;
    this.server = new grpc.Server({
      'grpc.max_receive_message_length': max,
      'grpc.max_send_message_length': max,
      'grpc.max_connection_age_ms': options.maxConnectionAgeMs ?? DEFAULT_MAX_CONNECTION_AGE_MS,
      'grpc.max_connection_age_grace_ms': options.maxConnectionAgeGraceMs ?? DEFAULT_MAX_CONNECTION_AGE_GRACE_MS,
    });
    this.addHealth();
  }

  add<S extends GenServiceMethods>(service: GenService<S>, handlers: ServiceHandlers<S>): this {
    const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
    const implementation: grpc.UntypedServiceImplementation = {};
    for (const method of service.methods) {
      const handler = (handlers as Record<string, unknown>)[method.localName];
      if (typeof handler !== 'function') {
        throw new Error(`${service.typeName}.${method.name} has no handler`);
      }
      definition[method.localName] = methodDefinition(method);
      const refuse = twinRefusal(handler);
      const shape = refuse && service.methods.map((single) => groupShape(service, single)).find((found) => found?.twin === method);
      if (refuse && !shape) throw new Error(`${service.typeName}.${method.name} has a grouped handler but is no method's grouped twin`);
      implementation[method.localName] =
        method.methodKind === 'server_streaming'
          ? this.wrapServerStream(service.typeName, method, handler as ServerStreamHandler<DescMethod>)
          : this.wrapUnary(service.typeName, method, shape ? (request, ctx) => this.runGroup(shape, refuse!, request, ctx) : (handler as UnaryHandler<DescMethod>));
    }
    this.server.addService(definition, implementation);
    this.health.set(service.typeName, true);
    return this;
  }

  /** Binds and starts serving; returns the port (useful with port 0). */
  listen(address: string): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.bindAsync(address, serverCredentials(this.options.tls), (err, port) =>
        err ? reject(err) : resolve(port),
      );
    });
  }

  setServing(serving: boolean): void {
    for (const name of this.health.keys()) this.health.set(name, serving);
  }

  /** Stops taking calls, lets running ones finish for up to `graceMs`, then cancels the rest. */
  async shutdown(graceMs = 10_000): Promise<void> {
    this.setServing(false);
    // Waiting calls keep waiting through most of the grace (their answer may still come), then
    // get a last moment to answer with what they have before connections are cut.
    const answerMs = Math.min(LAST_ANSWER_MS, graceMs / 2);
    const drain = setTimeout(() => this.draining.abort(), graceMs - answerMs);
    drain.unref();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        for (const controller of this.active) controller.abort();
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      timer.unref();
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    clearTimeout(drain);
  }

  /** The call's context once its signature is checked (throws UNAUTHENTICATED otherwise). */
  private context(path: string, call: grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerWritableStream<unknown, unknown>, controller: AbortController): CallContext {
    let verified: ReturnType<typeof verifyCall>;
    try {
      verified = verifyCall(this.options.internalKey, call.metadata, path);
    } catch (err) {
      // Someone reached the port without the key, or the deployment's keys differ.
      this.options.log.warn({ rpc: path, peer: call.getPeer() }, 'internal call refused: bad or missing signature');
      throw err;
    }
    const { principal, expires } = verified;
    const deadline = call.getDeadline();
    const deadlineDate = deadline instanceof Date ? deadline : Number.isFinite(deadline) ? new Date(deadline) : undefined;
    return {
      principal,
      // The signed expiry bounds the call whatever timeout its sender asked for.
      deadline: deadlineDate && deadlineDate < expires ? deadlineDate : expires,
      signal: controller.signal,
      drain: this.draining.signal,
      log: this.options.log,
    };
  }

  /**
   * Runs one unary handler with metrics and failure logging, for a gRPC call and for an
   * in-process one alike. Resolves with the response message or rejects with a HubError.
   */
  private async runUnary(serviceName: string, method: DescMethod, handler: UnaryHandler<DescMethod>, request: unknown, ctx: CallContext): Promise<unknown> {
    const started = process.hrtime.bigint();
    let code = grpc.status.OK;
    const span = { kind: SpanKind.SERVER, attributes: { 'rpc.system': 'grpc', 'rpc.service': serviceName, 'rpc.method': method.name } };
    try {
      return await withSpan(`${serviceName}/${method.name}`, span, async () => create(method.output, (await handler(request as never, ctx)) as never));
    } catch (err) {
      const hubError = HubError.from(err);
      this.logFailure(serviceName, method, hubError);
      code = toStatus(hubError).code ?? grpc.status.UNKNOWN;
      if (hubError.reason === Reason.QUOTA_EXCEEDED) {
        // Who is held back by which quota, for whoever watches this service's metrics.
        this.options.metrics.limited(hubError.field, ctx.principal?.kind === 'agent' ? ctx.principal.tenantId : '');
      }
      throw hubError;
    } finally {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      this.options.metrics.grpcServerCalls.observe({ service: serviceName, method: method.name, code: grpc.status[code] }, seconds);
    }
  }

  /**
   * A grouped twin's call: each call of the group checked and run as the single method would run
   * it alone, all at once (a service batching its writes commits them together); one outcome
   * each, in order. A call that fails fails alone.
   */
  private async runGroup(shape: GroupShape, refuse: (request: never) => void, request: unknown, ctx: CallContext): Promise<MessageInitShape<DescMessage>> {
    const path = `/${shape.single.parent.typeName}/${shape.single.name}`;
    const calls = (request as Record<string, GroupedCall[]>)[shape.calls]!;
    if (calls.length > MAX_GROUPED_CALLS) throw HubError.invalidParams(shape.calls, `holds at most ${MAX_GROUPED_CALLS} calls`);
    const single = this.local.get(path)!;
    const outcomes = await Promise.all(
      calls.map(async (call) => {
        try {
          let verified: ReturnType<typeof verifyGrouped>;
          try {
            verified = verifyGrouped(this.options.internalKey, call.signature, path);
          } catch (err) {
            this.options.log.warn({ rpc: path }, 'grouped call refused: bad or missing signature');
            throw err;
          }
          if (!call.request) throw HubError.invalidParams(`${shape.calls}.request`, 'is required');
          refuse(call.request as never);
          const deadline = ctx.deadline && ctx.deadline < verified.expires ? ctx.deadline : verified.expires;
          const traceparent = call.signature.traceparent;
          const response = await withRemoteParent(traceparent ? { [TRACEPARENT]: traceparent } : undefined, () =>
            single(call.request, { principal: verified.principal, deadline, signal: ctx.signal }),
          );
          return { [shape.oneof]: { case: shape.responseCase, value: response } };
        } catch (err) {
          return { [shape.oneof]: { case: shape.errorCase, value: errorDetail(HubError.from(err)) } };
        }
      }),
    );
    return { [shape.outcomes]: outcomes } as MessageInitShape<DescMessage>;
  }

  private wrapUnary(serviceName: string, method: DescMethod, handler: UnaryHandler<DescMethod>): grpc.handleUnaryCall<unknown, unknown> {
    const path = `/${serviceName}/${method.name}`;
    this.local.set(path, (request, call) =>
      this.runUnary(serviceName, method, handler, request, { ...call, drain: this.draining.signal, log: this.options.log }),
    );
    return (call, callback) => {
      const controller = new AbortController();
      this.active.add(controller);
      let finished = false;
      // grpc-js also reports 'cancelled' after a call completes; only a live call is aborted.
      call.on('cancelled', () => {
        if (!finished) controller.abort();
      });
      const done = (err: grpc.ServiceError | null, response?: unknown) => {
        finished = true;
        this.active.delete(controller);
        callback(err, response);
      };
      let ctx: CallContext;
      try {
        ctx = this.context(path, call, controller);
      } catch (err) {
        done(toStatus(HubError.from(err)) as grpc.ServiceError);
        return;
      }
      const expiry = abortAtDeadline(controller, ctx.deadline);
      withRemoteParent(traceCarrier(call.metadata), () => this.runUnary(serviceName, method, handler, call.request, ctx))
        .finally(() => clearTimeout(expiry))
        .then(
          (response) => done(null, response),
          (err: HubError) => done(toStatus(err) as grpc.ServiceError),
        );
    };
  }

  /**
   * The handler of a unary method of this server, for callers in the same process (see
   * LocalTransport): the same handler, metrics and error handling, without the network.
   */
  localHandler(path: string): LocalHandler | undefined {
    return this.local.get(path);
  }

  private wrapServerStream(serviceName: string, method: DescMethod, handler: ServerStreamHandler<DescMethod>): grpc.handleServerStreamingCall<unknown, unknown> {
    const path = `/${serviceName}/${method.name}`;
    const span = { kind: SpanKind.SERVER, attributes: { 'rpc.system': 'grpc', 'rpc.service': serviceName, 'rpc.method': method.name } };
    const serve = async (call: grpc.ServerWritableStream<unknown, unknown>) => {
      const controller = new AbortController();
      this.active.add(controller);
      call.on('cancelled', () => controller.abort());
      let expiry: NodeJS.Timeout | undefined;
      try {
        const ctx = this.context(path, call, controller);
        expiry = abortAtDeadline(controller, ctx.deadline);
        for await (const item of handler(call.request as never, ctx)) {
          if (controller.signal.aborted) break;
          if (!call.write(create(method.output, item as never))) {
            // A stream cancelled while full never drains.
            await once(call, 'drain', { signal: controller.signal }).catch(() => undefined);
          }
        }
        call.end();
      } catch (err) {
        const hubError = HubError.from(err);
        this.logFailure(serviceName, method, hubError);
        // grpc-js sends an 'error' event as the stream's status; destroy() would drop it unsent.
        call.emit('error', Object.assign(new Error(hubError.message), toStatus(hubError)));
      } finally {
        clearTimeout(expiry);
        this.active.delete(controller);
      }
    };
    // The span lasts as long as the stream does.
    return (call) => withRemoteParent(traceCarrier(call.metadata), () => withSpan(path.slice(1), span, () => serve(call)));
  }

  private logFailure(serviceName: string, method: DescMethod, err: HubError): void {
    if (err.reason === Reason.INTERNAL) {
      this.options.log.error({ err: err.cause ?? err, rpc: `${serviceName}/${method.name}` }, 'rpc failed');
    } else {
      this.options.log.debug({ rpc: `${serviceName}/${method.name}`, reason: Reason[err.reason] }, 'rpc refused');
    }
  }

  private addHealth(): void {
    const method = healthv1.Health.method.check;
    this.server.addService(
      { check: methodDefinition(method) },
      {
        check: (call: grpc.ServerUnaryCall<healthv1.HealthCheckRequest, unknown>, callback: grpc.sendUnaryData<unknown>) => {
          const serving = this.health.get(call.request.service);
          const status =
            serving === undefined
              ? healthv1.HealthCheckResponse_ServingStatus.SERVICE_UNKNOWN
              : serving
                ? healthv1.HealthCheckResponse_ServingStatus.SERVING
                : healthv1.HealthCheckResponse_ServingStatus.NOT_SERVING;
          callback(null, create(healthv1.HealthCheckResponseSchema, { status }));
        },
      },
    );
  }
}

/**
 * Aborts the call's signal with DEADLINE_EXCEEDED when its deadline passes, so every IO call
 * given the signal (queries, Redis commands, calls onward) stops with the caller.
 */
function abortAtDeadline(controller: AbortController, deadline: Date | undefined): NodeJS.Timeout | undefined {
  if (!deadline) return undefined;
  const ms = Math.min(Math.max(0, deadline.getTime() - Date.now()), 2 ** 31 - 1);
  return setTimeout(() => controller.abort(deadlineExceeded()), ms);
}

/** The caller's trace context from a call's metadata, for withRemoteParent. */
function traceCarrier(metadata: grpc.Metadata): Record<string, string> | undefined {
  const traceparent = metadata.get(TRACEPARENT)[0];
  return typeof traceparent === 'string' ? { [TRACEPARENT]: traceparent } : undefined;
}

/** The grpc-js method definition for a protobuf-es method descriptor. */
export function methodDefinition(method: DescMethod): grpc.MethodDefinition<unknown, unknown> {
  return {
    path: `/${method.parent.typeName}/${method.name}`,
    requestStream: method.methodKind === 'client_streaming' || method.methodKind === 'bidi_streaming',
    responseStream: method.methodKind === 'server_streaming' || method.methodKind === 'bidi_streaming',
    requestSerialize: (message) => encodeMessage(method.input, message as never),
    requestDeserialize: (bytes) => fromBinary(method.input, bytes),
    responseSerialize: (message) => encodeMessage(method.output, message as never),
    responseDeserialize: (bytes) => fromBinary(method.output, bytes),
    originalName: method.localName,
  };
}

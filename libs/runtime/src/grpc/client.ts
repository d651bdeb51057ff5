import { isIP } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { create, type DescMethod, type MessageInitShape, type MessageShape } from '@bufbuild/protobuf';
import type { GenService, GenServiceMethods } from '@bufbuild/protobuf/codegenv2';
import { MethodOptions_IdempotencyLevel } from '@bufbuild/protobuf/wkt';
import { ConfigError } from '../config.js';
import { HubError, Reason } from '../errors.js';
import { deadlineExceeded } from '../abort.js';
import type { Metrics } from '../metrics.js';
import { currentTraceparent, SpanKind, TRACEPARENT, withSpan } from '../tracing.js';
import { CallGroups, groupShape, type GroupedOutcome } from './groups.js';
import type { Principal } from './principal.js';
import type { LocalTransport } from './local.js';
import { methodDefinition, type CallContext, type LocalHandler } from './server.js';
import { signCall, signGrouped, type InternalKey } from './signature.js';
import { fromStatus } from './status.js';
import { channelCredentials, type GrpcTls } from './tls.js';

export interface CallOptions {
  /** The principal to act for. Taken from `parent` when absent. */
  principal?: Principal;
  /** The incoming call this one serves: its principal and deadline carry over. */
  parent?: CallContext;
  /** Overrides the client's default timeout for this call. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /**
   * May travel with other calls of this method in one call of its grouped twin (groups.ts), when
   * the service declares one and calls are already on the wire; for calls that answer at once.
   */
  grouped?: boolean;
}

type UnaryMethod<M extends DescMethod> = (
  request: MessageInitShape<M['input']>,
  options?: CallOptions,
) => Promise<MessageShape<M['output']>>;

type ServerStreamMethod<M extends DescMethod> = (
  request: MessageInitShape<M['input']>,
  options?: CallOptions,
) => AsyncIterable<MessageShape<M['output']>>;

/** A promise-returning client with one method per RPC, named by the RPC's local name. */
export type Client<S extends GenServiceMethods> = {
  [K in keyof S]: S[K] extends { methodKind: 'unary' }
    ? UnaryMethod<S[K] & DescMethod>
    : S[K] extends { methodKind: 'server_streaming' }
      ? ServerStreamMethod<S[K] & DescMethod>
      : never;
};

export interface ClientOptions {
  metrics?: Metrics;
  /** Deadline for calls that set none and have no parent; every call gets one. */
  defaultTimeoutMs: number;
  /** Signs every call over the network (the services refuse unsigned ones). */
  internalKey: InternalKey;
  /** Mutual TLS to the service, when the deployment uses it. */
  tls?: GrpcTls;
  maxMessageBytes?: number;
  /** Calls a server of this process directly when one is registered at `address`. */
  local?: LocalTransport;
}

/**
 * Builds a typed client for `service` at `address` (host:port). Every call carries a deadline
 * (the parent call's when it has one, else the default), the principal as metadata signed with
 * the internal key together with the method and the deadline, and fails
 * with a HubError reproducing the service's reason and message exactly.
 */
export function createClient<S extends GenServiceMethods>(
  service: GenService<S>,
  address: string,
  options: ClientOptions,
): Client<S> & { close(): void } {
  const max = options.maxMessageBytes ?? 8 * 1024 * 1024;
  const channel = new grpc.Client(channelTarget(address), channelCredentials(options.tls), {
    'grpc.max_receive_message_length': max,
    'grpc.max_send_message_length': max,
    'grpc.keepalive_time_ms': 30_000,
    // Spread calls over every address the target resolves to (a comma-separated list, or a DNS
    // name with several records such as a Kubernetes headless Service), not just the first.
    'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }], methodConfig: retryConfig(service) }),
  });
  const client: Record<string, unknown> = { close: () => channel.close() };

  const prepare = (callOptions: CallOptions = {}) => {
    const principal = callOptions.principal ?? callOptions.parent?.principal;
    const ownDeadline = Date.now() + (callOptions.timeoutMs ?? options.defaultTimeoutMs);
    const parentDeadline = callOptions.parent?.deadline?.getTime() ?? Infinity;
    const deadline = new Date(Math.min(ownDeadline, parentDeadline));
    const signal = callOptions.signal ?? callOptions.parent?.signal;
    // Read now: a call that waits for a group goes out from another call's context.
    const traceparent = currentTraceparent();
    return { deadline, signal, principal, traceparent };
  };
  // Built only for a call that goes over the network by itself: an in-process call and a call
  // carried by a group (which signs it in the group's request) have no metadata of their own.
  const metadataOf = (path: string, principal: Principal | undefined, deadline: Date, traceparent: string | undefined) => {
    const metadata = new grpc.Metadata();
    signCall(options.internalKey, metadata, path, principal, deadline);
    // Not covered by the signature, which is fine: a forged trace context grants nothing.
    if (traceparent) metadata.set(TRACEPARENT, traceparent);
    return metadata;
  };

  for (const method of service.methods) {
    const def = methodDefinition(method);
    const labels = { service: service.typeName, method: method.name };
    if (method.methodKind === 'unary') {
      const shape = groupShape(service, method);
      const groups = shape && new CallGroups(async (calls, deadline) => {
        const twin = client[shape.twin.localName] as UnaryMethod<DescMethod>;
        try {
          const response = (await twin({ [shape.calls]: calls } as never, { timeoutMs: Math.max(0, deadline.getTime() - Date.now()) })) as Record<string, unknown>;
          return response[shape.outcomes] as GroupedOutcome[];
        } catch (err) {
          if (err instanceof HubError && (err.cause as grpc.ServiceError | undefined)?.code === grpc.status.UNIMPLEMENTED) return undefined;
          throw err;
        }
      }, shape);
      const spanOptions = { kind: SpanKind.CLIENT, attributes: { 'rpc.system': 'grpc', 'rpc.service': service.typeName, 'rpc.method': method.name } };
      client[method.localName] = (request: unknown, callOptions?: CallOptions) =>
        withSpan(`${service.typeName}/${method.name}`, spanOptions, () => unary(request, callOptions));
      const unary = (request: unknown, callOptions?: CallOptions) => {
        const { deadline, signal, principal, traceparent } = prepare(callOptions);
        if (signal?.aborted) return Promise.reject(new HubError(Reason.UNAVAILABLE, 'The call was cancelled'));
        const started = process.hrtime.bigint();
        const local = options.local?.serverAt(address)?.localHandler(def.path);
        if (local) {
          return callLocal(local, create(method.input, request as never), principal, deadline, signal).finally(() =>
            options.metrics?.grpcClientCalls.observe({ ...labels, code: 'LOCAL' }, Number(process.hrtime.bigint() - started) / 1e9),
          );
        }
        const remote = () => new Promise<unknown>((resolve, reject) => {
          const call = channel.makeUnaryRequest(
            def.path,
            def.requestSerialize,
            def.responseDeserialize,
            create(method.input, request as never),
            metadataOf(def.path, principal, deadline, traceparent),
            { deadline },
            (err, response) => {
              signal?.removeEventListener('abort', cancel);
              options.metrics?.grpcClientCalls.observe(
                { ...labels, code: grpc.status[err ? err.code : grpc.status.OK] },
                Number(process.hrtime.bigint() - started) / 1e9,
              );
              if (err) reject(fromStatus(err));
              else resolve(response);
            },
          );
          const cancel = () => call.cancel();
          signal?.addEventListener('abort', cancel, { once: true });
        });
        if (!callOptions?.grouped || !groups) return remote();
        const grouped = () => ({
          request: create(method.input, request as never),
          signature: signGrouped(options.internalKey, def.path, principal, deadline, traceparent),
        });
        return groups.send(remote, grouped, deadline, signal);
      };
    } else if (method.methodKind === 'server_streaming') {
      client[method.localName] = (request: unknown, callOptions?: CallOptions) => {
        const { deadline, signal, principal, traceparent } = prepare(callOptions);
        return streamOf(channel, def, create(method.input, request as never), metadataOf(def.path, principal, deadline, traceparent), deadline, signal);
      };
    }
  }
  return client as Client<S> & { close(): void };
}

/**
 * Calls the proto declares free of side effects are tried again on UNAVAILABLE, within their
 * deadline. A grpc-js server ageing out a connection (GRPC_MAX_CONNECTION_AGE_MS) closes it right
 * after its GOAWAY, so it refuses a stream the client sent before the GOAWAY reached it; grpc-js
 * sends a refused stream once more on its own. Connections opened to every replica at once turn
 * over close together while the age is short, so that second try can meet the next refusal. The
 * later tries are spread over about a second (25, 100, 400, 500 ms apart, ±20 %) so that they
 * outlast a turnover, a replica's drain, and a machine too busy to read the GOAWAY at once. Calls
 * with effects are never repeated: the caller decides.
 */
function retryConfig(service: GenService<GenServiceMethods>) {
  const reads = service.methods.filter((method) => method.methodKind === 'unary' && method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS);
  if (!reads.length) return [];
  return [{
    name: reads.map((method) => ({ service: service.typeName, method: method.name })),
    retryPolicy: { maxAttempts: 5, initialBackoff: '0.025s', maxBackoff: '0.5s', backoffMultiplier: 4, retryableStatusCodes: ['UNAVAILABLE'] },
  }];
}

/**
 * The grpc-js target for an `*_ADDR` value: one `host:port` as is (resolved by DNS), or several
 * separated by commas as an `ipv4:`/`ipv6:` address list, balanced round-robin. A list takes IP
 * addresses only (`localhost` counts as 127.0.0.1); for names, use one name with several records.
 */
export function channelTarget(address: string): string {
  const parts = address.split(',').map((part) => part.trim()).filter(Boolean);
  if (parts.length <= 1) return parts[0] ?? address;
  const ipv4: string[] = [];
  const ipv6: string[] = [];
  for (const part of parts) {
    const colon = part.lastIndexOf(':');
    const host = colon > 0 ? part.slice(0, colon) : '';
    const port = part.slice(colon + 1);
    if (!host || !/^\d+$/.test(port)) throw new ConfigError(`Bad address in list "${address}": "${part}" is not host:port`);
    if (host === 'localhost' || isIP(host) === 4) ipv4.push(`${host === 'localhost' ? '127.0.0.1' : host}:${port}`);
    else if (host.startsWith('[') && host.endsWith(']') && isIP(host.slice(1, -1)) === 6) ipv6.push(`${host}:${port}`);
    else throw new ConfigError(`An address list takes IP addresses only, not "${part}" (use one DNS name with several records instead)`);
  }
  if (ipv4.length && ipv6.length) throw new ConfigError(`An address list cannot mix IPv4 and IPv6: "${address}"`);
  return ipv4.length ? `ipv4:${ipv4.join(',')}` : `ipv6:${ipv6.join(',')}`;
}

/** An in-process call with the same deadline and cancellation a gRPC call would have. */
async function callLocal(
  handler: LocalHandler,
  request: unknown,
  principal: Principal | undefined,
  deadline: Date,
  signal: AbortSignal | undefined,
): Promise<never> {
  const controller = new AbortController();
  const cancel = () => controller.abort();
  signal?.addEventListener('abort', cancel, { once: true });
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = deadlineExceeded();
      controller.abort(err);
      reject(err);
    }, Math.max(0, deadline.getTime() - Date.now()));
  });
  try {
    return (await Promise.race([handler(request, { principal, deadline, signal: controller.signal }), expired])) as never;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', cancel);
  }
}

async function* streamOf(
  channel: grpc.Client,
  def: grpc.MethodDefinition<unknown, unknown>,
  request: unknown,
  metadata: grpc.Metadata,
  deadline: Date,
  signal: AbortSignal | undefined,
): AsyncIterable<never> {
  const call = channel.makeServerStreamRequest(def.path, def.requestSerialize, def.responseDeserialize, request, metadata, { deadline });
  const cancel = () => call.cancel();
  signal?.addEventListener('abort', cancel, { once: true });
  try {
    for await (const message of call) yield message as never;
  } catch (err) {
    throw fromStatus(err as grpc.ServiceError);
  } finally {
    signal?.removeEventListener('abort', cancel);
    call.cancel();
  }
}

/** The client type of a generated service constant: `ClientOf<typeof IdentityService>`. */
export type ClientOf<T> = T extends GenService<infer S> ? Client<S> & { close(): void } : never;

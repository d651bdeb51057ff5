import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { GenService, GenServiceMethods } from '@bufbuild/protobuf/codegenv2';
import type Koa from 'koa';
import { healthv1, identityv1 } from '@agenthub/proto';
import { createClient, listenFailure, type GrpcTls, type InternalKey, type Kv, type LocalTransport, type Logger, type Metrics } from '@agenthub/runtime';
import { adminMethods } from './admin.js';
import { A2A_ERRORS, a2aMethods, agentCards, checkA2aVersion } from './a2a/index.js';
import { createApp, type Readiness } from './app.js';
import { Authenticator } from './auth.js';
import { serveMetrics } from './metrics-server.js';
import { AuthMemory } from './auth-memory.js';
import { protocolError, RpcCode } from './errors.js';
import { JsonRpcHandler, type RpcContext, type RpcMethod } from './jsonrpc.js';
import { Limits, type LimitsConfig } from './limits/index.js';
import { mcpEndpoint } from './mcp/index.js';
import { agentMethods } from './methods/index.js';
import { originOf, type ProxyTrust } from './origin.js';
import type { Clients } from './route.js';
import { UPSTREAMS, type UpstreamAddresses, type UpstreamName } from './upstreams.js';
import { a2aWaits, hubWaits } from './waits.js';

/** The service's settings from configuration; its main.ts and the all-in-one hub both use it. */
export { gatewayOptions } from './options.js';
/** The agent JSON-RPC methods, each a route to one upstream call; bad params are INVALID_PARAMS naming the field, before any call. */
export { agentMethods } from './methods/index.js';
/** The MCP tools the gateway offers, each the same route as its JSON-RPC method. */
export { TOOLS as MCP_TOOLS } from './mcp/index.js';
/** The operator methods, answered only with the admin token. */
export { adminMethods } from './admin.js';
/** The OpenRPC description of the agent and operator methods, from the schemas the routes check params with. */
export { openRpcDocument } from './openrpc.js';
/** JSON-RPC 2.0 over the routes: batches answered in request order, notifications unanswered, every failure a JSON-RPC error, never a crash. */
export { JsonRpcHandler, type RpcContext, type RpcResponse } from './jsonrpc.js';
/** The one mapping of HubError reasons to JSON-RPC codes on this wire. */
export { RpcCode, toRpcError } from './errors.js';
/** A route: params check, upstream call, result view. */
export type { Route, Clients } from './route.js';
/** Rate limits and waiting-call caps from configuration (HUB_RATE_*, HUB_MAX_WAITING_PER_AGENT). */
export { limitsConfig, type LimitsConfig } from './limits/index.js';
/** The services the gateway forwards to, by name, and their addresses. */
export { UPSTREAMS, type UpstreamName, type UpstreamAddresses } from './upstreams.js';

/** The A2A protocol versions the interface's endpoints accept; absent means 1.0. */
const SUPPORTED_A2A_VERSIONS = new Set(['1.0']);

export interface GatewayDeps {
  log: Logger;
  metrics: Metrics;
  kv: Kv;
  upstreams: UpstreamAddresses;
  adminToken: string;
  host: string;
  port: number;
  maxBodyBytes: number;
  maxBatch: number;
  /** How deep JSON-RPC params may nest. */
  maxJsonDepth?: number;
  /** HUB_PUBLIC_URL: the base of the links Agent Cards hand out. */
  publicUrl?: string;
  /**
   * HUB_TRUSTED_PROXIES: peers whose forwarded headers are believed: X-Forwarded-For for the
   * per-address limits, X-Forwarded-Proto/Host for Agent Card links when there is no publicUrl.
   */
  trustedProxies?: ProxyTrust;
  authCacheMs: number;
  grpcTimeoutMs: number;
  /** HUB_STREAM_MAX_MS: streams end cleanly after this long (the client resumes); 30 minutes when absent. */
  streamMaxMs?: number;
  /** Signs every call to the services. */
  internalKey: InternalKey;
  /** Mutual TLS to the services (split deployments that enable it). */
  tls?: GrpcTls;
  /**
   * Where to serve `/metrics` instead of the public port (split mode: OPS_HOST:OPS_PORT, which the
   * Ingress never routes to); absent, `/metrics` is served on the public port.
   */
  metricsListen?: { host: string; port: number };
  /** In-process calls to the services (HUB_TRANSPORT=inproc in the all-in-one mode). */
  local?: LocalTransport;
  /** Rate limits and caps (`limitsConfig`); absent, nothing is limited. */
  limits?: LimitsConfig;
  /** Level of the line logged per request (`info` in development, see requestLogLevel). */
  requestLogLevel?: 'info' | 'debug';
}

/** One info line per request in development (NODE_ENV unset), debug lines elsewhere. */
export function requestLogLevel(nodeEnv: string): 'info' | 'debug' {
  return nodeEnv === 'development' ? 'info' : 'debug';
}

export interface RunningGateway {
  /** Base URL, e.g. `http://127.0.0.1:8080`. */
  readonly url: string;
  readonly port: number;
  /** Where `/metrics` is served when it has its own port. */
  readonly metricsUrl: string | undefined;
  stop(graceMs?: number): Promise<void>;
}

/** The gateway before it listens: its Koa app, and how to close the clients and subscriptions behind it. */
export interface GatewayApp {
  readonly app: Koa;
  close(): Promise<void>;
}

/**
 * The gateway's app in front of the services of `UPSTREAMS`, serving nothing yet: startGateway
 * listens with its `callback()`, and tests call that directly, without a port. `/metrics` is
 * part of it unless `metricsListen` is set (startGateway serves it there).
 */
export async function createGateway(deps: Omit<GatewayDeps, 'host' | 'port'>): Promise<GatewayApp> {
  const clientOptions = { defaultTimeoutMs: deps.grpcTimeoutMs, metrics: deps.metrics, internalKey: deps.internalKey, tls: deps.tls, local: deps.local };
  const names = Object.keys(UPSTREAMS) as UpstreamName[];
  // Typed for the authenticator, and also the one identity channel the method tables use.
  const identity = createClient(identityv1.IdentityService, deps.upstreams.identity, clientOptions);
  const clients: Clients = new Map(
    names.map((name) => {
      const service: GenService<GenServiceMethods> = UPSTREAMS[name];
      const client = name === 'identity' ? identity : createClient(service, deps.upstreams[name], clientOptions);
      return [service.typeName, client as never];
    }),
  );
  const health = Object.fromEntries(
    names.map((name) => [name, createClient(healthv1.Health, deps.upstreams[name], { ...clientOptions, defaultTimeoutMs: 2_000 })]),
  );

  const checkVersion = (ctx: RpcContext) =>
    ctx.a2aVersion === undefined || SUPPORTED_A2A_VERSIONS.has(ctx.a2aVersion)
      ? undefined
      : protocolError(RpcCode.VERSION_NOT_SUPPORTED, `A2A version ${ctx.a2aVersion} is not supported; use 1.0`, {
          supported: [...SUPPORTED_A2A_VERSIONS],
        });

  if (deps.trustedProxies === 'any-peer') {
    deps.log.warn('HUB_RATE_TRUST_FORWARDED_FOR is deprecated: every peer is taken for a proxy; set HUB_TRUSTED_PROXIES to the proxies\' addresses instead');
  }
  const limits = deps.limits ? new Limits({ kv: deps.kv, identity, config: deps.limits, trustedProxies: deps.trustedProxies, metrics: deps.metrics, log: deps.log }) : undefined;
  // Keys in this process's memory too, revoked through Kv pub/sub (auth-memory.ts).
  const authMemory = deps.authCacheMs > 0 ? new AuthMemory(deps.kv, deps.authCacheMs) : undefined;
  // Without the subscription the memory is never trusted and the Kv answers, as before.
  await authMemory?.start().catch((err) => deps.log.warn({ err }, 'API keys are not kept in memory: could not subscribe to revocations'));
  const common = { maxBatch: deps.maxBatch, maxDepth: deps.maxJsonDepth, log: deps.log, metrics: deps.metrics };
  const methods = agentMethods(clients, { streamMaxMs: deps.streamMaxMs });
  const agentRpc = new JsonRpcHandler({ ...common, methods, precheck: checkVersion, waits: hubWaits });
  const authenticator = new Authenticator(identity, deps.kv, deps.authCacheMs, authMemory);
  const app = createApp({
    agentRpc,
    adminRpc: new JsonRpcHandler({ ...common, methods: new Map<string, RpcMethod>([...adminMethods(clients), ...(limits?.adminMethods() ?? [])]) }),
    a2aRpc: new JsonRpcHandler({
      ...common,
      methods: a2aMethods(clients, { streamMaxMs: deps.streamMaxMs }),
      maxBatch: 0,
      precheck: checkA2aVersion,
      errors: A2A_ERRORS,
      waits: a2aWaits,
      // The dialects share method names; the strict endpoint's are counted apart.
      metricPrefix: 'a2a:',
    }),
    agentCard: agentCards((request, options) => identity.getAgent(request, options)),
    origin: originOf({ publicUrl: deps.publicUrl, trustedProxies: deps.trustedProxies }),
    authenticator,
    mcp: mcpEndpoint({ rpc: agentRpc, methods, authenticator, limits, maxBodyBytes: deps.maxBodyBytes, log: deps.log }),
    adminToken: deps.adminToken,
    maxBodyBytes: deps.maxBodyBytes,
    readiness: () => readiness(health, deps.kv),
    metrics: deps.metrics,
    publicMetrics: !deps.metricsListen,
    log: deps.log,
    limits,
    requestLogLevel: deps.requestLogLevel,
  });
  return {
    app,
    async close() {
      await authMemory?.stop();
      for (const client of [...clients.values(), ...Object.values(health)]) (client as unknown as { close(): void }).close();
    },
  };
}

/** Starts the HTTP gateway in front of the services of `UPSTREAMS`. */
export async function startGateway(deps: GatewayDeps): Promise<RunningGateway> {
  const { app, close } = await createGateway(deps);
  const server: Server = createServer(app.callback());
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  let stopping = false;
  // While stopping, a connection is closed once its call is answered: kept alive, it would hold
  // server.close(), and so the process, until the grace ran out with nothing left in flight.
  server.on('request', (_req, res: ServerResponse) => {
    if (stopping) res.shouldKeepAlive = false;
    res.once('finish', () => {
      if (stopping) setImmediate(() => server.closeIdleConnections());
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(listenFailure(err, deps.host, deps.port, { host: 'HUB_HOST', port: 'HUB_PORT' })));
    server.listen(deps.port, deps.host, () => resolve());
  }).catch(async (err: unknown) => {
    await close();
    throw err;
  });
  const port = (server.address() as AddressInfo).port;
  const host = deps.host.includes(':') ? `[${deps.host}]` : deps.host;
  const metricsServer = deps.metricsListen
    ? await serveMetrics(deps.metrics, deps.metricsListen).catch(async (err: unknown) => {
        server.close();
        await close();
        throw err;
      })
    : undefined;
  return {
    url: `http://${host}:${port}`,
    port,
    metricsUrl: metricsServer?.url,
    async stop(graceMs = 5_000) {
      stopping = true;
      await metricsServer?.close();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => server.closeAllConnections(), graceMs);
        timer.unref();
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        server.closeIdleConnections();
      });
      await close();
    },
  };
}

async function readiness(
  upstreams: Record<string, { check(request: { service: string }): Promise<healthv1.HealthCheckResponse> }>,
  kv: Kv,
): Promise<Readiness> {
  const checks: Record<string, string> = {};
  await Promise.all([
    ...Object.entries(upstreams).map(async ([name, health]) => {
      try {
        const { status } = await health.check({ service: '' });
        checks[name] = healthv1.HealthCheckResponse_ServingStatus[status]?.toLowerCase() ?? 'unknown';
      } catch {
        checks[name] = 'unreachable';
      }
    }),
    kv.ping().then(
      () => (checks.kv = 'serving'),
      () => (checks.kv = 'unreachable'),
    ),
  ]);
  return { ready: Object.values(checks).every((c) => c === 'serving'), checks };
}

import Koa from 'koa';
import type { IncomingMessage } from 'node:http';
import { HubError, newId, Reason, withRemoteParent, type Logger, type Metrics, type Principal } from '@agenthub/runtime';
import { isOperator, type AgentCaller, type Authenticator } from './auth.js';
import { protocolError, RpcCode, toRpcError } from './errors.js';
import type { JsonRpcHandler, RpcContext, RpcId } from './jsonrpc.js';
import { writeSse } from './sse.js';
import { cardResponse, hubCard } from './a2a/index.js';
import type { Limits } from './limits/index.js';
import type { OriginOf } from './origin.js';
import type { McpEndpoint } from './mcp/index.js';

export interface Readiness {
  ready: boolean;
  checks: Record<string, string>;
}

export interface GatewayAppOptions {
  agentRpc: JsonRpcHandler;
  adminRpc: JsonRpcHandler;
  /** Strict A2A 1.0 on `/agents/{agentId}/a2a/v1`. */
  a2aRpc: JsonRpcHandler;
  /** An agent's Agent Card for `baseUrl`, or undefined when there is no such agent. */
  agentCard: (agentId: string, baseUrl: string, signal?: AbortSignal) => Promise<Record<string, unknown> | undefined>;
  /** Where the links of a card point: the configured public URL, else the request's. */
  origin: OriginOf;
  authenticator: Authenticator;
  adminToken: string;
  maxBodyBytes: number;
  readiness: () => Promise<Readiness>;
  metrics: Metrics;
  /** Whether `/metrics` is served here; false when it has a port of its own (split mode). */
  publicMetrics: boolean;
  log: Logger;
  /** Rate limits and caps; absent, nothing is limited. */
  limits?: Limits;
  /** Level of the one line logged per request: `info` in development, `debug` (the default) else. */
  requestLogLevel?: 'info' | 'debug';
  /** The MCP endpoint (`/mcp`), when served. */
  mcp?: McpEndpoint;
}

const AGENT_PATH = /^\/agents\/([^/]+)\/a2a$/;
const STRICT_A2A_PATH = /^\/agents\/([^/]+)\/a2a\/v1$/;
const AGENT_CARD_PATH = /^\/agents\/([^/]+)\/\.well-known\/agent-card\.json$/;
const HUB_CARD_PATH = '/.well-known/agent-card.json';

export class BodyTooLarge extends Error {}

/**
 * The HTTP face of the hub: JSON-RPC endpoints (`/a2a`, `/agents/{id}/a2a`, `/admin`) and the
 * operational ones (`/healthz`, `/readyz`, `/metrics`). JSON-RPC itself lives in JsonRpcHandler.
 */
export function createApp(options: GatewayAppOptions): Koa {
  const app = new Koa();
  app.silent = true;
  app.on('error', (err: unknown) => options.log.warn({ err }, 'http error'));

  app.use(async (ctx, next) => {
    const started = process.hrtime.bigint();
    const requestId = requestIdOf(ctx.get('X-Request-Id'));
    ctx.set('X-Request-Id', requestId);
    try {
      // A caller's traceparent makes each JSON-RPC call's span part of the caller's trace.
      await withRemoteParent(ctx.headers, next);
    } catch (err) {
      options.log.error({ err, path: ctx.path }, 'request failed');
      ctx.status = 500;
      ctx.body = { jsonrpc: '2.0', id: null, error: protocolError(RpcCode.INTERNAL_ERROR, 'Internal error') };
    }
    const routeLabel = ctx.path === '/a2a' || ctx.path === '/admin' || ctx.path.startsWith('/health') || ctx.path === '/readyz' || ctx.path === '/metrics'
      ? ctx.path
      : AGENT_PATH.test(ctx.path) ? '/agents/:id/a2a'
      : STRICT_A2A_PATH.test(ctx.path) ? '/agents/:id/a2a/v1'
      : AGENT_CARD_PATH.test(ctx.path) ? '/agents/:id/.well-known/agent-card.json'
      : ctx.path === HUB_CARD_PATH ? HUB_CARD_PATH : 'other';
    options.metrics.httpRequests.inc({ route: routeLabel, status: String(ctx.status) });
    const ms = Math.round(Number(process.hrtime.bigint() - started) / 1e5) / 10;
    const rpc = ctx.state.rpc ? ` ${ctx.state.rpc as string}` : '';
    const code = rpcCodeOf(ctx.body);
    options.log[options.requestLogLevel ?? 'debug'](
      { request_id: requestId },
      `${ctx.method} ${ctx.path.slice(0, 200)}${rpc} → ${ctx.status}${code ? ` ${code}` : ''} (${ms} ms)`,
    );
  });

  app.use(async (ctx) => {
    if (ctx.path === '/mcp' && options.mcp) {
      if (options.limits && ctx.method === 'POST' && !(await admitMcp(ctx, options.limits, options.authenticator))) return;
      // The MCP SDK's transport owns the response; Koa must not touch it.
      ctx.respond = false;
      await options.mcp(ctx.req, ctx.res);
      return;
    }
    const strictPath = STRICT_A2A_PATH.exec(ctx.path);
    const agentPath = AGENT_PATH.exec(ctx.path) ?? strictPath;
    const rpcPath = ctx.path === '/a2a' || ctx.path === '/admin' || agentPath;
    if (rpcPath && ctx.method !== 'POST') {
      ctx.set('Allow', 'POST');
      ctx.status = 405;
      ctx.body = { error: 'Use POST for JSON-RPC requests' };
      return;
    }
    if (ctx.method === 'GET' && ctx.path === '/healthz') {
      ctx.body = { status: 'ok' };
      return;
    }
    if (ctx.method === 'GET' && ctx.path === '/readyz') {
      const readiness = await options.readiness();
      ctx.status = readiness.ready ? 200 : 503;
      ctx.body = { status: readiness.ready ? 'ready' : 'not ready', checks: readiness.checks };
      return;
    }
    if (options.publicMetrics && ctx.method === 'GET' && ctx.path === '/metrics') {
      const { contentType, text } = await options.metrics.exposition();
      ctx.type = contentType;
      ctx.body = text;
      return;
    }
    const cardPath = AGENT_CARD_PATH.exec(ctx.path);
    if ((cardPath || ctx.path === HUB_CARD_PATH) && (ctx.method === 'GET' || ctx.method === 'HEAD')) {
      if (options.limits && !(options.limits.preAuth(ctx) && (await options.limits.card(ctx)))) return;
      const origin = options.origin({
        remoteAddress: ctx.req.socket.remoteAddress,
        encrypted: 'encrypted' in ctx.req.socket && ctx.req.socket.encrypted === true,
        header: (name) => ctx.get(name) || undefined,
      });
      if (!origin) {
        ctx.status = 400;
        ctx.body = { error: 'The Host header does not name a host' };
        return;
      }
      const agentId = cardPath ? pathSegment(cardPath[1]!) : undefined;
      const card = cardPath ? agentId != null && (await options.agentCard(agentId, origin.baseUrl, clientGone(ctx))) : hubCard(origin.baseUrl);
      if (!card) {
        ctx.status = 404;
        ctx.body = { error: 'Agent not found' };
        return;
      }
      const answer = cardResponse(card, ctx.get('If-None-Match') || undefined, origin.vary);
      ctx.set(answer.headers);
      ctx.status = answer.status;
      if (answer.body) ctx.body = answer.body;
      return;
    }
    // A path whose agent id is not valid percent-encoding names no agent: no route.
    const targetAgentId = agentPath ? pathSegment(agentPath[1]!) : undefined;
    if (!rpcPath || targetAgentId === null) {
      ctx.status = 404;
      ctx.body = { error: `No route for ${ctx.method} ${ctx.path}` };
      return;
    }

    if (options.limits && !options.limits.preAuth(ctx)) return;
    // Created before authentication, whose lookups (Kv cache, identity) stop when the client leaves.
    const signal = clientGone(ctx);
    let raw: Buffer;
    try {
      raw = await readBody(ctx.req, options.maxBodyBytes);
    } catch (err) {
      if (!(err instanceof BodyTooLarge)) throw err;
      ctx.status = 413;
      ctx.set('Connection', 'close');
      ctx.body = rpcError(null, RpcCode.INVALID_REQUEST, `Invalid Request: the body exceeds ${options.maxBodyBytes} bytes`);
      return;
    }
    let body: unknown;
    let parsed = true;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      parsed = false;
    }
    ctx.state.rpc = rpcLabel(body);

    const authorization = ctx.get('Authorization') || undefined;
    let principal: Principal;
    let caller: AgentCaller | undefined;
    if (ctx.path === '/admin') {
      if (!isOperator(authorization, options.adminToken)) {
        if (options.limits && (await options.limits.authFailed(ctx, body))) return;
        unauthorized(ctx, idOf(body), 'Operator token required');
        return;
      }
      principal = { kind: 'operator' };
    } else {
      try {
        caller = await options.authenticator.agent(authorization, signal);
        principal = caller.principal;
      } catch (err) {
        const hubError = HubError.from(err);
        if (hubError.reason === Reason.UNAUTHENTICATED) {
          if (options.limits && (await options.limits.authFailed(ctx, body))) return;
          unauthorized(ctx, idOf(body), 'Missing or invalid API key');
        } else {
          ctx.body = { jsonrpc: '2.0', id: idOf(body), error: toRpcError(hubError) };
        }
        return;
      }
    }

    if (options.limits && caller && !(await options.limits.admit(ctx, caller, body, Boolean(strictPath)))) return;
    const handler = ctx.path === '/admin' ? options.adminRpc : strictPath ? options.a2aRpc : options.agentRpc;
    if (!parsed) {
      ctx.body = handler.parseError();
      return;
    }
    const rpcContext: RpcContext = {
      principal,
      targetAgentId: targetAgentId ?? undefined,
      a2aVersion: ctx.get('A2A-Version') || undefined,
      signal,
      lastEventId: ctx.get('Last-Event-ID') || undefined,
      baseUrl: `${ctx.protocol}://${ctx.host}`,
    };
    if (handler.isStream(body)) {
      const opened = await handler.open(body, rpcContext);
      if ('events' in opened) {
        // The SSE writer owns the response from here; Koa must not touch it.
        ctx.respond = false;
        ctx.status = 200;
        const opening = process.hrtime.bigint();
        await writeSse(ctx.res, opened, signal, options.log);
        // A stream lasts as long as the task or the client: timed apart from ordinary calls.
        const label = `${strictPath ? 'a2a:' : ''}${ctx.state.rpc as string}`;
        options.metrics.rpcWaitDuration.observe({ method: label }, Number(process.hrtime.bigint() - opening) / 1e9);
        return;
      }
      ctx.body = opened;
      return;
    }
    const response = await handler.handle(body, rpcContext);
    if (response === undefined) {
      ctx.status = 204;
      return;
    }
    if (!Array.isArray(response) && response.error?.code === RpcCode.RATE_LIMITED) ctx.status = 429;
    ctx.body = response;
  });
  return app;
}

/**
 * The limits of `POST /a2a` for `POST /mcp`, whose every message is one agent call: the address
 * before any lookup, failed authentications, the key's and tenant's buckets. The endpoint itself
 * still answers a bad key (401); only a refusal is answered here.
 */
async function admitMcp(ctx: Koa.Context, limits: Limits, authenticator: Authenticator): Promise<boolean> {
  if (!limits.preAuth(ctx)) return false;
  let caller: AgentCaller;
  try {
    caller = await authenticator.agent(ctx.get('Authorization') || undefined, clientGone(ctx));
  } catch (err) {
    if (HubError.from(err).reason === Reason.UNAUTHENTICATED) return !(await limits.authFailed(ctx, undefined));
    return true;
  }
  return limits.admit(ctx, caller, undefined, false);
}

/**
 * Aborted when the client hangs up before its answer is written: the request's own 'close' has
 * fired once its body was read, the response's fires when the connection goes. Every call made
 * for the request (authentication, the RPC, its waits) stops then and claims nothing. Each of
 * those calls carries its own deadline besides.
 */
function clientGone(ctx: Koa.Context): AbortSignal {
  const abort = new AbortController();
  ctx.res.once('close', () => {
    if (!ctx.res.writableEnded) abort.abort();
  });
  return abort.signal;
}

function unauthorized(ctx: Koa.Context, id: RpcId, message: string): void {
  ctx.status = 401;
  ctx.set('WWW-Authenticate', 'Bearer');
  ctx.body = rpcError(id, RpcCode.UNAUTHENTICATED, `Unauthorized: ${message}`);
}

function rpcError(id: RpcId, code: number, message: string) {
  return { jsonrpc: '2.0', id, error: protocolError(code, message) };
}

/** A percent-encoded path segment, or null when its encoding is malformed (no route matches it). */
function pathSegment(raw: string): string | null {
  try {
    return decodeURIComponent(raw);
  } catch {
    return null;
  }
}

/** The id of a single request, so even a refused call can be matched by the caller. */
function idOf(body: unknown): RpcId {
  if (body && typeof body === 'object' && !Array.isArray(body)) {
    const id = (body as { id?: unknown }).id;
    if (typeof id === 'string' || typeof id === 'number') return id;
  }
  return null;
}

export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(new BodyTooLarge());
  // Stream events, not `for await`: its async iterator cost a small request more than the read.
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const settle = (err?: Error) => {
      req.off('data', onData).off('end', onEnd).off('error', settle).off('close', onClose);
      if (err) reject(err);
      else resolve(Buffer.concat(chunks, total));
    };
    const onData = (chunk: Buffer) => {
      total += chunk.length;
      if (total <= limit) return void chunks.push(chunk);
      settle(new BodyTooLarge());
      req.destroy();
    };
    const onEnd = () => settle();
    const onClose = () => settle(new Error('the client closed the connection before the request body ended'));
    req.on('data', onData).on('end', onEnd).on('error', settle).on('close', onClose);
  });
}

/** A caller's request id when it is a plain token (it reaches our logs), else a new one. */
function requestIdOf(header: string): string {
  return /^[\w.:-]{1,128}$/.test(header) ? header : newId('req');
}

/** What the request line names: the JSON-RPC method, or the size of a batch. */
function rpcLabel(body: unknown): string | undefined {
  if (Array.isArray(body)) return `batch(${body.length})`;
  const method = body && typeof body === 'object' ? (body as { method?: unknown }).method : undefined;
  if (typeof method !== 'string') return undefined;
  // The caller chose it; anything but a plain name could forge lines on a terminal.
  return /^[\w./:-]{1,100}$/.test(method) ? method : '(unnamed method)';
}

/** The JSON-RPC error code of a single response, for the request line. */
function rpcCodeOf(body: unknown): number | undefined {
  const error = body && typeof body === 'object' && !Array.isArray(body) ? (body as { error?: { code?: unknown } }).error : undefined;
  return typeof error?.code === 'number' ? error.code : undefined;
}

import { timingSafeEqual } from 'node:crypto';
import type { Server } from 'node:http';
import { createServer } from 'node:net';
import express, { type RequestHandler } from 'express';
import { AgentCard, Role, TaskState, type Message, type Part } from '@a2a-js/sdk';
import {
  AgentEvent,
  DefaultRequestHandler,
  InMemoryTaskStore,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
} from '@a2a-js/sdk/server';
import { jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';

/**
 * A real A2A 1.0 agent for tests: an `@a2a-js/sdk` JSON-RPC server (express, loopback) whose
 * executor behaves as asked.
 *
 * - `echo`: working (with a message), an artifact echoing the parts received, completed (with a message).
 * - `ask`: a new task waits for input (with a question); a continuation is echoed, then completed.
 * - `slow`: works until canceled.
 * - `message`: answers with a bare message, no task.
 * - `text-only`: like echo, but refuses (ContentTypeNotSupported) any part that is not text/plain.
 * - `oversized`: completes with an artifact holding a 600 KiB inline file (past the hub's 512 KiB).
 */
export type Behaviour = 'echo' | 'ask' | 'slow' | 'message' | 'text-only' | 'oversized';

export interface Received {
  messageId: string;
  /** The task id the message named (empty for a new task). */
  taskId: string;
  contextId: string;
  /** The agent's task the message went to. */
  agentTaskId: string;
  parts: Part[];
}

export interface EchoAgent {
  /** The JSON-RPC endpoint to register as the agent's endpoint_url. */
  readonly url: string;
  /** Messages the executor ran for, in order. */
  readonly received: Received[];
  /** Agent task ids it was asked to cancel. */
  readonly canceled: string[];
  /** The Authorization header of every request, as received ('' when absent). */
  readonly authorizations: string[];
  /** The W3C traceparent header of every request, as received ('' when absent). */
  readonly traceparents: string[];
  /** When set, a request without `Authorization: Bearer <this>` is refused with 401 before the SDK sees it. */
  pushSecret: string | undefined;
  /** Requests being answered now, and the most there were at once. */
  readonly load: { now: number; max: number };
  stop(): Promise<void>;
}

/**
 * Express middleware that lets only the hub in: the request must carry the agent's push secret
 * as `Authorization: Bearer <secret>`, compared in constant time. The one documented in
 * docs/security.md ("Push agents").
 */
export function requireHubSecret(secret: () => string | undefined): RequestHandler {
  return (req, res, next) => {
    const expected = secret();
    if (expected === undefined) return next();
    const presented = /^Bearer (.+)$/.exec(req.get('authorization') ?? '')?.[1] ?? '';
    const a = Buffer.from(presented);
    const b = Buffer.from(expected);
    if (a.length === b.length && timingSafeEqual(a, b)) return next();
    res.status(401).set('WWW-Authenticate', 'Bearer').json({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Unauthorized' } });
  };
}

/** A loopback port nothing listens on (yet): an agent that is down. */
export async function reservePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

const text = (value: string): Part => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' });

function agentMessage(ctx: RequestContext, said: string): Message {
  return {
    messageId: `${ctx.taskId}:${said}`,
    contextId: ctx.contextId,
    taskId: ctx.taskId,
    role: Role.ROLE_AGENT,
    parts: [text(said)],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

const status = (ctx: RequestContext, state: TaskState, message?: Message) =>
  AgentEvent.statusUpdate({
    taskId: ctx.taskId,
    contextId: ctx.contextId,
    status: { state, message, timestamp: new Date().toISOString() },
    metadata: undefined,
  });

const echoArtifact = (ctx: RequestContext) =>
  AgentEvent.artifactUpdate({
    taskId: ctx.taskId,
    contextId: ctx.contextId,
    artifact: { artifactId: `${ctx.userMessage.messageId}:echo`, name: 'echo', description: '', parts: ctx.userMessage.parts, metadata: undefined, extensions: [] },
    append: false,
    lastChunk: true,
    metadata: undefined,
  });

const oversizedArtifact = (ctx: RequestContext) =>
  AgentEvent.artifactUpdate({
    taskId: ctx.taskId,
    contextId: ctx.contextId,
    artifact: {
      artifactId: `${ctx.userMessage.messageId}:big`,
      name: 'big',
      description: '',
      parts: [{ content: { $case: 'raw', value: Buffer.alloc(600 * 1024) }, metadata: undefined, filename: 'big.bin', mediaType: 'application/octet-stream' }],
      metadata: undefined,
      extensions: [],
    },
    append: false,
    lastChunk: true,
    metadata: undefined,
  });

class Executor implements AgentExecutor {
  private readonly cancelRequested = new Set<string>();

  constructor(
    private readonly behaviour: Behaviour,
    private readonly agent: { received: Received[]; canceled: string[] },
  ) {}

  cancelTask = async (taskId: string): Promise<void> => {
    this.agent.canceled.push(taskId);
    this.cancelRequested.add(taskId);
  };

  async execute(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const m = ctx.userMessage;
    this.agent.received.push({ messageId: m.messageId, taskId: m.taskId, contextId: m.contextId, agentTaskId: ctx.taskId, parts: m.parts });
    if (this.behaviour === 'message') {
      bus.publish(AgentEvent.message({ ...agentMessage(ctx, 'Hello from a message'), taskId: '' }));
      bus.finished();
      return;
    }
    if (!ctx.task) {
      bus.publish(
        AgentEvent.task({
          id: ctx.taskId,
          contextId: ctx.contextId,
          status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
          artifacts: [],
          history: [m],
          metadata: undefined,
        }),
      );
    }
    if (this.behaviour === 'ask' && !ctx.task) {
      bus.publish(status(ctx, TaskState.TASK_STATE_INPUT_REQUIRED, agentMessage(ctx, 'Which format?')));
      bus.finished();
      return;
    }
    bus.publish(status(ctx, TaskState.TASK_STATE_WORKING, agentMessage(ctx, 'Working on it')));
    if (this.behaviour === 'slow') {
      while (!this.cancelRequested.has(ctx.taskId)) await new Promise((resolve) => setTimeout(resolve, 20));
      bus.publish(status(ctx, TaskState.TASK_STATE_CANCELED));
      bus.finished();
      return;
    }
    // A moment of work, so the hub sees the task working before it completes.
    await new Promise((resolve) => setTimeout(resolve, 50));
    bus.publish(this.behaviour === 'oversized' ? oversizedArtifact(ctx) : echoArtifact(ctx));
    bus.publish(status(ctx, TaskState.TASK_STATE_COMPLETED, agentMessage(ctx, 'Done')));
    bus.finished();
  }
}

/**
 * Starts an agent on `port` (default: a free one) of 127.0.0.1. `stallFirstMs` holds the answer
 * to the first request that long, as an agent that took a message but answered too late; `gate`
 * holds the first that many requests until all of them have arrived (one whose caller left
 * meanwhile does not count).
 */
export async function startEchoAgent(
  behaviour: Behaviour,
  options: { port?: number; stallFirstMs?: number; pushSecret?: string; gate?: number } = {},
): Promise<EchoAgent> {
  const app = express();
  const load = { now: 0, max: 0 };
  let gate = options.gate ?? 0;
  const held: (() => void)[] = [];
  app.use((_req, res, next) => {
    load.now += 1;
    load.max = Math.max(load.max, load.now);
    res.once('close', () => {
      load.now -= 1;
    });
    if (gate === 0) return next();
    // The first `gate` requests wait for each other: they get answers only if they came at once.
    // One whose caller gave up waiting no longer counts, so a later group can still open the gate
    // (the agent may come up between two calls the hub made at once: the first was refused).
    held.push(next);
    res.once('close', () => {
      const at = held.indexOf(next);
      if (at >= 0) held.splice(at, 1);
    });
    if (held.length === gate) {
      gate = 0;
      for (const go of held.splice(0)) go();
    }
  });
  let stall = options.stallFirstMs ?? 0;
  const authorizations: string[] = [];
  const traceparents: string[] = [];
  app.use((req, _res, next) => {
    authorizations.push(req.get('authorization') ?? '');
    traceparents.push(req.get('traceparent') ?? '');
    next();
  });
  app.use((_req, res, next) => {
    if (stall) {
      const ms = stall;
      const end = res.end.bind(res) as (...args: unknown[]) => typeof res;
      res.end = ((...args: unknown[]) => {
        setTimeout(() => end(...args), ms);
        return res;
      }) as typeof res.end;
      stall = 0;
    }
    next();
  });
  const server = await new Promise<Server>((resolve) => {
    const listening = app.listen(options.port ?? 0, '127.0.0.1', () => resolve(listening));
  });
  const { port } = server.address() as { port: number };
  const url = `http://127.0.0.1:${port}/a2a`;
  const card = AgentCard.fromJSON({
    name: `${behaviour} agent`,
    description: 'A test agent',
    version: '1.0.0',
    supportedInterfaces: [{ url, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
    capabilities: { streaming: false },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
  });
  const agent = { url, received: [] as Received[], canceled: [] as string[], authorizations, traceparents, pushSecret: options.pushSecret, load };
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Executor(behaviour, agent), undefined, undefined, undefined, undefined, undefined, {
    validateInputModes: behaviour === 'text-only',
  });
  app.use('/a2a', requireHubSecret(() => agent.pushSecret), jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  return Object.assign(agent, {
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}

import { identityv1 } from '@agenthub/proto';
import { createClient, GrpcServer, HubError, InternalKey, LocalTransport, Metrics, Reason, waitSignal, type CallContext, type GrpcTls } from '@agenthub/runtime';
import { testLogger } from '@agenthub/testing';

/** What the servers and clients of this file sign and check calls with, unless a test says otherwise. */
const internalKey = InternalKey.generate();

type Impl = Partial<Record<string, (request: any, ctx: CallContext) => Promise<unknown>>>;

/** A server for IdentityService whose handlers are the given ones; others answer UNAVAILABLE. */
async function serve(impl: Impl, options: { tls?: GrpcTls } = {}) {
  const handlers = new Proxy({}, {
    get: (_target, name: string) => impl[name] ?? (async () => { throw new HubError(Reason.UNAVAILABLE, 'not in this test'); }),
  });
  const server = new GrpcServer({ log: testLogger(), metrics: new Metrics(), internalKey, ...options });
  server.add(identityv1.IdentityService, handlers as never);
  const port = await server.listen('127.0.0.1:0');
  return { server, address: `127.0.0.1:${port}` };
}

async function failure(promise: Promise<unknown>): Promise<HubError> {
  try {
    await promise;
  } catch (err) {
    return err as HubError;
  }
  throw new Error('expected the call to fail');
}

describe('gRPC bridge', () => {
  const cleanup: (() => unknown)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
  });
  async function setup(impl: Impl, options: { timeoutMs?: number } = {}) {
    const { server, address } = await serve(impl);
    const client = createClient(identityv1.IdentityService, address, { defaultTimeoutMs: options.timeoutMs ?? 2000, internalKey });
    cleanup.push(() => server.shutdown(100), () => client.close());
    return { server, client };
  }

  it('carries request, response and the principal', async () => {
    let seen: CallContext['principal'];
    const { client } = await setup({
      getAgent: async (req, ctx) => {
        seen = ctx.principal;
        return { agent: { id: req.agentId, name: 'n', createdAt: 5n } };
      },
    });
    const response = await client.getAgent({ agentId: 'a1' }, { principal: { kind: 'agent', agentId: 'me', tenantId: 't' } });
    expect(response.agent).toMatchObject({ id: 'a1', name: 'n', createdAt: 5n });
    expect(seen).toEqual({ kind: 'agent', agentId: 'me', tenantId: 't' });
    await client.getAgent({ agentId: 'a1' }, { principal: { kind: 'operator' } });
    expect(seen).toEqual({ kind: 'operator' });
  });

  it('carries text of every UTF-8 width both ways, byte for byte, and a lone surrogate as U+FFFD', async () => {
    const texts = ['ascii', 'é ß ñ', 'ключ 键 キー', '🦀🧪 mixed ✓', 'x'.repeat(70_000) + '😀', `broken ${'\uD800'} pair`];
    const { client } = await setup({ getAgent: async (req) => ({ agent: { id: req.agentId, name: req.agentId } }) });
    for (const text of texts) {
      const { agent } = await client.getAgent({ agentId: text });
      expect(agent?.name).toBe(text.replace('\uD800', '\uFFFD'));
      expect(Buffer.byteLength(agent!.name)).toBe(Buffer.byteLength(text));
    }
  });

  it('reproduces a HubError exactly on the client side', async () => {
    const { client } = await setup({ getAgent: async () => { throw HubError.invalidParams('agent_id', 'must not be empty'); } });
    const err = await failure(client.getAgent({ agentId: '' }));
    expect(err).toBeInstanceOf(HubError);
    expect({ reason: err.reason, message: err.message, field: err.field }).toEqual({
      reason: Reason.INVALID_PARAMS, message: 'Invalid params: agent_id must not be empty', field: 'agent_id',
    });
  });

  it('turns unexpected failures, thrown or rejected, into INTERNAL without their text', async () => {
    const { client } = await setup({
      getAgent: async () => { throw new Error('connection string postgres://secret@db'); },
      listAgents: (() => { throw new Error('sync secret'); }) as never,
    });
    for (const call of [client.getAgent({ agentId: 'x' }), client.listAgents({})]) {
      const err = await failure(call);
      expect(err.reason).toBe(Reason.INTERNAL);
      expect(err.message).toBe('Internal error');
    }
  });

  it('gives every call a deadline and aborts the handler when it passes', async () => {
    let aborted!: () => void;
    const handlerAborted = new Promise<'aborted'>((resolve) => (aborted = () => resolve('aborted')));
    const { client } = await setup({
      getAgent: (_req, ctx) => new Promise((resolve) => {
        ctx.signal.addEventListener('abort', () => { aborted(); resolve({}); });
      }),
    }, { timeoutMs: 150 });
    const err = await failure(client.getAgent({ agentId: 'x' }));
    expect(err.reason).toBe(Reason.DEADLINE_EXCEEDED);
    // The handler hears the abort (bounded: a handler never aborted would hold the test forever).
    let timer: NodeJS.Timeout | undefined;
    const never = new Promise<'not aborted'>((resolve) => (timer = setTimeout(() => resolve('not aborted'), 5_000)));
    expect(await Promise.race([handlerAborted, never])).toBe('aborted');
    clearTimeout(timer);
  });

  it('passes the caller’s remaining deadline and principal on to nested calls', async () => {
    let innerDeadline: Date | undefined;
    let innerPrincipal: CallContext['principal'];
    const inner = await setup({
      checkGrant: async (_req, ctx) => {
        innerDeadline = ctx.deadline;
        innerPrincipal = ctx.principal;
        return { approved: true };
      },
    }, { timeoutMs: 60_000 });
    const outer = await setup({
      getAgent: async (_req, ctx) => {
        await inner.client.checkGrant({}, { parent: ctx });
        return {};
      },
    });
    const before = Date.now();
    await outer.client.getAgent({}, { principal: { kind: 'agent', agentId: 'a', tenantId: 't' }, timeoutMs: 1500 });
    expect(innerPrincipal).toEqual({ kind: 'agent', agentId: 'a', tenantId: 't' });
    expect(innerDeadline!.getTime()).toBeLessThanOrEqual(before + 1500 + 50);
  });

  it('on shutdown, a waiting call keeps waiting through the grace, then answers with what it has instead of being cut', async () => {
    let waited = 0;
    let reached!: () => void;
    const handlerReached = new Promise<void>((resolve) => (reached = resolve));
    const { server, client } = await setup(
      {
        // Waits like a blocking send: for news that never comes, until told to stop waiting.
        getAgent: async (req, ctx) => {
          const started = Date.now();
          reached();
          await new Promise<void>((resolve) => waitSignal(ctx).addEventListener('abort', () => resolve(), { once: true }));
          waited = Date.now() - started;
          return { agent: { id: req.agentId, name: 'as it stands' } };
        },
      },
      { timeoutMs: 10_000 },
    );
    const answer = client.getAgent({ agentId: 'a1' });
    // Shut down only once the call is in the handler (an explicit signal, not a sleep).
    await handlerReached;
    const stopped = server.shutdown(3000);
    expect((await answer).agent).toMatchObject({ id: 'a1', name: 'as it stands' });
    await stopped;
    // It was told to answer only near the end of the grace (3 s less the last second).
    expect(waited).toBeGreaterThanOrEqual(1900);
  });

  it('reports an unreachable service as UNAVAILABLE', async () => {
    const client = createClient(identityv1.IdentityService, '127.0.0.1:1', { defaultTimeoutMs: 1000, internalKey });
    cleanup.push(() => client.close());
    const err = await failure(client.getAgent({}));
    expect([Reason.UNAVAILABLE, Reason.DEADLINE_EXCEEDED]).toContain(err.reason);
  });

  it('tries a call the proto declares free of side effects again on UNAVAILABLE, never one with effects', async () => {
    const calls = { getAgent: 0, createAgent: 0, listAgents: 0 };
    const { client } = await setup({
      getAgent: async (req) => {
        if (++calls.getAgent < 3) throw new HubError(Reason.UNAVAILABLE, 'replica going away');
        return { agent: { id: req.agentId, name: 'n', createdAt: 1n } };
      },
      createAgent: async () => {
        calls.createAgent++;
        throw new HubError(Reason.UNAVAILABLE, 'replica going away');
      },
      listAgents: async () => {
        calls.listAgents++;
        throw new HubError(Reason.UNAVAILABLE, 'still down');
      },
    });
    expect((await client.getAgent({ agentId: 'a1' })).agent?.id).toBe('a1');
    expect(calls.getAgent).toBe(3);
    expect((await failure(client.createAgent({ tenantId: 't', name: 'n' }))).reason).toBe(Reason.UNAVAILABLE);
    expect(calls.createAgent).toBe(1);
    const exhausted = await failure(client.listAgents({}));
    expect({ reason: exhausted.reason, message: exhausted.message }).toEqual({ reason: Reason.UNAVAILABLE, message: 'still down' });
    expect(calls.listAgents).toBe(5);
  });

  it('tries a read again for as long as a replica takes to drain, not only for a moment', async () => {
    // A replica refusing reads for 300 ms: a restart's drain, or turnovers met by one try after
    // another on a busy machine. Tries spread over under 150 ms would all be refused.
    let firstCall: number | undefined;
    const { client } = await setup({
      getAgent: async (req) => {
        firstCall ??= Date.now();
        if (Date.now() - firstCall < 300) throw new HubError(Reason.UNAVAILABLE, 'draining');
        return { agent: { id: req.agentId, name: 'n', createdAt: 1n } };
      },
    });
    expect((await client.getAgent({ agentId: 'a1' })).agent?.id).toBe('a1');
  });

  it('loses no read while both replicas age out their connections', async () => {
    const replicas = await Promise.all([0, 1].map(async () => {
      const server = new GrpcServer({ log: testLogger(), metrics: new Metrics(), internalKey, maxConnectionAgeMs: 100 });
      server.add(identityv1.IdentityService, new Proxy({}, { get: () => async (req: { agentId: string }) => ({ agent: { id: req.agentId, name: 'n', createdAt: 1n } }) }) as never);
      const port = await server.listen('127.0.0.1:0');
      cleanup.push(() => server.shutdown(100));
      return `127.0.0.1:${port}`;
    }));
    const client = createClient(identityv1.IdentityService, replicas.join(','), { defaultTimeoutMs: 5000, internalKey });
    cleanup.push(() => client.close());
    const failures: string[] = [];
    let answered = 0;
    const until = Date.now() + 2000;
    await Promise.all(Array.from({ length: 4 }, async () => {
      while (Date.now() < until) {
        await client.getAgent({ agentId: 'a1' }).then(() => answered++, (err: HubError) => failures.push(err.message));
        await new Promise((resolve) => setImmediate(resolve));
      }
    }));
    expect(failures).toEqual([]);
    expect(answered).toBeGreaterThan(100);
  });

  it('refuses a server that misses a handler', () => {
    const server = new GrpcServer({ log: testLogger(), metrics: new Metrics(), internalKey });
    expect(() => server.add(identityv1.IdentityService, { getAgent: async () => ({}) } as never)).toThrow(/has no handler/);
  });
});

describe('LocalTransport', () => {
  it('calls a server of this process through its handlers, with principal, errors and deadline', async () => {
    const local = new LocalTransport();
    const { server, address } = await serve({
      getAgent: async (req, ctx) => ({ agent: { id: req.agentId, name: ctx.principal?.kind ?? 'none' } }),
      listAgents: async () => { throw HubError.accessDenied(); },
      checkGrant: (_req, ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve({}))),
    });
    local.register(address, server);
    const metrics = new Metrics();
    const client = createClient(identityv1.IdentityService, address, { defaultTimeoutMs: 150, local, metrics, internalKey });
    try {
      const { agent } = await client.getAgent({ agentId: 'a1' }, { principal: { kind: 'operator' } });
      expect(agent).toMatchObject({ id: 'a1', name: 'operator' });
      expect((await failure(client.listAgents({}))).message).toBe('Access denied');
      expect((await failure(client.checkGrant({}))).reason).toBe(Reason.DEADLINE_EXCEEDED);
      expect(await metrics.registry.getSingleMetricAsString('agenthub_grpc_client_handling_seconds')).toContain('code="LOCAL"');
    } finally {
      client.close();
      await server.shutdown(100);
    }
  });
});

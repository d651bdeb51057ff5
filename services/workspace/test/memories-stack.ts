import { startIdentity } from '@agenthub/identity';
import { identityv1, workspacev1 } from '@agenthub/proto';
import { createClient, InternalKey, Metrics, openDb, openKv, type Client, type Db, type Kv, type RunningService } from '@agenthub/runtime';
import { testLogger, type Backend } from '@agenthub/testing';
import { createHash } from 'node:crypto';
import { startWorkspace, type Embedder, type VectorStore } from '../src/index.js';
import { normalize } from '../src/embedder.js';
import { operator, type TestAgent } from './harness.js';

/** Identity and workspace services (with the given embedder) on one backend, for memory tests. */
export interface MemoryStack {
  identity: Client<typeof identityv1.IdentityService.method> & { close(): void };
  workspace: Client<typeof workspacev1.WorkspaceService.method> & { close(): void };
  /** The workspace service's database (its own schema), to look at outbox rows and vectors. */
  db: Db;
  agent(tenantId: string, name: string): Promise<TestAgent>;
  /** Another workspace service over the same database, with another embedder (re-embed tests). */
  restartWith(embedder: Embedder): Promise<Client<typeof workspacev1.WorkspaceService.method> & { close(): void }>;
  stop(): Promise<void>;
}

export async function startMemoryStack(backend: Backend, options: { embedder: Embedder; vectors?: (db: Db) => VectorStore }): Promise<MemoryStack> {
  const provisioned = await backend.provision();
  const opened: { db: Db[]; kv: Kv[]; services: RunningService[]; clients: { close(): void }[] } = { db: [], kv: [], services: [], clients: [] };
  const internalKey = InternalKey.generate();
  const deps = async (schema: string) => {
    const db = await openDb({ url: provisioned.databaseUrl, schema });
    const kv = await openKv({ url: provisioned.redisUrl, prefix: provisioned.redisPrefix });
    opened.db.push(db);
    opened.kv.push(kv);
    return { db, kv, log: testLogger(), metrics: new Metrics(), listen: '127.0.0.1:0', grpcTimeoutMs: 5000, internalKey };
  };
  const identityService = await startIdentity(await deps('identity'));
  opened.services.push(identityService);
  const workspaceDeps = await deps('workspace');
  const vectors = options.vectors?.(workspaceDeps.db);
  const start = async (embedder: Embedder) => {
    const service = await startWorkspace({ ...workspaceDeps, identityAddr: identityService.address, embedder, ...(vectors ? { vectors } : {}) });
    opened.services.push(service);
    const client = createClient(workspacev1.WorkspaceService, service.address, { defaultTimeoutMs: 20_000, internalKey });
    opened.clients.push(client);
    return client;
  };
  const workspace = await start(options.embedder);
  const identity = createClient(identityv1.IdentityService, identityService.address, { defaultTimeoutMs: 5000, internalKey });
  opened.clients.push(identity);
  return {
    identity,
    workspace,
    db: workspaceDeps.db,
    async agent(tenantId, name) {
      const { agent } = await identity.createAgent({ tenantId, name, createTenant: true }, operator);
      if (!agent) throw new Error('CreateAgent returned no agent');
      return { id: agent.id, tenantId, name, as: { principal: { kind: 'agent', agentId: agent.id, tenantId } } };
    },
    restartWith: start,
    async stop() {
      for (const client of opened.clients) client.close();
      for (const service of opened.services.reverse()) await service.stop(1000);
      await Promise.all([...opened.db.map((db) => db.close()), ...opened.kv.map((kv) => kv.close())]);
      await provisioned.dispose();
    },
  };
}

/**
 * A deterministic bag-of-words embedder: an in-memory implementation of our Embedder interface
 * for tests that need a second model or exact control of scores, not a stand-in for the real one.
 */
export class HashEmbedder implements Embedder {
  readonly dimensions: number;
  calls = 0;
  constructor(
    readonly modelId = 'test-hash-64',
    dimensions = 64,
  ) {
    this.dimensions = dimensions;
  }

  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    this.calls += 1;
    return texts.map((text) => {
      const v = new Float32Array(this.dimensions);
      for (const word of text.toLowerCase().match(/[a-z0-9]+/g) ?? []) {
        const h = createHash('sha256').update(word).digest();
        v[h[0]! % this.dimensions]! += 1;
      }
      return normalize(v);
    });
  }

  async close(): Promise<void> {}
}

/**
 * The workspace service: workspaces and their members, with the access rules every workspace
 * call (and other services, through ResolveAccess) relies on.
 */
import { identityv1, workspacev1 } from '@agenthub/proto';
import { clientOptions, createClient, serveGrpc, type RunningService, type ServiceDeps } from '@agenthub/runtime';
import type { Embedder } from './embedder.js';
import { createEmbedder, createVectorStore, describeMemoryBackends, type MemoryConfig } from './memories-backends.js';
import { createWorkspaceHandlers, quotaOverridesOf } from './server.js';
import { DEFAULT_WORKSPACE_QUOTAS, reportQuotaUsage } from './quotas.js';
import { WorkspaceStore } from './store.js';
import type { VectorStore } from './vectors.js';
import type { AfterDelete } from './workspaces.js';
import type { WorkspaceQuotas } from './quotas.js';

/** The service's settings from configuration; its main.ts and the all-in-one hub both use it. */
export { workspaceOptions } from './options.js';
/** The WorkspaceService handlers over a migrated database. */
export { createWorkspaceHandlers } from './server.js';
/** Told after a workspace's deletion commits; destroySecretsWith has the secrets service destroy its data key. */
export { destroySecretsWith, type AfterDelete } from './workspaces.js';
/** The identity calls the service makes (agents and grants). */
export type { IdentityClient } from './access.js';
/** The one place embedder and vector store are chosen: EMBEDDINGS_URL else the built-in model; QDRANT_URL else the embedded exact store. */
export { createEmbedder, createVectorStore, defaultEmbeddingThreads, type MemoryConfig } from './memories-backends.js';
/** Text to vectors, one fixed dimension per model. */
export type { Embedder } from './embedder.js';
/** The built-in Universal Sentence Encoder lite, in worker threads; concurrent calls share batches. */
export { UseLiteEmbedder, USE_LITE_MODEL_ID, USE_LITE_DIMENSIONS } from './embedder-use.js';
/** An OpenAI-compatible embeddings endpoint through the egress guard; a dimension change between answers is an error. */
export { OpenAiEmbedder, embeddingsEndpoint } from './embedder-openai.js';
/** What a vector store does: searches return hits best first, ties by id. */
export type { VectorStore, VectorPoint, VectorSearch, VectorHit, VectorFilter } from './vectors.js';
/** Exact k-NN over the workspace schema; every search sees every replica's committed writes. */
export { EmbeddedVectorStore } from './vectors-embedded.js';
/** Qdrant, one collection per model and dimension; one workspace never reaches another's points. */
export { QdrantVectorStore } from './vectors-qdrant.js';
/** Defaults and maximums of the memory methods, enforced for every gRPC caller (the gateway checks the same). */
export { MEMORY_LIMITS } from './memories-params.js';
export { workspaceQuotas, DEFAULT_WORKSPACE_QUOTAS, type WorkspaceQuotas } from './quotas.js';

export interface WorkspaceDeps extends ServiceDeps {
  /** `host:port` of the identity service, asked for agents and grants on every call that needs them. */
  identityAddr: string;
  /** Embedding and vector settings (EMBEDDINGS_*, QDRANT_*); absent means the embedded defaults. */
  memory?: MemoryConfig;
  /** An embedder to use instead of the configured one (tests share one); the caller closes it. */
  embedder?: Embedder;
  /** A vector store to use instead of the configured one. */
  vectors?: VectorStore;
  /** Told after a workspace's deletion commits (the secrets service destroys its data key). */
  afterDelete?: AfterDelete;
  /** HUB_QUOTA_* (`workspaceQuotas(config)`); absent, the defaults. */
  quotas?: WorkspaceQuotas;
}

/**
 * Migrates the `workspace` schema and serves WorkspaceService. Stopping it also closes its
 * identity client; the database and Kv it was given stay open.
 */
export async function startWorkspace(deps: WorkspaceDeps): Promise<RunningService> {
  // Chosen here, once: the built-in model and the embedded store unless configured otherwise.
  const embedder = deps.embedder ?? createEmbedder(deps.memory ?? {}, deps.log);
  const vectors = deps.vectors ?? createVectorStore(deps.memory ?? {}, deps.db, deps.log);
  const closeEmbedder = () => (deps.embedder ? Promise.resolve() : embedder.close());
  const identity = createClient(identityv1.IdentityService, deps.identityAddr, clientOptions(deps));
  const overrides = quotaOverridesOf(identity);
  try {
    const running = await serveGrpc(
      'workspace',
      deps,
      // Its events share their keys (workspace ids) with the secrets service's: see serveGrpc.
      { schema: 'workspace', migrations: new URL('../migrations/', import.meta.url), publishBeforeAnswer: true },
      (server, db) => server.add(workspacev1.WorkspaceService, createWorkspaceHandlers({ db, identity, embedder, vectors, afterDelete: deps.afterDelete, quotas: deps.quotas, overrides })),
    );
    deps.log.info(describeMemoryBackends(embedder, vectors), 'memory backends');
    const stopQueueGauge = deps.metrics.gauge('agenthub_embedder_queue_depth', 'Texts waiting for an embedding worker thread of the built-in model.', ['model'], async () =>
      embedder.queueDepth ? [{ labels: { model: embedder.modelId }, value: embedder.queueDepth() }] : [],
    );
    const stopQuotaGauges = reportQuotaUsage(deps.metrics, new WorkspaceStore(deps.db), deps.quotas ?? DEFAULT_WORKSPACE_QUOTAS, overrides);
    return {
      name: running.name,
      address: running.address,
      async stop(graceMs) {
        stopQueueGauge();
        stopQuotaGauges();
        await running.stop(graceMs);
        identity.close();
        await closeEmbedder();
      },
    };
  } catch (err) {
    identity.close();
    await closeEmbedder();
    throw err;
  }
}

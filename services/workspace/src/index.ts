/**
 * The workspace service: workspaces and their members, with the access rules every workspace
 * call (and other services, through ResolveAccess) relies on.
 */
import { identityv1, workspacev1 } from '@agenthub/proto';
import { clientOptions, createClient, serveGrpc, type RunningService, type ServiceDeps } from '@agenthub/runtime';
import type { Embedder } from './embedder.js';
import { createEmbedder, createVectorStore, describeMemoryBackends, type MemoryConfig } from './memories-backends.js';
import { createWorkspaceHandlers } from './server.js';
import type { VectorStore } from './vectors.js';
import type { AfterDelete } from './workspaces.js';
import type { WorkspaceQuotas } from './quotas.js';

export { createWorkspaceHandlers } from './server.js';
export { destroySecretsWith, type AfterDelete } from './workspaces.js';
export type { IdentityClient } from './access.js';
export { createEmbedder, createVectorStore, defaultEmbeddingThreads, type MemoryConfig } from './memories-backends.js';
export type { Embedder } from './embedder.js';
export { UseLiteEmbedder, USE_LITE_MODEL_ID, USE_LITE_DIMENSIONS } from './embedder-use.js';
export { OpenAiEmbedder, embeddingsEndpoint } from './embedder-openai.js';
export type { VectorStore, VectorPoint, VectorSearch, VectorHit, VectorFilter } from './vectors.js';
export { EmbeddedVectorStore } from './vectors-embedded.js';
export { QdrantVectorStore } from './vectors-qdrant.js';
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
  try {
    const running = await serveGrpc(
      'workspace',
      deps,
      { schema: 'workspace', migrations: new URL('../migrations/', import.meta.url) },
      (server) => server.add(workspacev1.WorkspaceService, createWorkspaceHandlers({ db: deps.db, identity, embedder, vectors, afterDelete: deps.afterDelete, quotas: deps.quotas })),
    );
    deps.log.info(describeMemoryBackends(embedder, vectors), 'memory backends');
    const stopQueueGauge = deps.metrics.gauge('agenthub_embedder_queue_depth', 'Texts waiting for an embedding worker thread of the built-in model.', ['model'], async () =>
      embedder.queueDepth ? [{ labels: { model: embedder.modelId }, value: embedder.queueDepth() }] : [],
    );
    return {
      name: running.name,
      address: running.address,
      async stop(graceMs) {
        stopQueueGauge();
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

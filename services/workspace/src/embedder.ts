import { HubError, Reason } from '@agenthub/runtime';

/**
 * Turns texts into vectors. Implementations: the built-in Universal Sentence Encoder lite
 * (`UseLiteEmbedder`, offline, worker threads) and any OpenAI-compatible `/v1/embeddings`
 * endpoint (`OpenAiEmbedder`). Which one runs is chosen once, by `createEmbedder`.
 */
export interface Embedder {
  /** Stored with every vector; vectors of different models are never compared. */
  readonly modelId: string;
  /** Length of every vector; undefined until a remote model has answered once. */
  readonly dimensions: number | undefined;
  /**
   * One L2-normalised vector per text, in order. Rejects with a HubError (UNAVAILABLE,
   * DEADLINE_EXCEEDED) when the model cannot answer; an aborted signal rejects at once.
   */
  embed(texts: readonly string[], signal?: AbortSignal): Promise<Float32Array[]>;
  /** Releases threads or connections; later calls fail. */
  close(): Promise<void>;
  /** Texts waiting for the model (a metric); absent where nothing queues inside the process. */
  queueDepth?(): number;
}

/** Scales `vector` in place to unit length (a zero vector stays zero) and returns it. */
export function normalize(vector: Float32Array): Float32Array {
  let sum = 0;
  for (let i = 0; i < vector.length; i++) sum += vector[i]! * vector[i]!;
  if (sum > 0) {
    const scale = 1 / Math.sqrt(sum);
    for (let i = 0; i < vector.length; i++) vector[i] = vector[i]! * scale;
  }
  return vector;
}

/** The error every embedder rejects with when its signal was aborted. */
export function abortedError(signal: AbortSignal): HubError {
  // A DOMException from AbortSignal.timeout; compared by name, as realms may differ.
  const timedOut = (signal.reason as { name?: unknown } | undefined)?.name === 'TimeoutError';
  return timedOut
    ? new HubError(Reason.DEADLINE_EXCEEDED, 'Embedding took too long and was abandoned')
    : new HubError(Reason.UNAVAILABLE, 'The call was cancelled before its text was embedded');
}

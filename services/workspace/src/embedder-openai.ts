import { HubError, Reason, type Logger } from '@agenthub/runtime';
import { abortedError, normalize, type Embedder } from './embedder.js';

export interface OpenAiEmbedderOptions {
  /**
   * The provider's base URL: `…/v1` (OpenAI, Ollama, vLLM, TEI) gets `/embeddings` appended, a
   * URL already ending in `/embeddings` is used as it is, and a bare origin gets `/v1/embeddings`.
   */
  url: string;
  model: string;
  /** Sent as `Authorization: Bearer …`; never logged. */
  apiKey?: string;
  timeoutMs: number;
  /** Texts per HTTP request. */
  maxBatch?: number;
  log?: Logger;
}

/** Where the embeddings requests go, from the configured base URL. */
export function embeddingsEndpoint(base: string): string {
  const url = new URL(base);
  const path = url.pathname.replace(/\/+$/, '');
  if (path.endsWith('/embeddings')) url.pathname = path;
  else if (path.endsWith('/v1')) url.pathname = `${path}/embeddings`;
  else url.pathname = `${path}/v1/embeddings`;
  return url.toString();
}

/**
 * An OpenAI-compatible `POST /v1/embeddings` provider (OpenAI, Ollama, vLLM, TEI, …). Vectors
 * are L2-normalised on arrival; the dimension is learned from the first answer and every later
 * answer must match it.
 */
export class OpenAiEmbedder implements Embedder {
  readonly modelId: string;
  private dims: number | undefined;
  private readonly endpoint: string;
  private readonly maxBatch: number;
  private closed = false;

  constructor(private readonly options: OpenAiEmbedderOptions) {
    this.modelId = options.model;
    this.endpoint = embeddingsEndpoint(options.url);
    this.maxBatch = Math.max(1, options.maxBatch ?? 64);
  }

  get dimensions(): number | undefined {
    return this.dims;
  }

  async embed(texts: readonly string[], signal?: AbortSignal): Promise<Float32Array[]> {
    if (this.closed) throw new HubError(Reason.UNAVAILABLE, 'The embedder is closed');
    if (signal?.aborted) throw abortedError(signal);
    const out: Float32Array[] = [];
    for (let start = 0; start < texts.length; start += this.maxBatch) {
      out.push(...(await this.request(texts.slice(start, start + this.maxBatch), signal)));
    }
    return out;
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  private async request(input: readonly string[], outer: AbortSignal | undefined): Promise<Float32Array[]> {
    const timeout = AbortSignal.timeout(this.options.timeoutMs);
    const signal = outer ? AbortSignal.any([outer, timeout]) : timeout;
    const headers: Record<string, string> = { 'Content-Type': 'application/json', Accept: 'application/json' };
    if (this.options.apiKey) headers.Authorization = `Bearer ${this.options.apiKey}`;
    let response: Response;
    let body: unknown;
    try {
      response = await fetch(this.endpoint, {
        method: 'POST',
        headers,
        body: JSON.stringify({ model: this.options.model, input, encoding_format: 'float' }),
        signal,
      });
      body = await response.json().catch(() => undefined);
    } catch (err) {
      if (signal.aborted) throw abortedError(signal);
      this.options.log?.warn({ endpoint: this.endpoint, err: (err as Error).message }, 'embedding provider unreachable');
      throw new HubError(Reason.UNAVAILABLE, 'The embedding provider is unreachable; retry later', { cause: err });
    }
    if (!response.ok) {
      this.options.log?.warn({ endpoint: this.endpoint, status: response.status }, 'embedding provider refused the request');
      throw new HubError(Reason.UNAVAILABLE, `The embedding provider answered HTTP ${response.status}; retry later`);
    }
    return this.parse(body, input.length);
  }

  private parse(body: unknown, count: number): Float32Array[] {
    const data = (body as { data?: unknown } | undefined)?.data;
    const bad = (why: string) => new HubError(Reason.UNAVAILABLE, `The embedding provider gave an unusable answer: ${why}`);
    if (!Array.isArray(data) || data.length !== count) throw bad(`expected ${count} embeddings`);
    const rows = data.map((entry: { index?: unknown; embedding?: unknown }, position) => ({
      index: typeof entry?.index === 'number' ? entry.index : position,
      embedding: entry?.embedding,
    }));
    rows.sort((a, b) => a.index - b.index);
    return rows.map(({ embedding }) => {
      if (!Array.isArray(embedding) || embedding.length === 0 || !embedding.every((x) => typeof x === 'number' && Number.isFinite(x))) {
        throw bad('an embedding is not a list of numbers');
      }
      this.dims ??= embedding.length;
      if (embedding.length !== this.dims) throw bad(`vectors of ${embedding.length} dimensions after ${this.dims}`);
      return normalize(Float32Array.from(embedding as number[]));
    });
  }
}

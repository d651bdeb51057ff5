import { EgressClient, EgressError, HubError, Reason, type EgressPolicy, type Logger } from '@agenthub/runtime';
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
  /** The egress guard's address policy (HUB_EGRESS_ALLOW_PRIVATE). */
  policy: EgressPolicy;
  /** Largest answer read, in bytes; default 64 MiB (a batch of 64 large vectors as JSON text). */
  maxResponseBytes?: number;
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
  private readonly egress: EgressClient;
  private closed = false;

  constructor(private readonly options: OpenAiEmbedderOptions) {
    this.modelId = options.model;
    this.endpoint = embeddingsEndpoint(options.url);
    this.maxBatch = Math.max(1, options.maxBatch ?? 64);
    this.egress = new EgressClient({
      policy: options.policy,
      timeoutMs: options.timeoutMs,
      maxResponseBytes: options.maxResponseBytes ?? 64 * 1024 * 1024,
      userAgent: 'AgentHub-Embeddings/1',
    });
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
    this.egress.close();
  }

  private async request(input: readonly string[], signal: AbortSignal | undefined): Promise<Float32Array[]> {
    const headers: Record<string, string> = { 'Content-Type': 'application/json', Accept: 'application/json' };
    if (this.options.apiKey) headers.Authorization = `Bearer ${this.options.apiKey}`;
    let status: number;
    let text: string;
    try {
      const answer = await this.egress.request(this.endpoint, {
        method: 'POST',
        headers,
        body: JSON.stringify({ model: this.options.model, input, encoding_format: 'float' }),
        signal,
      });
      status = answer.status;
      text = answer.body.toString('utf8');
    } catch (err) {
      if (signal?.aborted) throw abortedError(signal);
      if (!(err instanceof EgressError)) throw err;
      if (err.failure === 'timeout') throw new HubError(Reason.DEADLINE_EXCEEDED, 'Embedding took too long and was abandoned');
      // The guard's fixed text and the status only: never the provider's words.
      this.options.log?.warn({ endpoint: this.endpoint, failure: err.failure, status: err.status, reason: err.message }, 'embedding provider unreachable');
      throw new HubError(Reason.UNAVAILABLE, 'The embedding provider is unreachable; retry later', { cause: err });
    }
    if (status < 200 || status >= 300) {
      this.options.log?.warn({ endpoint: this.endpoint, status }, 'embedding provider refused the request');
      throw new HubError(Reason.UNAVAILABLE, `The embedding provider answered HTTP ${status}; retry later`);
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
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

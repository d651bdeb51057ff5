import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { ConfigError, egressPolicy, HubError, Reason } from '@agenthub/runtime';
import { answerAfter, backends } from '@agenthub/testing';
import { createEmbedder, defaultEmbeddingThreads, embeddingsEndpoint, OpenAiEmbedder, UseLiteEmbedder, USE_LITE_MODEL_ID } from '../src/index.js';
import { HashEmbedder, startMemoryStack } from './memories-stack.js';

const dot = (a: Float32Array, b: Float32Array) => a.reduce((sum, x, i) => sum + x * b[i]!, 0);
const norm = (a: Float32Array) => Math.sqrt(dot(a, a));

describe('UseLiteEmbedder (the built-in model, offline, in worker threads)', () => {
  // One model load for the whole file.
  const embedder = new UseLiteEmbedder({ threads: 1 });
  afterAll(() => embedder.close());

  test('embeds to 512 unit-length dimensions, the same text to the same vector', async () => {
    const [a, b, c] = await embedder.embed(['We chose Postgres for persistence.', 'We chose Postgres for persistence.', 'The cat sat on the mat.']);
    expect(embedder.modelId).toBe(USE_LITE_MODEL_ID);
    expect(a).toHaveLength(512);
    expect(norm(a!)).toBeCloseTo(1, 4);
    expect(dot(a!, b!)).toBeCloseTo(1, 4);
    expect(dot(a!, c!)).toBeLessThan(0.5);
  });

  test('ranks by meaning: a database question is closer to the Postgres decision than to lunch', async () => {
    const [q, postgres, lunch] = await embedder.embed(['what database do we use', 'We chose Postgres for persistence.', 'Lunch is served at noon in the cafeteria.']);
    expect(dot(q!, postgres!)).toBeGreaterThan(dot(q!, lunch!));
  });

  test('batches concurrent calls into fewer model calls, each caller getting its own vectors', async () => {
    const texts = Array.from({ length: 24 }, (_, i) => `Memory number ${i} is about topic ${i % 5}`);
    const before = { ...embedder.stats };
    const single = await Promise.all(texts.map((t) => embedder.embed([t])));
    const batches = embedder.stats.batches - before.batches;
    expect(embedder.stats.texts - before.texts).toBe(24);
    expect(batches).toBeLessThan(24);
    const together = await embedder.embed(texts);
    // Batching changes nothing about the result.
    single.forEach(([v], i) => expect(dot(v!, together[i]!)).toBeCloseTo(1, 3));
  });

  test('an aborted call rejects at once; an empty call needs no model', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(embedder.embed(['x'], controller.signal)).rejects.toMatchObject({ reason: Reason.UNAVAILABLE });
    const timeout = AbortSignal.timeout(0);
    await new Promise((r) => setTimeout(r, 5));
    await expect(embedder.embed(['x'], timeout)).rejects.toMatchObject({ reason: Reason.DEADLINE_EXCEEDED });
    await expect(embedder.embed([])).resolves.toEqual([]);
  });

  test('past its queue bound (EMBEDDINGS_MAX_QUEUE) it refuses at once with a retryable error, and serves what it took', async () => {
    const small = createEmbedder({ EMBEDDINGS_THREADS: 1, EMBEDDINGS_MAX_QUEUE: 2 });
    try {
      // The worker is still loading the model: both texts wait in the queue.
      const taken = small.embed(['first', 'second']);
      await expect(small.embed(['third'])).rejects.toMatchObject({ reason: Reason.RATE_LIMITED, retryAfterMs: 1_000 });
      expect(await taken).toHaveLength(2);
      await expect(small.embed(['third'])).resolves.toHaveLength(1);
    } finally {
      await small.close();
    }
  });

  // A CI run failed with "Backend 'wasm' has not yet been initialized": the weights became
  // tensors before the WebAssembly backend had compiled. The fixture's weights come at once.
  test('loads the model when its weights are ready before the TensorFlow backend', async () => {
    const late = new UseLiteEmbedder({ threads: 1, modelModule: fileURLToPath(new URL('./fixtures/late-backend-model.mjs', import.meta.url)) });
    try {
      const [vector] = await late.embed(['We chose Postgres for persistence.']);
      const [expected] = await embedder.embed(['We chose Postgres for persistence.']);
      expect(dot(vector!, expected!)).toBeCloseTo(1, 4);
    } finally {
      await late.close();
    }
  });

  test('a closed embedder refuses work', async () => {
    const closed = new UseLiteEmbedder({ threads: 1 });
    await closed.close();
    await expect(closed.embed(['x'])).rejects.toBeInstanceOf(HubError);
  });

  test('by default a thread per core, at most two: on two cores both embed', () => {
    expect([1, 2, 4, 64].map((cores) => defaultEmbeddingThreads(cores))).toEqual([1, 2, 2, 2]);
  });
});

/** A small OpenAI-compatible `/v1/embeddings` server: the one boundary we cannot reach here. */
async function startProvider(handler: (body: any, req: IncomingMessage) => { status?: number; body?: unknown; delayMs?: number }) {
  const requests: { body: any; authorization: string | undefined; path: string }[] = [];
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    requests.push({ body, authorization: req.headers.authorization, path: req.url ?? '' });
    const reply = handler(body, req);
    const answer = () => {
      res.writeHead(reply.status ?? 200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(reply.body ?? {}));
    };
    if (reply.delayMs) answerAfter(res, reply.delayMs, answer);
    else answer();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    stop: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

/** The providers here listen on loopback, which the egress guard refuses unless allowed. */
const loopbackAllowed = egressPolicy(true);

/** Three-dimensional vectors that spell each input's length, returned out of order. */
const lengths = (body: { input: string[] }) => ({
  body: {
    object: 'list',
    model: 'nomic-embed-text',
    data: body.input.map((text, index) => ({ object: 'embedding', index, embedding: [text.length, 1, 0] })).reverse(),
  },
});

describe('OpenAiEmbedder (an OpenAI-compatible /v1/embeddings provider)', () => {
  test('endpoint: /embeddings after …/v1, kept when given, /v1/embeddings after a bare origin', () => {
    expect(embeddingsEndpoint('http://127.0.0.1:11434/v1')).toBe('http://127.0.0.1:11434/v1/embeddings');
    expect(embeddingsEndpoint('https://api.openai.com/v1/')).toBe('https://api.openai.com/v1/embeddings');
    expect(embeddingsEndpoint('http://tei:8080/v1/embeddings')).toBe('http://tei:8080/v1/embeddings');
    expect(embeddingsEndpoint('http://vllm:8000')).toBe('http://vllm:8000/v1/embeddings');
  });

  test('posts model and input with the key, orders by index, normalises, learns the dimension', async () => {
    const provider = await startProvider(lengths);
    try {
      const embedder = new OpenAiEmbedder({ url: provider.url, model: 'nomic-embed-text', apiKey: 'sk-test-secret', timeoutMs: 5000, maxBatch: 2, policy: loopbackAllowed });
      expect(embedder.modelId).toBe('nomic-embed-text');
      expect(embedder.dimensions).toBeUndefined();
      const vectors = await embedder.embed(['a', 'bbb', 'cc']);
      expect(embedder.dimensions).toBe(3);
      // Two requests: the batch limit is 2.
      expect(provider.requests.map((r) => r.body.input)).toEqual([['a', 'bbb'], ['cc']]);
      expect(provider.requests[0]).toMatchObject({ path: '/v1/embeddings', authorization: 'Bearer sk-test-secret', body: { model: 'nomic-embed-text', encoding_format: 'float' } });
      expect(Array.from(vectors[1]!)).toEqual([3 / Math.sqrt(10), 1 / Math.sqrt(10), 0].map((x) => Math.fround(x)));
      vectors.forEach((v) => expect(norm(v)).toBeCloseTo(1, 5));
    } finally {
      await provider.stop();
    }
  });

  test('provider failures become UNAVAILABLE without the key; slowness becomes DEADLINE_EXCEEDED', async () => {
    const provider = await startProvider((body) =>
      body.input[0] === 'slow' ? { delayMs: 1500, ...lengths(body) } : body.input[0] === 'short' ? { body: { data: [] } } : { status: 401, body: { error: 'bad key sk-test-secret' } },
    );
    try {
      const embedder = new OpenAiEmbedder({ url: provider.url, model: 'm', apiKey: 'sk-test-secret', timeoutMs: 5000, policy: loopbackAllowed });
      const impatient = new OpenAiEmbedder({ url: provider.url, model: 'm', timeoutMs: 200, policy: loopbackAllowed });
      const refused = await embedder.embed(['x']).catch((e: HubError) => e);
      expect(refused).toMatchObject({ reason: Reason.UNAVAILABLE, message: 'The embedding provider answered HTTP 401; retry later' });
      expect(JSON.stringify({ message: (refused as HubError).message })).not.toContain('sk-test');
      await expect(embedder.embed(['short'])).rejects.toMatchObject({ reason: Reason.UNAVAILABLE, message: expect.stringContaining('expected 1 embeddings') });
      await expect(impatient.embed(['slow'])).rejects.toMatchObject({ reason: Reason.DEADLINE_EXCEEDED });
    } finally {
      await provider.stop();
    }
    const gone = new OpenAiEmbedder({ url: provider.url, model: 'm', timeoutMs: 1000, policy: loopbackAllowed });
    await expect(gone.embed(['x'])).rejects.toMatchObject({ reason: Reason.UNAVAILABLE, message: 'The embedding provider is unreachable; retry later' });
  });

  // Issue 12: the provider is called through the egress guard like every peer.
  test('the egress guard: a loopback provider is refused unless allowed, a redirect is not followed, an oversized answer is refused', async () => {
    const provider = await startProvider(lengths);
    const redirecting = createServer((_req, res) => {
      res.writeHead(307, { location: `${provider.url}/embeddings` }).end('{"data":[]}');
    });
    await new Promise<void>((resolve) => redirecting.listen(0, '127.0.0.1', resolve));
    try {
      const guarded = createEmbedder({ EMBEDDINGS_URL: provider.url, EMBEDDINGS_MODEL: 'm' });
      await expect(guarded.embed(['x'])).rejects.toMatchObject({ reason: Reason.UNAVAILABLE, message: 'The embedding provider is unreachable; retry later' });
      await guarded.close();
      expect(provider.requests).toEqual([]);

      const redirected = new OpenAiEmbedder({ url: `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}/v1`, model: 'm', timeoutMs: 5000, policy: loopbackAllowed });
      await expect(redirected.embed(['x'])).rejects.toMatchObject({ reason: Reason.UNAVAILABLE });
      expect(provider.requests).toEqual([]);

      const capped = new OpenAiEmbedder({ url: provider.url, model: 'm', timeoutMs: 5000, policy: loopbackAllowed, maxResponseBytes: 16 });
      await expect(capped.embed(['x'])).rejects.toMatchObject({ reason: Reason.UNAVAILABLE, message: 'The embedding provider is unreachable; retry later' });

      const allowed = createEmbedder({ EMBEDDINGS_URL: provider.url, EMBEDDINGS_MODEL: 'm', HUB_EGRESS_ALLOW_PRIVATE: true });
      await expect(allowed.embed(['x'])).resolves.toHaveLength(1);
      await allowed.close();
    } finally {
      await new Promise<void>((resolve) => { redirecting.closeAllConnections(); redirecting.close(() => resolve()); });
      await provider.stop();
    }
  });

  test('configuration picks the embedder: the built-in model by default, the provider when EMBEDDINGS_URL is set', async () => {
    const builtIn = createEmbedder({});
    expect(builtIn).toBeInstanceOf(UseLiteEmbedder);
    await builtIn.close();
    const remote = createEmbedder({ EMBEDDINGS_URL: 'http://127.0.0.1:1/v1', EMBEDDINGS_MODEL: 'bge-small', EMBEDDINGS_API_KEY: 'k' });
    expect(remote).toBeInstanceOf(OpenAiEmbedder);
    expect(remote.modelId).toBe('bge-small');
    expect(() => createEmbedder({ EMBEDDINGS_URL: 'http://127.0.0.1:1/v1' })).toThrow(ConfigError);
  });
});

test('the workspace service stores and finds memories through a configured provider', async () => {
  // The provider answers with bag-of-words vectors, so shared words are what matches.
  const words = new HashEmbedder('provider-side', 32);
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    const vectors = await words.embed(body.input);
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ data: vectors.map((v, index) => ({ index, embedding: Array.from(v) })) }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const embedder = createEmbedder({ EMBEDDINGS_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, EMBEDDINGS_MODEL: 'bow-32', HUB_EGRESS_ALLOW_PRIVATE: true });
  // The real PostgreSQL when there is one: it starts faster than two embedded databases.
  const stack = await startMemoryStack(backends().at(-1)!, { embedder });
  try {
    const agent = await stack.agent('acme', 'Provider user');
    const { workspace } = await stack.workspace.createWorkspace({ name: 'Provider' }, agent.as);
    const ws = workspace!.id;
    const { memory } = await stack.workspace.storeMemory({ workspaceId: ws, content: 'We chose Postgres for persistence.', type: 'decision', tags: [] }, agent.as);
    await stack.workspace.storeMemory({ workspaceId: ws, content: 'Lunch is at noon.', type: 'fact', tags: [] }, agent.as);
    const found = await stack.workspace.queryMemories({ workspaceId: ws, query: 'postgres persistence' }, agent.as);
    expect(found.model).toBe('bow-32');
    expect(found.memories[0]!.id).toBe(memory!.id);
    expect(embedder.dimensions).toBe(32);
  } finally {
    await stack.stop();
    await embedder.close();
    await new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
  }
});

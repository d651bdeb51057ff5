import { readFileSync } from 'node:fs';
import { loadConfig, migrate, openDb, type Db } from '@agenthub/runtime';
import { testLogger } from '@agenthub/testing';
import { createEmbedder, EmbeddedVectorStore, UseLiteEmbedder, type Embedder } from '../src/index.js';
import { documentText } from '../src/memories.js';

/**
 * Retrieval quality of the configured embedder (the built-in model unless EMBEDDINGS_URL is
 * set) on our own evaluation set, through the real search path: memories embedded as the
 * service embeds them, exact search in the embedded vector store.
 */
interface EvalSet {
  memories: { key: string; type: string; tags: string[]; content: string }[];
  queries: { kind: 'paraphrase' | 'lexical'; expect: string; query: string }[];
}
const evalSet: EvalSet = JSON.parse(readFileSync(new URL('./memories-eval.json', import.meta.url), 'utf8'));

const STOP = new Set(
  `a an the and or of to in on for with at by from is are was were be been being it its this that these those we our us you your i me my
   they them their he she his her what which who whom whose when where why how do does did can could should would will shall may might must
   not no as than then so if but about into over after before under there here all any each every some such only own same too very just also
   has have had get gets got go goes went look looks like much many long often quickly recently until year`.split(/\s+/),
);
/** Content words, lower-cased, with plural and verb endings dropped. */
function contentWords(text: string): Set<string> {
  const words = text.toLowerCase().match(/[a-z0-9]+/g) ?? [];
  return new Set(words.filter((w) => !STOP.has(w)).map((w) => w.replace(/(ies|es|s|ed|ing)$/, '')));
}

test('the evaluation set: ≥ 50 memories, ≥ 30 queries, at least half paraphrases sharing no content word', () => {
  expect(evalSet.memories.length).toBeGreaterThanOrEqual(50);
  expect(evalSet.queries.length).toBeGreaterThanOrEqual(30);
  const paraphrases = evalSet.queries.filter((q) => q.kind === 'paraphrase');
  expect(paraphrases.length * 2).toBeGreaterThanOrEqual(evalSet.queries.length);
  const byKey = new Map(evalSet.memories.map((m) => [m.key, m]));
  for (const q of evalSet.queries) {
    const memory = byKey.get(q.expect);
    expect(memory).toBeDefined();
    const shared = [...contentWords(q.query)].filter((w) => contentWords(memory!.content).has(w));
    if (q.kind === 'paraphrase') expect({ query: q.query, shared }).toEqual({ query: q.query, shared: [] });
    else expect(shared.length).toBeGreaterThan(0);
  }
});

describe('retrieval quality of the configured embedder', () => {
  let embedder: Embedder;
  let db: Db;

  beforeAll(async () => {
    const config = loadConfig(process.env);
    embedder = config.EMBEDDINGS_URL ? createEmbedder(config) : new UseLiteEmbedder({ threads: 1 });
    db = await openDb({ schema: 'workspace' });
    await migrate(db, { schema: 'workspace', dir: new URL('../migrations/', import.meta.url), log: testLogger() });
  });
  afterAll(async () => {
    await embedder?.close();
    await db?.close();
  });

  test('recall@1 and recall@3; the built-in model reaches recall@3 ≥ 0.8', async () => {
    const store = new EmbeddedVectorStore(db);
    const workspaceId = 'ws_eval';
    const vectors = await embedder.embed(evalSet.memories.map((m) => documentText(m.type, m.content)));
    await store.upsert(
      evalSet.memories.map((m, i) => ({ id: m.key, workspaceId, model: embedder.modelId, vector: vectors[i]!, type: m.type, tags: m.tags, createdAt: 0 })),
    );
    const queries = await embedder.embed(evalSet.queries.map((q) => q.query));
    const tally = { all: { n: 0, r1: 0, r3: 0 }, paraphrase: { n: 0, r1: 0, r3: 0 }, lexical: { n: 0, r1: 0, r3: 0 } };
    const misses: string[] = [];
    for (const [i, q] of evalSet.queries.entries()) {
      const hits = await store.search({ workspaceId, model: embedder.modelId, vector: queries[i]!, limit: 3, threshold: 0 });
      const rank = hits.findIndex((h) => h.id === q.expect);
      for (const t of [tally.all, tally[q.kind]]) {
        t.n += 1;
        if (rank === 0) t.r1 += 1;
        if (rank >= 0) t.r3 += 1;
      }
      if (rank !== 0) misses.push(`  ${q.kind} "${q.query}" → ${hits.map((h) => h.id).join(', ')} (want ${q.expect})`);
    }
    const rate = (t: { n: number; r1: number; r3: number }) => `recall@1 ${(t.r1 / t.n).toFixed(3)}, recall@3 ${(t.r3 / t.n).toFixed(3)} (${t.n} queries)`;
    console.log(
      [
        `[memories eval] ${embedder.modelId}: ${rate(tally.all)}`,
        `  paraphrases: ${rate(tally.paraphrase)}`,
        `  lexical:     ${rate(tally.lexical)}`,
        'not first:',
        ...misses,
      ].join('\n'),
    );
    if (embedder instanceof UseLiteEmbedder) expect(tally.all.r3 / tally.all.n).toBeGreaterThanOrEqual(0.8);
  });
});

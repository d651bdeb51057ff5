import { randomBytes } from 'node:crypto';
import { migrate, openDb, type Db } from '@agenthub/runtime';
import { backends, testLogger } from '@agenthub/testing';
import { EmbeddedVectorStore, QdrantVectorStore, type VectorPoint, type VectorStore } from '../src/index.js';
import { normalize } from '../src/embedder.js';

/**
 * One conformance suite for every VectorStore: the embedded exact store on each relational
 * backend, and Qdrant — at QDRANT_TEST_URL, or in a container started with testcontainers when a
 * container runtime exists; skipped, saying why, otherwise.
 */
interface Subject {
  name: string;
  /** A fresh store over the same data (another replica). */
  make(): VectorStore;
  db?: Db;
  teardown(): Promise<void>;
}

type SubjectFactory = { name: string; skip?: string; start: () => Promise<Subject> };

const migrations = new URL('../migrations/', import.meta.url);

const embeddedSubjects: SubjectFactory[] = backends().map((backend) => ({
  name: `embedded (${backend.name})`,
  async start() {
    const provisioned = await backend.provision();
    const db = await openDb({ url: provisioned.databaseUrl, schema: 'workspace' });
    await migrate(db, { schema: 'workspace', dir: migrations, log: testLogger() });
    return {
      name: `embedded (${backend.name})`,
      make: () => new EmbeddedVectorStore(db),
      db,
      async teardown() {
        await db.close();
        await provisioned.dispose();
      },
    };
  },
}));

async function qdrantSubject(): Promise<SubjectFactory> {
  const prefix = `agenthub_test_${randomBytes(4).toString('hex')}`;
  const subject = (url: string, stop: () => Promise<void>): Subject => {
    const make = () => new QdrantVectorStore({ url, collectionPrefix: prefix, exact: true });
    return {
      name: 'qdrant',
      make,
      async teardown() {
        await (make() as QdrantVectorStore).dropAll().catch(() => undefined);
        await stop();
      },
    };
  };
  const url = process.env.QDRANT_TEST_URL;
  if (url) return { name: 'qdrant', start: async () => subject(url, async () => undefined) };
  const { getContainerRuntimeClient, GenericContainer, Wait } = await import('testcontainers');
  try {
    await getContainerRuntimeClient();
  } catch (err) {
    return { name: 'qdrant', skip: `no container runtime (${(err as Error).message}) and QDRANT_TEST_URL is not set`, start: async () => { throw new Error('skipped'); } };
  }
  return {
    name: 'qdrant',
    async start() {
      const container = await new GenericContainer('qdrant/qdrant:v1.18.0')
        .withExposedPorts(6333)
        .withWaitStrategy(Wait.forHttp('/readyz', 6333))
        .start();
      return subject(`http://${container.getHost()}:${container.getMappedPort(6333)}`, async () => {
        await container.stop();
      });
    },
  };
}

const qdrant = await qdrantSubject();
if (qdrant.skip) console.warn(`[memories] Qdrant VectorStore conformance skipped: ${qdrant.skip}`);
const subjects = [...embeddedSubjects, qdrant];

const W1 = 'ws_conformance1';
const W2 = 'ws_conformance2';
const M = 'model-a';
const M2 = 'model-b';

/** A unit vector pointing mostly along axis `i` of 4, with a little of axis `j`. */
function v(i: number, j = (i + 1) % 4, mix = 0.1): Float32Array {
  const out = new Float32Array(4);
  out[i] = 1;
  out[j] = mix;
  return normalize(out);
}

function p(id: string, vector: Float32Array, extra: Partial<VectorPoint> = {}): VectorPoint {
  return { id, workspaceId: W1, model: M, vector, type: 'fact', tags: [], createdAt: 1000, ...extra };
}

describe.each(subjects.map((s) => [s.name, s] as const))('VectorStore conformance: %s', (_name, factory) => {
  const maybe = factory.skip ? test.skip : test;
  let subject: Subject;
  let store: VectorStore;
  let n = 0;
  // Each test gets its own workspaces, so tests never see each other's points.
  let w1: string;
  let w2: string;

  beforeAll(async () => {
    if (factory.skip) return;
    subject = await factory.start();
    store = subject.make();
  }, 120_000);
  afterAll(async () => {
    await subject?.teardown();
  });
  beforeEach(() => {
    n += 1;
    w1 = `${W1}x${n}`;
    w2 = `${W2}x${n}`;
  });
  const at = (ws: string, points: VectorPoint[]) => points.map((pt) => ({ ...pt, workspaceId: ws }));
  const search = (vector: Float32Array, extra: Record<string, unknown> = {}, s = store) =>
    s.search({ workspaceId: w1, model: M, vector, limit: 10, threshold: 0, ...extra });

  maybe('finds the nearest points first, with cosine scores in [0, 1], limit and threshold applied', async () => {
    await store.upsert(at(w1, [p('wmem_a', v(0)), p('wmem_b', v(1)), p('wmem_c', v(0, 1, 0.8)), p('wmem_opposite', normalize(new Float32Array([-1, 0, 0, 0])))]));
    const hits = await search(v(0, 1, 0.1));
    expect(hits.map((h) => h.id)).toEqual(['wmem_a', 'wmem_c', 'wmem_b', 'wmem_opposite']);
    expect(hits[0]!.score).toBeCloseTo(1, 4);
    for (const hit of hits) {
      expect(hit.score).toBeGreaterThanOrEqual(0);
      expect(hit.score).toBeLessThanOrEqual(1);
    }
    // A negative cosine scores 0.
    expect(hits[3]!.score).toBe(0);
    expect((await search(v(0), { limit: 2 })).map((h) => h.id)).toEqual(['wmem_a', 'wmem_c']);
    expect((await search(v(0), { threshold: 0.5 })).map((h) => h.id)).toEqual(['wmem_a', 'wmem_c']);
    expect(await search(v(0), { threshold: 1.01 })).toEqual([]);
  });

  maybe('never returns another workspace’s points, and deleting a workspace leaves the others', async () => {
    await store.upsert([...at(w1, [p('wmem_mine', v(2))]), ...at(w2, [p('wmem_theirs', v(2)), p('wmem_mine', v(2))])]);
    expect((await search(v(2))).map((h) => h.id)).toEqual(['wmem_mine']);
    await store.deleteWorkspace(w1);
    expect(await search(v(2))).toEqual([]);
    expect((await search(v(2), { workspaceId: w2 })).map((h) => h.id).sort()).toEqual(['wmem_mine', 'wmem_theirs']);
  });

  maybe('keeps models apart: a search compares vectors of its model only', async () => {
    await store.upsert(at(w1, [p('wmem_a', v(0)), p('wmem_b', v(1), { model: M2 }), p('wmem_a', v(3), { model: M2 })]));
    expect((await search(v(0))).map((h) => h.id)).toEqual(['wmem_a']);
    const other = await search(v(3), { model: M2 });
    expect(other.map((h) => h.id)).toEqual(['wmem_a', 'wmem_b']);
    expect(other[0]!.score).toBeCloseTo(1, 4);
    expect(await search(v(0), { model: 'model-unknown' })).toEqual([]);
    // A different dimension is a different model's world too.
    expect(await search(new Float32Array([1, 0, 0, 0, 0, 0]), { model: M })).toEqual([]);
  });

  maybe('filters by type, by tags (any or all) and by creation time', async () => {
    await store.upsert(
      at(w1, [
        p('wmem_1', v(0, 1, 0.1), { type: 'fact', tags: ['db', 'infra'], createdAt: 1000 }),
        p('wmem_2', v(0, 1, 0.2), { type: 'decision', tags: ['db'], createdAt: 2000 }),
        p('wmem_3', v(0, 1, 0.3), { type: 'todo', tags: ['infra'], createdAt: 3000 }),
        p('wmem_4', v(0, 1, 0.4), { type: 'fact', tags: [], createdAt: 4000 }),
      ]),
    );
    const ids = async (filter: Record<string, unknown>) => (await search(v(0), { filter })).map((h) => h.id);
    expect(await ids({ types: ['fact'] })).toEqual(['wmem_1', 'wmem_4']);
    expect(await ids({ types: ['decision', 'todo'] })).toEqual(['wmem_2', 'wmem_3']);
    expect(await ids({ tags: ['db', 'infra'] })).toEqual(['wmem_1', 'wmem_2', 'wmem_3']);
    expect(await ids({ tags: ['db', 'infra'], tagMatch: 'all' })).toEqual(['wmem_1']);
    expect(await ids({ createdAfter: 2000, createdBefore: 4000 })).toEqual(['wmem_2', 'wmem_3']);
    expect(await ids({ types: ['fact'], tags: ['infra'], createdAfter: 500 })).toEqual(['wmem_1']);
  });

  maybe('upsert replaces a point; setTags changes what tag filters see; delete removes under every model', async () => {
    await store.upsert(at(w1, [p('wmem_x', v(0)), p('wmem_y', v(1)), p('wmem_x', v(0), { model: M2 })]));
    await store.upsert(at(w1, [p('wmem_x', v(1), { tags: ['old'] })]));
    const hits = await search(v(1));
    expect(hits.map((h) => h.id)).toEqual(['wmem_x', 'wmem_y']);
    expect(hits[0]!.score).toBeCloseTo(1, 4);
    await store.setTags(w1, 'wmem_x', ['new']);
    expect((await search(v(1), { filter: { tags: ['old'] } })).map((h) => h.id)).toEqual([]);
    expect((await search(v(1), { filter: { tags: ['new'] } })).map((h) => h.id)).toEqual(['wmem_x']);
    await store.delete(w1, ['wmem_x', 'wmem_never']);
    expect((await search(v(1))).map((h) => h.id)).toEqual(['wmem_y']);
    expect(await search(v(0), { model: M2 })).toEqual([]);
  });

  maybe('deleteWorkspace can keep one model (a re-embed drops the others)', async () => {
    await store.upsert(at(w1, [p('wmem_a', v(0)), p('wmem_a', v(0), { model: M2 })]));
    await store.deleteWorkspace(w1, { keepModel: M2 });
    expect(await search(v(0))).toEqual([]);
    expect((await search(v(0), { model: M2 })).map((h) => h.id)).toEqual(['wmem_a']);
  });

  maybe('another replica sees every change at its next search', async () => {
    const replica = subject.make();
    await store.upsert(at(w1, [p('wmem_a', v(0)), p('wmem_b', v(1))]));
    expect((await search(v(0), {}, replica)).map((h) => h.id)).toEqual(['wmem_a', 'wmem_b']);
    await store.upsert(at(w1, [p('wmem_c', v(0, 1, 0.05))]));
    await store.setTags(w1, 'wmem_b', ['t']);
    expect((await search(v(0), {}, replica)).map((h) => h.id)).toEqual(['wmem_a', 'wmem_c', 'wmem_b']);
    expect((await search(v(0), { filter: { tags: ['t'] } }, replica)).map((h) => h.id)).toEqual(['wmem_b']);
    await store.delete(w1, ['wmem_a']);
    expect((await search(v(0), {}, replica)).map((h) => h.id)).toEqual(['wmem_c', 'wmem_b']);
    await store.deleteWorkspace(w1);
    expect(await search(v(0), {}, replica)).toEqual([]);
    await store.upsert(at(w1, [p('wmem_d', v(2))]));
    expect((await search(v(2), {}, replica)).map((h) => h.id)).toEqual(['wmem_d']);
  });

  maybe('handles many points and any dimension', async () => {
    // 100 points along a circle in the first two axes: the nearest to angle k is point k.
    const at2 = (angle: number, dims: number) => {
      const out = new Float32Array(dims);
      out[0] = Math.cos(angle);
      out[1] = Math.sin(angle);
      return out;
    };
    for (const dims of [8, 3]) {
      const model = `model-d${dims}`;
      await store.upsert(at(w1, Array.from({ length: 100 }, (_, k) => p(`wmem_${String(k).padStart(3, '0')}`, at2(k / 100, dims), { model }))));
      const hits = await search(at2(0.421, dims), { model, limit: 3 });
      expect(hits.map((h) => h.id)).toEqual(['wmem_042', 'wmem_043', 'wmem_041']);
    }
  });

  // Qdrant has no transactions (its store says transactional = false); the embedded store has them.
  const transactional = factory.name === 'qdrant' ? test.skip : maybe;
  transactional('a transactional store commits and rolls back with the transaction it is given', async () => {
    expect(store.transactional).toBe(true);
    const db = subject.db!;
    await db
      .transaction(async (tx) => {
        await store.upsert(at(w1, [p('wmem_rolled_back', v(0))]), { tx });
        throw new Error('roll back');
      })
      .catch(() => undefined);
    expect(await search(v(0))).toEqual([]);
    await db.transaction((tx) => store.upsert(at(w1, [p('wmem_committed', v(0))]), { tx }));
    expect((await search(v(0))).map((h) => h.id)).toEqual(['wmem_committed']);
  });
});

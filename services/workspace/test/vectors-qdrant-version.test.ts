import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { createLogger } from '@agenthub/runtime';
import { QDRANT_SUPPORTED, QdrantVectorStore } from '../src/vectors-qdrant.js';
import type { VectorPoint } from '../src/vectors.js';

/**
 * Issue 20, item 7: the Qdrant store checks the server's version against the pinned client's
 * range once, and says so in its log. No Qdrant server can run on these machines, so a stand-in
 * answers Qdrant's `GET /` (its version) and refuses everything else (a mock at an unreachable
 * boundary); memories-vectors.test.ts runs the store itself against QDRANT_TEST_URL when set.
 */
function standIn(version: string): Promise<{ url: string; versionCalls: () => number; close: () => Promise<void> }> {
  let calls = 0;
  const server: Server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.method === 'GET' && req.url === '/') {
      calls += 1;
      res.end(JSON.stringify({ title: 'qdrant - vector search engine', version, commit: 'stand-in' }));
      return;
    }
    res.statusCode = 503;
    res.end(JSON.stringify({ status: { error: 'stand-in' } }));
  });
  return new Promise((ok) =>
    server.listen(0, '127.0.0.1', () =>
      ok({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        versionCalls: () => calls,
        close: () => new Promise((done) => server.close(() => done())),
      }),
    ),
  );
}

function capture() {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  return { lines, log: createLogger({ level: 'warn', destination }) };
}

describe('QdrantVectorStore server version check', () => {
  it.each(['1.12.4', '2.0.0'])('warns once, naming both versions, for a server %s outside the client\'s range, before its first collection', async (version) => {
    const server = await standIn(version);
    const { lines, log } = capture();
    try {
      const store = new QdrantVectorStore({ url: server.url, log });
      const point: VectorPoint = { workspaceId: 'ws', id: 'mem_1', model: 'm', vector: new Float32Array([1, 0]), type: 'note', tags: [], createdAt: 0 };
      // The stand-in refuses the collection calls: the write fails, after the check.
      await expect(store.upsert([point])).rejects.toThrow();
      await expect(store.upsert([point])).rejects.toThrow();
      expect(server.versionCalls()).toBe(1);
      const warnings = lines.filter((l) => l.msg === 'qdrant server version outside what the client supports');
      expect(warnings).toEqual([expect.objectContaining({ version, supported: `${QDRANT_SUPPORTED.major}.${QDRANT_SUPPORTED.minors[0]}-${QDRANT_SUPPORTED.major}.${QDRANT_SUPPORTED.minors[1]}` })]);
    } finally {
      await server.close();
    }
  });

  it.each(['1.17.1', '1.18.0', '1.19.2'])('accepts a server %s quietly', async (version) => {
    const server = await standIn(version);
    const { lines, log } = capture();
    try {
      await expect(new QdrantVectorStore({ url: server.url, log }).checkVersion()).resolves.toBe(version);
      expect(lines).toEqual([]);
    } finally {
      await server.close();
    }
  });
});

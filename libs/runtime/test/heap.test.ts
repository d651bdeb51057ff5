import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/** The built module, as the hub's processes load it: the flag is set in a process of its own. */
const HEAP_MODULE = fileURLToPath(new URL('../dist/heap.js', import.meta.url));

/**
 * A process that keeps about 60 MB while it churns through objects that live long enough to reach
 * the old generation (a ring of 600k), as a hub process keeps its caches while requests come and go.
 */
const CHURN = `
const { limitHeapGrowth } = await import(process.env.HEAP_MODULE);
const set = limitHeapGrowth();
const kept = Array.from({ length: 300_000 }, (_, i) => ({ i, s: \`kept \${i}\`.repeat(4) }));
const ring = new Array(600_000);
for (let n = 0; n < 12_000_000; n++) ring[n % ring.length] = { n, s: \`garbage \${n}\`, a: [n, n + 1] };
const { readFileSync } = await import('node:fs');
// The process's own peak: Linux keeps in getrusage's maxRSS the peak of the image it replaced,
// here the forked copy of a jest worker that may hold more than a gigabyte.
const maxRssKiB = Number(/VmHWM:\\s+(\\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1]);
console.log(JSON.stringify({ set, kept: kept.length, maxRssKiB }));
`;

async function churn(nodeArgs: string[]) {
  const { stdout } = await promisify(execFile)(process.execPath, [...nodeArgs, '--single-threaded-gc', '--trace-gc', '--input-type=module', '-e', CHURN], {
    env: { ...process.env, HEAP_MODULE, NODE_OPTIONS: '' },
    maxBuffer: 16 * 1024 * 1024,
  });
  const lines = stdout.trim().split('\n');
  const result = JSON.parse(lines.find((line) => line.startsWith('{'))!) as { set: boolean; maxRssKiB: number };
  return { ...result, fullCollections: lines.filter((line) => line.includes('Mark-Compact')).length };
}

describe('limitHeapGrowth', () => {
  /** Held by the suite, so it stays resident while both children are forked. */
  let ballast: Buffer | undefined;
  afterEach(() => {
    ballast = undefined;
  });

  it('keeps a process’s resident memory near what it keeps, where V8 alone lets the heap grow to four times that', async () => {
    // The children are forked from this process: with it holding more than either of them will,
    // as a jest worker that ran many suites does, their peaks must still be their own.
    ballast = Buffer.alloc(1_200 * 1024 * 1024, 1);
    expect(process.memoryUsage().rss).toBeGreaterThan(ballast.length);
    // V8's own choice, as a node command line that names the flag gets it.
    const own = await churn(['--heap-growing-percent=0']);
    const limited = await churn([]);
    expect(own.set).toBe(false);
    expect(limited.set).toBe(true);
    // Measured here: some 600 MiB against 900, with twice the full collections.
    expect(limited.maxRssKiB).toBeLessThan(own.maxRssKiB * 0.8);
    expect(limited.fullCollections).toBeGreaterThan(own.fullCollections * 1.5);
  }, 60_000);

  it('leaves a heap-growing percent given on the command line alone, in either spelling', async () => {
    const { limitHeapGrowth } = await import('@agenthub/runtime');
    expect(limitHeapGrowth(['--heap-growing-percent=50'])).toBe(false);
    expect(limitHeapGrowth(['--max-old-space-size=512', '--heap_growing_percent', '50'])).toBe(false);
  });
});

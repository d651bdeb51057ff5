import { setFlagsFromString } from 'node:v8';

/** How far past what survived its last full collection a serving process's heap may grow, in percent. */
const HEAP_GROWING_PERCENT = 100;

/**
 * Lets V8's heap grow to twice what survived its last full collection before the next one. Left to
 * itself, V8 allows up to four times on a machine with memory to spare: a hub process keeps some
 * 35–60 MB, so its resident memory would follow the machine's size rather than what it keeps, and
 * would take minutes of load to settle. Full collections of so small a heap are short, so running
 * them twice as often costs little. A `--heap-growing-percent` on the node command line wins
 * (0 gives V8's own choice back); returns whether this set it.
 */
export function limitHeapGrowth(execArgv: readonly string[] = process.execArgv): boolean {
  if (execArgv.some((arg) => /^--heap[-_]growing[-_]percent(=|$)/.test(arg))) return false;
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  return true;
}

import { readFile } from 'node:fs/promises';
// @ts-expect-error: a plain ES module script (no declarations); it is what `npm run build:wasm` runs.
import { dotsWasmModule } from '../scripts/build-wasm.mjs';

describe('the WebAssembly vector scan', () => {
  it('is committed exactly as npm run build:wasm assembles it from wasm/dots.wat', async () => {
    const committed = await readFile(new URL('../src/dots-wasm.ts', import.meta.url), 'utf8');
    expect(committed).toBe(await (dotsWasmModule as () => Promise<string>)());
  });
});

import { DOTS_WASM } from './dots-wasm.js';
import type { VectorHit } from './vectors.js';

/**
 * The exact k-NN scan of the embedded vector store: a query's dot product with every vector of a
 * set (WebAssembly SIMD, or a JavaScript loop), and the best k hits of it.
 */

/**
 * Dot products of one query with many vectors: WebAssembly SIMD (f32x4) over vectors kept in
 * the module's own memory, about three times as fast as the JavaScript loop it falls back to
 * (dimensions not a multiple of 4, or no SIMD).
 */
export abstract class Scanner {
  static create(dims: number, capacity: number): Scanner {
    const module = dims % 4 === 0 ? dotsModule() : undefined;
    return module ? new WasmScanner(module, dims, capacity) : new JsScanner(dims, capacity);
  }
  abstract vectors(): Float32Array;
  abstract grow(capacity: number): void;
  abstract dots(query: Float32Array, count: number): Float32Array;
}

class JsScanner extends Scanner {
  private data: Float32Array;
  private out: Float32Array;
  constructor(
    private readonly dims: number,
    capacity: number,
  ) {
    super();
    this.data = new Float32Array(capacity * dims);
    this.out = new Float32Array(capacity);
  }
  vectors(): Float32Array {
    return this.data;
  }
  grow(capacity: number): void {
    const data = new Float32Array(capacity * this.dims);
    data.set(this.data);
    this.data = data;
    this.out = new Float32Array(capacity);
  }
  dots(query: Float32Array, count: number): Float32Array {
    const { data, dims, out } = this;
    for (let i = 0; i < count; i++) {
      const base = i * dims;
      let a = 0;
      let b = 0;
      let c = 0;
      let d = 0;
      let j = 0;
      for (; j + 3 < dims; j += 4) {
        a += query[j]! * data[base + j]!;
        b += query[j + 1]! * data[base + j + 1]!;
        c += query[j + 2]! * data[base + j + 2]!;
        d += query[j + 3]! * data[base + j + 3]!;
      }
      for (; j < dims; j++) a += query[j]! * data[base + j]!;
      out[i] = a + b + c + d;
    }
    return out;
  }
}

const PAGE = 65536;

// The parts of the WebAssembly global used here (the compiler's lib has no DOM types).
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
type WasmModule = object;
const Wasm = (
  globalThis as unknown as {
    WebAssembly: {
      Memory: new (descriptor: { initial: number }) => WasmMemory;
      Module: new (bytes: Uint8Array) => WasmModule;
      Instance: new (module: WasmModule, imports: object) => { exports: Record<string, unknown> };
      validate(bytes: Uint8Array): boolean;
    };
  }
).WebAssembly;

class WasmScanner extends Scanner {
  private readonly memory: WasmMemory;
  private readonly run: (query: number, base: number, count: number, dims: number, out: number) => void;
  private capacity: number;
  private view: Float32Array | undefined;

  constructor(
    module: WasmModule,
    private readonly dims: number,
    capacity: number,
  ) {
    super();
    this.capacity = capacity;
    this.memory = new Wasm.Memory({ initial: Math.ceil(this.needed(capacity) / PAGE) });
    const instance = new Wasm.Instance(module, { env: { memory: this.memory } });
    this.run = instance.exports.dots as WasmScanner['run'];
  }

  /** Layout: the vectors from 0, then the query, then one score per vector. */
  private needed(capacity: number): number {
    return capacity * this.dims * 4 + this.dims * 4 + capacity * 4;
  }

  vectors(): Float32Array {
    if (!this.view || this.view.buffer !== this.memory.buffer) this.view = new Float32Array(this.memory.buffer, 0, this.capacity * this.dims);
    return this.view;
  }

  grow(capacity: number): void {
    const missing = Math.ceil(this.needed(capacity) / PAGE) - this.memory.buffer.byteLength / PAGE;
    if (missing > 0) this.memory.grow(missing);
    this.capacity = capacity;
    this.view = undefined;
  }

  dots(query: Float32Array, count: number): Float32Array {
    const queryAt = this.capacity * this.dims * 4;
    const outAt = queryAt + this.dims * 4;
    new Float32Array(this.memory.buffer, queryAt, this.dims).set(query);
    this.run(queryAt, 0, count, this.dims, outAt);
    return new Float32Array(this.memory.buffer, outAt, count);
  }
}

let compiled: WasmModule | null | undefined;

/** The compiled dot-product module (source: wasm/dots.wat), or null where WebAssembly SIMD is missing. */
function dotsModule(): WasmModule | undefined {
  if (compiled === undefined) {
    const bytes = Buffer.from(DOTS_WASM, 'base64');
    compiled = Wasm.validate(bytes) ? new Wasm.Module(bytes) : null;
  }
  return compiled ?? undefined;
}

/** The best `k` hits seen so far, best first; equal scores ordered by id. */
export class TopK {
  private readonly items: VectorHit[] = [];
  constructor(private readonly k: number) {}

  offer(id: string, score: number): void {
    const items = this.items;
    if (items.length === this.k) {
      const last = items[items.length - 1]!;
      if (score < last.score || (score === last.score && id > last.id)) return;
      items.pop();
    }
    let at = items.length;
    while (at > 0) {
      const before = items[at - 1]!;
      if (before.score > score || (before.score === score && before.id < id)) break;
      at -= 1;
    }
    items.splice(at, 0, { id, score });
  }

  hits(): VectorHit[] {
    return this.items;
  }
}

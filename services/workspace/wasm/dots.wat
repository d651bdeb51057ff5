;; The embedded vector store's scan (src/vectors-embedded.ts, WasmScanner):
;; dots(query, base, count, dims, out) sets out[i] = Σ query[j] · vectors[base + i·dims + j] for
;; i < count, in f32x4 lanes, so dims must be a multiple of 4 (the caller falls back to JavaScript
;; otherwise). All arguments but count and dims are byte offsets into env.memory, which the caller
;; owns and grows. Loads say align=4: rows are f32 arrays, 4-byte aligned, not 16.
;; Build with `npm run build:wasm -w services/workspace` (writes src/dots-wasm.ts).
(module
  (import "env" "memory" (memory 1))
  (func (export "dots") (param $q i32) (param $base i32) (param $n i32) (param $dims i32) (param $out i32)
    (local $i i32) (local $j i32) (local $row i32) (local $rowBytes i32) (local $acc v128)
    (local.set $rowBytes (i32.shl (local.get $dims) (i32.const 2)))
    (local.set $row (local.get $base))
    (block $done
      (loop $rows
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $acc (v128.const i32x4 0 0 0 0))
        (local.set $j (i32.const 0))
        (block $end
          (loop $cols
            (br_if $end (i32.ge_u (local.get $j) (local.get $rowBytes)))
            (local.set $acc
              (f32x4.add
                (local.get $acc)
                (f32x4.mul
                  (v128.load align=4 (i32.add (local.get $q) (local.get $j)))
                  (v128.load align=4 (i32.add (local.get $row) (local.get $j))))))
            (local.set $j (i32.add (local.get $j) (i32.const 16)))
            (br $cols)))
        (f32.store
          (i32.add (local.get $out) (i32.shl (local.get $i) (i32.const 2)))
          (f32.add
            (f32.add
              (f32.add (f32x4.extract_lane 0 (local.get $acc)) (f32x4.extract_lane 1 (local.get $acc)))
              (f32x4.extract_lane 2 (local.get $acc)))
            (f32x4.extract_lane 3 (local.get $acc))))
        (local.set $row (i32.add (local.get $row) (local.get $rowBytes)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $rows)))))

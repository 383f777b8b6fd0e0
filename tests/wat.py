"""WAT snippets shared by the test modules and the benchmarks that build modules by hand."""

#: A bump allocator for WAT test modules (``wssp_alloc``; needs a mutable global ``$heap``).
ALLOC_WAT = """  (func (export "wssp_alloc") (param $size i32) (result i32)
    (local $ptr i32) (local $end i32)
    (local.set $ptr (i32.and (i32.add (global.get $heap) (i32.const 7)) (i32.const -8)))
    (local.set $end (i32.add (local.get $ptr) (local.get $size)))
    (if (i32.gt_u (local.get $end) (i32.mul (memory.size) (i32.const 65536)))
      (then (if (i32.lt_s (memory.grow (i32.add (i32.shr_u (i32.sub (local.get $end)
                  (i32.mul (memory.size) (i32.const 65536))) (i32.const 16)) (i32.const 1)))
                (i32.const 0)) (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $ptr))
"""

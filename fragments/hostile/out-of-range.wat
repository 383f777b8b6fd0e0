;; Registers one reason, then writes verdict 7 for every row (beyond the reason count) and score
;; 250 for every row (beyond 0..100): both calls must fail as out-of-range outputs.
(module
  (memory (export "memory") 1)
  (func (export "wssp_abi_v1") (result i32) (i32.const 0))
  ;; 8-byte aligned bump allocator over fresh (zero) memory; 0 when memory cannot grow.
  (global $heap (mut i32) (i32.const 1024))
  (func (export "wssp_alloc") (param $size i32) (result i32)
    (local $ptr i32) (local $end i32)
    (local.set $ptr (global.get $heap))
    (local.set $end (i32.and (i32.add (i32.add (local.get $ptr) (local.get $size)) (i32.const 7))
                             (i32.const -8)))
    (if (i32.gt_u (local.get $end) (i32.shl (memory.size) (i32.const 16)))
      (then
        (if (i32.eq (memory.grow (i32.shr_u (i32.sub (i32.add (local.get $end) (i32.const 65535))
                                                      (i32.shl (memory.size) (i32.const 16)))
                                             (i32.const 16)))
                    (i32.const -1))
          (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $ptr))
  (data (i32.const 16) "node(s) are hostile")
  (func (export "wssp_init") (param $ctx i32) (param i32 i32) (result i32)
    (i32.store offset=128 (local.get $ctx) (i32.const 16))
    (i32.store offset=132 (local.get $ctx) (i32.const 19))
    (i32.const 0))
  (func (export "wssp_filter") (param $ctx i32) (result i32)
    (local $i i32)
    (block $done
      (loop $rows
        (br_if $done (i32.ge_u (local.get $i) (i32.load offset=8 (local.get $ctx))))
        (i32.store16 (i32.add (i32.load offset=80 (local.get $ctx)) (i32.shl (local.get $i) (i32.const 1)))
                     (i32.const 7))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $rows)))
    (i32.const 0))
  (func (export "wssp_score") (param $ctx i32) (result i32)
    (local $i i32)
    (block $done
      (loop $rows
        (br_if $done (i32.ge_u (local.get $i) (i32.load offset=8 (local.get $ctx))))
        (i64.store (i32.add (i32.load offset=84 (local.get $ctx)) (i32.shl (local.get $i) (i32.const 3)))
                   (i64.const 250))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $rows)))
    (i32.const 0))
)

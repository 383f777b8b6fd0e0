;; wssp_prebind writes 5000 lines "label a=b": more than the 1000 lines a call may write, the call
;; must fail as an output error.
(module
  (memory (export "memory") 1)
  (func (export "wssp_abi_v1") (result i32) (i32.const 3))
  ;; 8-byte aligned bump allocator over fresh (zero) memory; 0 when memory cannot grow.
  (global $heap (mut i32) (i32.const 1024))
  (func $alloc (export "wssp_alloc") (param $size i32) (result i32)
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
  (func (export "wssp_init") (param i32 i32 i32) (result i32) (i32.const 0))
  ;; filter and score work: every row passes (verdicts are fresh zeros), no score is written.
  (func (export "wssp_filter") (param i32) (result i32) (i32.const 0))
  (func (export "wssp_score") (param i32) (result i32) (i32.const 0))
  (data (i32.const 16) "label a=b\n")
  (func (export "wssp_prebind") (param $ctx i32) (result i32)
    (local $i i32) (local $out i32)
    (local.set $out (call $alloc (i32.const 50000)))
    (if (i32.eqz (local.get $out)) (then (return (i32.const 1))))
    (block $done
      (loop $lines
        (br_if $done (i32.ge_u (local.get $i) (i32.const 5000)))
        (memory.copy (i32.add (local.get $out) (i32.mul (local.get $i) (i32.const 10)))
                     (i32.const 16) (i32.const 10))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $lines)))
    (i32.store offset=144 (local.get $ctx) (local.get $out))
    (i32.store offset=148 (local.get $ctx) (i32.const 49999))  ;; without the last newline
    (i32.const 0))
)

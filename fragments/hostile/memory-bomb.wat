;; wssp_filter grows memory one page at a time until memory.grow fails (the memory cap), then
;; writes over all of it forever: the call must end on fuel or the deadline, with memory never
;; beyond the cap.
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
  (func (export "wssp_init") (param i32 i32 i32) (result i32) (i32.const 0))
  (func (export "wssp_filter") (param i32) (result i32)
    (local $p i32)
    (block $full
      (loop $grow
        (br_if $full (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
        (br $grow)))
    (loop $touch
      ;; p walks the whole memory in 4 KiB steps, wrapping at the end
      (i32.store (local.get $p) (local.get $p))
      (local.set $p (i32.add (local.get $p) (i32.const 4096)))
      (if (i32.ge_u (local.get $p) (i32.shl (memory.size) (i32.const 16)))
        (then (local.set $p (i32.const 0))))
      (br $touch))
    (i32.const 0))
  (func (export "wssp_score") (param i32) (result i32) (i32.const 0))
)

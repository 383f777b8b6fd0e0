;; present-only: a minimal hand-written fragment (ABI v1).
;;
;; Filter: a node passes when bit 0 of its node_flags byte is set (the row holds a node);
;; otherwise it fails with reason 1, "node(s) not present".
;; Score: 50 for every candidate.
;;
;; Build: wat2wasm present-only.wat -o present-only.wasm
(module
  (memory (export "memory") 2)

  ;; Static data: the reasons lines at 16 (ids 1.. are lines 1..).
  (data (i32.const 16) "node(s) not present")

  ;; Bump allocator: the heap starts at 1024, 8-byte aligned, and only grows. Fresh memory is
  ;; zero, and nothing is handed out twice, so blocks are zero-filled.
  (global $heap (mut i32) (i32.const 1024))

  (func (export "wssp_abi_v1") (result i32) (i32.const 0))

  (func (export "wssp_alloc") (param $size i32) (result i32)
    (local $ptr i32) (local $end i64) (local $have i64)
    (if (i32.lt_s (local.get $size) (i32.const 0)) (then (return (i32.const 0))))
    (local.set $ptr (global.get $heap))
    ;; end = ptr + round_up(size, 8), in 64 bits so it cannot wrap
    (local.set $end (i64.add (i64.extend_i32_u (local.get $ptr))
                             (i64.and (i64.add (i64.extend_i32_u (local.get $size)) (i64.const 7))
                                      (i64.const -8))))
    (local.set $have (i64.shl (i64.extend_i32_u (memory.size)) (i64.const 16)))
    (if (i64.gt_u (local.get $end) (local.get $have))
      (then
        (if (i32.eq (memory.grow (i32.wrap_i64
                      (i64.shr_u (i64.add (i64.sub (local.get $end) (local.get $have))
                                          (i64.const 65535))
                                 (i64.const 16))))
                    (i32.const -1))
          (then (return (i32.const 0))))))
    (global.set $heap (i32.wrap_i64 (local.get $end)))
    (local.get $ptr))

  ;; wssp_init(ctx, config, len): declare the reasons (ctx+128 pointer, ctx+132 length).
  (func (export "wssp_init") (param $ctx i32) (param $config i32) (param $len i32) (result i32)
    (i32.store offset=128 (local.get $ctx) (i32.const 16))
    (i32.store offset=132 (local.get $ctx) (i32.const 19))
    (i32.const 0))

  ;; wssp_filter(ctx): verdicts[i] = flags[i] & 1 ? 0 : 1 for i < count.
  (func (export "wssp_filter") (param $ctx i32) (result i32)
    (local $i i32) (local $n i32) (local $flags i32) (local $verdicts i32)
    (local.set $n (i32.load offset=8 (local.get $ctx)))         ;; count
    (local.set $flags (i32.load offset=32 (local.get $ctx)))    ;; node_flags
    (local.set $verdicts (i32.load offset=80 (local.get $ctx))) ;; verdicts (u16)
    (block $done
      (loop $rows
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (i32.store16
          (i32.add (local.get $verdicts) (i32.shl (local.get $i) (i32.const 1)))
          (i32.eqz (i32.and (i32.load8_u (i32.add (local.get $flags) (local.get $i)))
                            (i32.const 1))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $rows)))
    (i32.const 0))

  ;; wssp_score(ctx): scores[i] = 50 where candidates[i] == 1.
  (func (export "wssp_score") (param $ctx i32) (result i32)
    (local $i i32) (local $n i32) (local $candidates i32) (local $scores i32)
    (local.set $n (i32.load offset=8 (local.get $ctx)))
    (local.set $candidates (i32.load offset=76 (local.get $ctx)))
    (local.set $scores (i32.load offset=84 (local.get $ctx)))   ;; scores (i64)
    (block $done
      (loop $rows
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (if (i32.load8_u (i32.add (local.get $candidates) (local.get $i)))
          (then (i64.store (i32.add (local.get $scores) (i32.shl (local.get $i) (i32.const 3)))
                           (i64.const 50))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $rows)))
    (i32.const 0))
)

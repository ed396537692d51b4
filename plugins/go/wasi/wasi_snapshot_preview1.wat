;; The WASI preview1 functions a standard Go (GOOS=wasip1) module imports,
;; as a component adapter that needs no WASI at all: the Go component then
;; imports nothing but the host's `log`, like the C and Rust plugins.
;;
;; Why not the official preview1 reactor adapter: it allocates its state and
;; stack on the first WASI call through the main module's `cabi_realloc`,
;; and the Go runtime makes WASI calls (random_get, clock_time_get) while
;; `_initialize` is still setting the runtime up, when no Go export may be
;; called yet: the component traps on instantiation ("wasmexport function
;; called before runtime initialization"). With `--realloc-via-memory-grow`
;; the adapter would grow linear memory behind the Go allocator's back,
;; which assumes it alone grows memory (runtime/mem_wasm.go: sbrk).
;;
;; What each call does, deterministic like the host's empty WASI context:
;; - clocks: 2000-01-01T00:00:00Z, plus 1 µs per call so the Go scheduler
;;   always sees time move; poll_oneoff advances the clock to the end of the
;;   requested sleep instead of sleeping. The monotonic clock reads the same
;;   (30 years in nanoseconds), so it is ahead of any real monotonic clock a
;;   pre-initialised snapshot (wizer, at build time) may have recorded;
;; - random_get: zeros; args, environment, preopens: none;
;; - fd_write to stdout/stderr: each write becomes a host log line (info /
;;   warn), so a Go panic's message reaches the host log; other fds: EBADF;
;; - proc_exit: a trap (a Go panic or os.Exit is a plugin fault).
;; No data or element segments, no stack: what an adapter may contain.
(module
  (import "env" "memory" (memory 0))
  (import "wasm-reconciler:plugin/host@0.1.0" "log" (func $log (param i32 i32 i32)))

  ;; Nanoseconds elapsed in the call (an instance serves one call).
  (global $elapsed (mut i64) (i64.const 0))

  (func $tick (result i64)
    (global.set $elapsed (i64.add (global.get $elapsed) (i64.const 1000)))
    (global.get $elapsed))

  (func (export "sched_yield") (result i32) (i32.const 0))
  (func (export "proc_exit") (param i32) (unreachable))

  (func (export "args_get") (param i32 i32) (result i32) (i32.const 0))
  (func (export "args_sizes_get") (param $count i32) (param $size i32) (result i32)
    (i32.store (local.get $count) (i32.const 0))
    (i32.store (local.get $size) (i32.const 0))
    (i32.const 0))
  (func (export "environ_get") (param i32 i32) (result i32) (i32.const 0))
  (func (export "environ_sizes_get") (param $count i32) (param $size i32) (result i32)
    (i32.store (local.get $count) (i32.const 0))
    (i32.store (local.get $size) (i32.const 0))
    (i32.const 0))

  ;; Every clock: 2000-01-01T00:00:00Z plus the time elapsed in the call.
  (func (export "clock_time_get") (param $id i32) (param $precision i64) (param $out i32) (result i32)
    (i64.store (local.get $out) (i64.add (call $tick) (i64.const 946684800000000000)))
    (i32.const 0))

  (func (export "random_get") (param $buf i32) (param $len i32) (result i32)
    (memory.fill (local.get $buf) (i32.const 0) (local.get $len))
    (i32.const 0))

  ;; Every subscription fires at once; a clock subscription moves the clock
  ;; by its timeout. subscription: 48 bytes (userdata u64 @0, tag u8 @8,
  ;; clock timeout u64 @24, flags u16 @40); event: 32 bytes (userdata @0,
  ;; errno u16 @8, type u8 @10, fd_readwrite @16).
  (func (export "poll_oneoff") (param $in i32) (param $out i32) (param $n i32) (param $events i32) (result i32)
    (local $i i32) (local $sub i32) (local $ev i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $sub (i32.add (local.get $in) (i32.mul (local.get $i) (i32.const 48))))
        (local.set $ev (i32.add (local.get $out) (i32.mul (local.get $i) (i32.const 32))))
        (memory.fill (local.get $ev) (i32.const 0) (i32.const 32))
        (i64.store (local.get $ev) (i64.load (local.get $sub)))
        (i32.store8 offset=10 (local.get $ev) (i32.load8_u offset=8 (local.get $sub)))
        (if (i32.eqz (i32.load8_u offset=8 (local.get $sub)))
          (then
            (if (i32.and (i32.load16_u offset=40 (local.get $sub)) (i32.const 1))
              (then ;; absolute: at least that instant (monotonic clock)
                (if (i64.gt_u (i64.load offset=24 (local.get $sub)) (global.get $elapsed))
                  (then (global.set $elapsed (i64.load offset=24 (local.get $sub))))))
              (else
                (global.set $elapsed
                  (i64.add (global.get $elapsed) (i64.load offset=24 (local.get $sub))))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.store (local.get $events) (local.get $n))
    (i32.const 0))

  ;; stdout (1) -> log info, stderr (2) -> log warn; iovec: (ptr u32, len u32).
  (func (export "fd_write") (param $fd i32) (param $iovs i32) (param $count i32) (param $written i32) (result i32)
    (local $i i32) (local $len i32) (local $total i32)
    (if (i32.or (i32.lt_u (local.get $fd) (i32.const 1)) (i32.gt_u (local.get $fd) (i32.const 2)))
      (then (return (i32.const 8)))) ;; EBADF
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $count)))
        (local.set $len (i32.load offset=4 (i32.add (local.get $iovs) (i32.mul (local.get $i) (i32.const 8)))))
        (if (local.get $len)
          (then
            (call $log
              (select (i32.const 2) (i32.const 3) (i32.eq (local.get $fd) (i32.const 1)))
              (i32.load (i32.add (local.get $iovs) (i32.mul (local.get $i) (i32.const 8))))
              (local.get $len))))
        (local.set $total (i32.add (local.get $total) (local.get $len)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.store (local.get $written) (local.get $total))
    (i32.const 0))

  ;; stdio is a character device (filetype 2), everything else EBADF.
  (func (export "fd_fdstat_get") (param $fd i32) (param $out i32) (result i32)
    (if (i32.gt_u (local.get $fd) (i32.const 2)) (then (return (i32.const 8))))
    (memory.fill (local.get $out) (i32.const 0) (i32.const 24))
    (i32.store8 (local.get $out) (i32.const 2))
    (i32.const 0))
  (func (export "fd_fdstat_set_flags") (param i32 i32) (result i32) (i32.const 0))
  (func (export "fd_close") (param i32) (result i32) (i32.const 0))
  (func (export "fd_read") (param i32 i32 i32 i32) (result i32) (i32.const 8))
  ;; No preopened directories.
  (func (export "fd_prestat_get") (param i32 i32) (result i32) (i32.const 8))
  (func (export "fd_prestat_dir_name") (param i32 i32 i32) (result i32) (i32.const 8))
)

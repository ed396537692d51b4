//go:build wasip1

package wr

// The canonical ABI of the reconciler world, by hand. wit-bindgen-go (the
// Bytecode Alliance's Go generator) emits `//go:wasmexport` functions that
// take *string and return *cm.Result, which standard Go rejects ("go:wasmexport:
// unsupported parameter type"), and it lays structs out for 32-bit TinyGo,
// while GOARCH=wasm has 64-bit pointers and ints. The world is small (one
// import, one export of strings, lists and records), so the lifting and
// lowering are written here against the layouts of the canonical ABI:
//
//	reconcile(12 flat i32 params) -> i32 (pointer to the 52-byte return area)
//	  result<reconcile-response, reconcile-error>: tag u8 @0, payload @4
//	  reconcile-response (48 bytes): children list @0, conditions list @8,
//	    status option<string> tag @16 value @20, requeue option<u32> tag @28
//	    value @32, events list @36, finalized bool @44
//	  reconcile-error: tag u8 @0, error-detail{reason @4, message @12}
//	  condition (28 bytes): type @0, status u8 @8, reason @12, message @20
//	  event (20 bytes): type u8 @0, reason @4, message @12
//	  string / list: (ptr i32, len i32)
//
// Memory handed to the host stays reachable from `retained` until the
// host's post-return call, so the Go GC (which never moves heap objects)
// cannot free it while the host reads it.

import "unsafe"

//go:wasmimport wasm-reconciler:plugin/host@0.1.0 log
//go:noescape
func wasmimportLog(level uint32, ptr unsafe.Pointer, length uint32)

func hostLog(level LogLevel, message string) {
	wasmimportLog(uint32(level), unsafe.Pointer(unsafe.StringData(message)), uint32(len(message)))
}

// retained keeps memory the host reads or writes alive across the boundary.
var (
	retainedWords   [][]uint32
	retainedStrings []string
	requestBuffers  [][]uint64
)

// cabi_realloc is the canonical ABI's allocator: the host calls it to
// place the request's strings and lists in linear memory. Blocks are
// 8-byte aligned (the world needs at most 4).
//
//go:wasmexport cabi_realloc
func cabiRealloc(oldPtr, oldSize, align, newSize uint32) uint32 {
	if newSize == 0 {
		return align // any aligned, non-null address will do for 0 bytes
	}
	buf := make([]uint64, (newSize+7)/8)
	requestBuffers = append(requestBuffers, buf)
	ptr := unsafe.Pointer(unsafe.SliceData(buf))
	if oldSize > 0 && oldPtr != 0 {
		copy(unsafe.Slice((*byte)(ptr), newSize), unsafe.Slice((*byte)(addr(oldPtr)), min(oldSize, newSize)))
	}
	return uint32(uintptr(ptr))
}

//go:wasmexport reconcile
func wasmexportReconcile(parentPtr, parentLen, childrenPtr, childrenLen, relatedPtr, relatedLen,
	finalizing, configTag, configPtr, configLen, nowPtr, nowLen uint32) uint32 {
	w := WireRequest{
		Parent:     liftString(parentPtr, parentLen),
		Children:   liftStrings(childrenPtr, childrenLen),
		Related:    liftStrings(relatedPtr, relatedLen),
		Finalizing: finalizing != 0,
		Now:        liftString(nowPtr, nowLen),
	}
	if configTag != 0 {
		c := liftString(configPtr, configLen)
		w.Config = &c
	}
	requestBuffers = nil // copied into Go strings above
	resp, failure := Dispatch(exported, w)

	ret := words(13)
	if failure != nil {
		ret[0] = 1
		ret[1] = uint32(failure.Kind) // permanent 0, transient 1, as in the WIT
		ret[2], ret[3] = lowerString(failure.Reason)
		ret[4], ret[5] = lowerString(failure.Message)
		return ptrOf(ret)
	}
	ret[1], ret[2] = lowerStrings(resp.Children)
	ret[3], ret[4] = lowerConditions(resp.Conditions)
	if resp.Status != nil {
		ret[5] = 1
		ret[6], ret[7] = lowerString(*resp.Status)
	}
	if resp.RequeueAfterSeconds != nil {
		ret[8] = 1
		ret[9] = *resp.RequeueAfterSeconds
	}
	ret[10], ret[11] = lowerEvents(resp.Events)
	if resp.Finalized {
		ret[12] = 1
	}
	return ptrOf(ret)
}

// cabi_post_reconcile runs after the host has read the result.
//
//go:wasmexport cabi_post_reconcile
func cabiPostReconcile(uint32) {
	retainedWords, retainedStrings, requestBuffers = nil, nil, nil
}

// addr turns a linear-memory address from the host into a pointer (Go's
// wasm pointers are linear-memory addresses).
func addr(p uint32) unsafe.Pointer { return unsafe.Add(unsafe.Pointer(nil), uintptr(p)) }

func liftString(ptr, n uint32) string {
	if n == 0 {
		return ""
	}
	return string(unsafe.Slice((*byte)(addr(ptr)), n))
}

func liftStrings(ptr, n uint32) []string {
	if n == 0 {
		return nil
	}
	pairs := unsafe.Slice((*uint32)(addr(ptr)), 2*n)
	out := make([]string, n)
	for i := range out {
		out[i] = liftString(pairs[2*i], pairs[2*i+1])
	}
	return out
}

// words allocates n zeroed 32-bit words that stay alive until post-return.
func words(n int) []uint32 {
	w := make([]uint32, n)
	retainedWords = append(retainedWords, w)
	return w
}

func ptrOf(w []uint32) uint32 {
	if len(w) == 0 {
		return 4 // aligned, never read: the list is empty
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(w))))
}

func lowerString(s string) (uint32, uint32) {
	if len(s) == 0 {
		return 1, 0
	}
	retainedStrings = append(retainedStrings, s)
	return uint32(uintptr(unsafe.Pointer(unsafe.StringData(s)))), uint32(len(s))
}

func lowerStrings(list []string) (uint32, uint32) {
	w := words(2 * len(list))
	for i, s := range list {
		w[2*i], w[2*i+1] = lowerString(s)
	}
	return ptrOf(w), uint32(len(list))
}

func lowerConditions(list []Condition) (uint32, uint32) {
	const size = 7 // 28 bytes
	w := words(size * len(list))
	for i, c := range list {
		e := w[size*i : size*(i+1)]
		e[0], e[1] = lowerString(c.Type)
		e[2] = uint32(c.Status) // true 0, false 1, unknown 2, as in the WIT
		e[3], e[4] = lowerString(c.Reason)
		e[5], e[6] = lowerString(c.Message)
	}
	return ptrOf(w), uint32(len(list))
}

func lowerEvents(list []Event) (uint32, uint32) {
	const size = 5 // 20 bytes
	w := words(size * len(list))
	for i, ev := range list {
		e := w[size*i : size*(i+1)]
		e[0] = uint32(ev.Type) // normal 0, warning 1
		e[1], e[2] = lowerString(ev.Reason)
		e[3], e[4] = lowerString(ev.Message)
	}
	return ptrOf(w), uint32(len(list))
}

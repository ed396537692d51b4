module wasm-reconciler.dev/go

// Standard Go (not TinyGo): GOOS=wasip1 GOARCH=wasm -buildmode=c-shared
// with //go:wasmexport, which needs Go 1.24 or later. The SDK and the
// example use only the standard library, so there is no go.sum.
go 1.26

toolchain go1.26.8

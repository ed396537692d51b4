module {{name}}

// Standard Go (not TinyGo): GOOS=wasip1 GOARCH=wasm -buildmode=c-shared with
// //go:wasmexport needs Go 1.24 or later. The SDK (sdk/, vendored) uses only
// the standard library, so there is no go.sum and nothing to download.
go 1.24

// Command static-site is the component entry of the static-site plugin in
// Go: a port of plugins/static-site (Rust) with the same output for the
// same request; see its README for the behaviour. Built with
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared (plugins/go/build.sh);
// main never runs, init registers the reconcile function.
package main

import wr "wasm-reconciler.dev/go/sdk"

func init() { wr.Export(Reconcile) }

func main() {}

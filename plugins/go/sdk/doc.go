// Package wr is the Go SDK for wasm-reconciler plugins, for standard Go
// (GOOS=wasip1 GOARCH=wasm, -buildmode=c-shared; Go 1.24 or later).
//
// A plugin is an ordinary function from a *Request to a *Response, exported
// from the plugin's main package:
//
//	func init() { wr.Export(reconcile) }
//	func main() {}
//
//	func reconcile(req *wr.Request) (*wr.Response, error) {
//		name, err := req.Name()
//		if err != nil {
//			return nil, err
//		}
//		cm := wr.NewK8sObject("v1", "ConfigMap", req.Namespace(), wr.ChildName(name, "config"))
//		cm.Set("data", wr.NewObject("greeting", "hello"))
//		return wr.NewResponse().Child(cm), nil
//	}
//
// The helpers mirror the Rust SDK (plugins/sdk) so a port gives the same
// answer: ChildName and ContentHash give the same names and hashes, objects
// keep their key order (Object), numbers keep their text (AsI64 follows
// serde_json), and IsBlank, DebugQuote and Unexpected reproduce Rust's and
// serde's wording in messages. Only abi_wasip1.go touches the component
// boundary, so everything else is tested natively with `go test`.
// Build with plugins/go/build.sh; docs/authoring.md has the details.
package wr

// Command {{name}} is the component entry: init registers the reconcile
// function; main never runs (the component is a WebAssembly reactor).
package main

import wr "{{name}}/sdk"

func init() { wr.Export(Reconcile) }

func main() {}

// kube-apiserver, built from the pinned k8s.io/kubernetes module: the referee the
// embedded API server is measured against (docs/fidelity.md).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}

package main

// {{name}}: the reconcile logic for `{{kind}}` objects. A plain function from
// a Request to a Response (or an error), unit tested with `go test`
// (plugin_test.go) and built into the component by ../build.sh.

import wr "{{name}}/sdk"

// Reconcile renders one ConfigMap holding spec.message.
func Reconcile(req *wr.Request) (*wr.Response, error) {
	name, err := req.Name()
	if err != nil {
		return nil, err
	}
	message := "hello"
	if v := wr.Get(req.Spec(), "message"); v != nil {
		s, ok := v.(string)
		if !ok {
			return nil, wr.InvalidSpec("spec.message", "must be a string")
		}
		message = s
	}

	configMap := wr.NewK8sObject("v1", "ConfigMap", req.Namespace(), name+"-greeting")
	wr.Label(configMap, "app.kubernetes.io/managed-by", "wasm-reconciler")
	configMap.Set("data", wr.NewObject("message", message))

	return wr.NewResponse().
		Child(configMap).
		Condition(wr.ConditionTrue("Greeted", "ConfigMapRendered", "")).
		SetStatus(wr.NewObject("message", message)), nil
}

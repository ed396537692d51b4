package main

// Native unit tests of the plugin logic (no wasm involved): the Rust
// plugin's tests (plugins/static-site/src/tests.rs), ported.

import (
	"errors"
	"strings"
	"testing"

	wr "wasm-reconciler.dev/go/sdk"
)

func parse(t *testing.T, text string) any {
	t.Helper()
	v, err := wr.ParseJSON(text)
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return v
}

func parent(t *testing.T, spec string) any {
	return parse(t, `{"apiVersion":"examples.wasm-reconciler.dev/v1alpha1","kind":"StaticSite",
		"metadata":{"name":"web","namespace":"demo","generation":1},"spec":`+spec+`}`)
}

func run(t *testing.T, req *wr.Request) *wr.Response {
	t.Helper()
	resp, err := Reconcile(req)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return resp
}

func at(v any, path ...string) any {
	for _, p := range path {
		v = wr.Get(v, p)
	}
	return v
}

func js(t *testing.T, v any) string {
	t.Helper()
	out, err := wr.ToJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestYieldsConfigMapDeploymentService(t *testing.T) {
	resp := run(t, wr.NewRequest(parent(t, `{"image":"nginx:1.27","content":{"index.html":"hi"}}`)))
	var kinds []string
	for _, c := range resp.Children {
		k, _ := wr.Kind(c)
		n, _ := wr.Name(c)
		kinds = append(kinds, k+"/"+n)
	}
	if got := strings.Join(kinds, " "); got != "ConfigMap/web-content Deployment/web Service/web" {
		t.Fatal(got)
	}
	deployment := resp.Children[1]
	if got := js(t, at(deployment, "spec", "replicas")); got != "1" {
		t.Fatal(got)
	}
	containers := at(deployment, "spec", "template", "spec", "containers").([]any)
	if got := js(t, wr.Get(containers[0], "image")); got != `"nginx:1.27"` {
		t.Fatal(got)
	}
	if got := js(t, wr.Get(wr.Get(containers[0], "ports").([]any)[0], "containerPort")); got != "80" {
		t.Fatal(got)
	}
	if got := js(t, at(resp.Children[0], "data")); got != `{"index.html":"hi"}` {
		t.Fatal(got)
	}
	if ns, _ := wr.Namespace(resp.Children[0]); ns != "demo" {
		t.Fatal(ns)
	}
	if got, _ := wr.GetString(resp.Status, "url"); got != "http://web.demo.svc.cluster.local/" {
		t.Fatal(got)
	}
	if resp.Conditions[0].Status != wr.StatusUnknown {
		t.Fatal(resp.Conditions[0])
	}
}

func TestContentChangeChangesThePodTemplateAndEmitsAnEvent(t *testing.T) {
	a := run(t, wr.NewRequest(parent(t, `{"image":"x","content":{"a.html":"1"}}`)))
	req := wr.NewRequest(parent(t, `{"image":"x","content":{"a.html":"2"}}`))
	req.Children = []any{a.Children[0]}
	b := run(t, req)
	hash := func(r *wr.Response) any {
		return at(r.Children[1], "spec", "template", "metadata", "annotations", ContentHashAnnotation)
	}
	if hash(a) == hash(b) {
		t.Fatal("the content hash did not change")
	}
	if len(b.Events) != 1 || b.Events[0].Reason != "ContentChanged" || b.Events[0].Message != "content changed, rolling Deployment web" {
		t.Fatal(b.Events)
	}
	// Same content observed again: no event.
	req.Children = []any{b.Children[0]}
	if events := run(t, req).Events; len(events) != 0 {
		t.Fatal(events)
	}
}

func TestAvailabilityFollowsTheObservedDeployment(t *testing.T) {
	req := wr.NewRequest(parent(t, `{"image":"x","replicas":2}`))
	req.Children = []any{parse(t, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"status":{"availableReplicas":1}}`)}
	resp := run(t, req)
	if c := resp.Conditions[0]; c.Status != wr.StatusFalse || c.Message != "1/2 replicas available" || c.Reason != "ReplicasUnavailable" {
		t.Fatal(c)
	}
	wr.Get(req.Children[0], "status").(*wr.Object).Set("availableReplicas", 2)
	resp = run(t, req)
	if c := resp.Conditions[0]; c.Status != wr.StatusTrue || c.Reason != "ReplicasAvailable" {
		t.Fatal(c)
	}
	if got := js(t, wr.Get(resp.Status, "availableReplicas")); got != "2" {
		t.Fatal(got)
	}
	req = wr.NewRequest(parent(t, `{"image":"x","replicas":0}`))
	req.Children = []any{parse(t, `{"kind":"Deployment","metadata":{"name":"web"}}`)}
	if c := run(t, req).Conditions[0]; c.Status != wr.StatusTrue || c.Reason != "ScaledToZero" {
		t.Fatal(c)
	}
}

func TestInvalidSpecsArePermanentErrorsNamingTheField(t *testing.T) {
	cases := []struct{ spec, field string }{
		{`{}`, "spec.image: required"},
		{`{"image":" \t "}`, "spec.image: required"},
		{`{"image":3}`, "spec.image: must be a string"},
		{`{"image":"x","replicas":-1}`, "spec.replicas: must be >= 0, got -1"},
		{`{"image":"x","replicas":"two"}`, "spec.replicas: must be an integer"},
		{`{"image":"x","replicas":1.0}`, "spec.replicas: must be an integer"},
		{`{"image":"x","port":0}`, "spec.port: must be between 1 and 65535, got 0"},
		{`{"image":"x","content":{"a/b":""}}`, `spec.content["a/b"]: file name`},
		{`{"image":"x","content":{"a.html":[1]}}`, `spec.content["a.html"]: must be a string`},
		{`{"image":"x","content":"index.html"}`, "spec.content: must be a map"},
		{`{"image":"x","content":{"a.html":"` + strings.Repeat("€", 349526) + `"}}`, "spec.content: 1048584 bytes is over the limit of 1044480"},
		{`"nope"`, "spec.image: required"},
	}
	for _, c := range cases {
		_, err := Reconcile(wr.NewRequest(parent(t, c.spec)))
		var e *wr.Error
		if !errors.As(err, &e) || !e.IsPermanent() || e.Reason != "InvalidSpec" || !strings.HasPrefix(e.Message, c.field) {
			t.Errorf("%.60s: got %v, want a permanent InvalidSpec starting %q", c.spec, err, c.field)
		}
	}
}

func TestTheFirstInvalidFileInTextOrderIsReported(t *testing.T) {
	_, err := Reconcile(wr.NewRequest(parent(t, `{"image":"x","content":{"z/1":"","a/2":""}}`)))
	if err == nil || !strings.Contains(err.Error(), `spec.content["z/1"]`) {
		t.Fatal(err)
	}
}

func TestConfigSetsTheClusterDomain(t *testing.T) {
	req := wr.NewRequest(parent(t, `{"image":"x","port":8080}`))
	req.Config = parse(t, `{"clusterDomain":"example.internal"}`)
	if got, _ := wr.GetString(run(t, req).Status, "url"); got != "http://web.demo.svc.example.internal:8080/" {
		t.Fatal(got)
	}
	for config, want := range map[string]string{
		`{"nope":1}`:              "config: unknown field `nope`, expected `clusterDomain`",
		`{"clusterDomain":false}`: "config: invalid type: boolean `false`, expected a string",
		`"domain"`:                `config: invalid type: string "domain", expected struct Config`,
		`7`:                       "config: invalid type: integer `7`, expected struct Config",
		`["a","b"]`:               "config: invalid length 2, expected fewer elements in array",
		`[1.5]`:                   "config: invalid type: floating point `1.5`, expected a string",
	} {
		req.Config = parse(t, config)
		_, err := Reconcile(req)
		var e *wr.Error
		if !errors.As(err, &e) || e.Reason != "InvalidConfig" || e.Message != want {
			t.Errorf("%s: got %v, want %q", config, err, want)
		}
	}
	req.Config = parse(t, `["seq.local"]`)
	if got, _ := wr.GetString(run(t, req).Status, "url"); got != "http://web.demo.svc.seq.local:8080/" {
		t.Fatal(got)
	}
}

func TestClusterScopedParent(t *testing.T) {
	p := parse(t, `{"kind":"StaticSite","metadata":{"name":"web"},"spec":{"image":"x","port":81}}`)
	resp := run(t, wr.NewRequest(p))
	if got, _ := wr.GetString(resp.Status, "url"); got != "http://web.svc.cluster.local:81/" {
		t.Fatal(got)
	}
	if _, ok := wr.Namespace(resp.Children[0]); ok {
		t.Fatal("a child of a cluster-scoped parent has no namespace")
	}
	_, err := Reconcile(wr.NewRequest(parse(t, `{"spec":{"image":"x"}}`)))
	if err == nil || !strings.Contains(err.Error(), "InvalidParent") {
		t.Fatal(err)
	}
}

func TestContentHashMatchesTheDocumentedFormula(t *testing.T) {
	spec, err := ParseSpec(parent(t, `{"image":"x","content":{"index.html":"hi"}}`))
	if err != nil {
		t.Fatal(err)
	}
	// printf 'index.html\0hi\0' | sha256sum
	if got := spec.ContentHash(); got != "91060b282a73cb28480f87cd3654ce9941bfee159fc0068c853984453bfc1939" {
		t.Fatal(got)
	}
}

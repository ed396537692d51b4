package wr

import (
	"errors"
	"strings"
	"testing"
)

func TestChildNameMatchesTheRustSDK(t *testing.T) {
	if got := ChildName("web", "config"); got != "web-config" {
		t.Fatal(got)
	}
	if got := ChildName("web", ""); got != "web" {
		t.Fatal(got)
	}
	long := strings.Repeat("a", 70)
	name := ChildName(long, "svc")
	if len(name) != 63 || !IsDNS1123Label(name) || !strings.HasPrefix(name, strings.Repeat("a", 52)+"-") {
		t.Fatal(name)
	}
	if name != ChildName(long, "svc") || name == ChildName(long, "cfg") {
		t.Fatal("names must be deterministic and distinct")
	}
	a, b := ChildName("My.Site", "web"), ChildName("my-site", "web")
	if !IsDNS1123Label(a) || !strings.HasPrefix(a, "my-site-web-") || b != "my-site-web" {
		t.Fatal(a, b)
	}
	// Only invalid characters: a bare hash (printf '\xc3\xbc/' | sha256sum | cut -c1-10).
	if got := ChildName("ü", ""); got != ContentHash([]byte("ü/"))[:10] || len(got) != 10 {
		t.Fatal(got)
	}
}

func TestContentHashIsSHA256Hex(t *testing.T) {
	if got := ContentHash([]byte("abc")); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatal(got)
	}
}

func TestLabelValidation(t *testing.T) {
	for name, want := range map[string]bool{"a-1": true, "-a": false, "A": false, strings.Repeat("a", 64): false, "": false} {
		if IsDNS1123Label(name) != want {
			t.Errorf("%q: want %v", name, want)
		}
	}
}

func TestObjectsAreBuiltAndRead(t *testing.T) {
	cm := NewK8sObject("v1", "ConfigMap", "ns", "c")
	Label(cm, "app", "web")
	Annotate(cm, "a", "b")
	out, _ := ToJSON(cm)
	if want := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns","labels":{"app":"web"},"annotations":{"a":"b"}}}`; out != want {
		t.Fatal(out)
	}
	if k, _ := Kind(cm); k != "ConfigMap" {
		t.Fatal(k)
	}
	if v, ok := LabelOf(cm, "app"); !ok || v != "web" {
		t.Fatal(v)
	}
	if v, ok := AnnotationOf(cm, "a"); !ok || v != "b" {
		t.Fatal(v)
	}
	all := []any{cm, NewK8sObject("v1", "Service", "", "c")}
	if Find(all, "Service", "c") == nil || Find(all, "Secret", "c") != nil {
		t.Fatal("Find")
	}
	if _, ok := Namespace(all[1]); ok {
		t.Fatal("a cluster-scoped object has no namespace")
	}
}

func TestRustParityHelpers(t *testing.T) {
	if !IsBlank(" \t\u00a0\u3000") || IsBlank(" x ") || !IsBlank("") {
		t.Fatal("IsBlank")
	}
	// Rust: format!("{:?}", "a/b\"c\\\n\t\u{1b}é") == "\"a/b\\\"c\\\\\\n\\t\\u{1b}é\""
	if got := DebugQuote("a/b\"c\\\n\t\x1bé\x00"); got != `"a/b\"c\\\n\t\u{1b}é\0"` {
		t.Fatal(got)
	}
	cases := map[string]string{
		"null": "null", "false": "boolean `false`", "7": "integer `7`", "-7": "integer `-7`",
		"18446744073709551615": "integer `18446744073709551615`", "1.5": "floating point `1.5`",
		"1e3": "floating point `1000.0`", `"d"`: `string "d"`, "[]": "sequence", "{}": "map",
	}
	for text, want := range cases {
		v, err := ParseJSON(text)
		if err != nil {
			t.Fatal(err)
		}
		if got := Unexpected(v); got != want {
			t.Errorf("%s: got %s, want %s", text, got, want)
		}
	}
	for text, want := range map[string]bool{"3": true, "-3": true, "3.0": false, "1e2": false, "9223372036854775808": false, `"3"`: false, "true": false} {
		v, _ := ParseJSON(text)
		if _, ok := AsI64(v); ok != want {
			t.Errorf("AsI64(%s) = %v", text, ok)
		}
	}
}

func TestRequestAccessors(t *testing.T) {
	parent, _ := ParseJSON(`{"metadata":{"name":"x","namespace":"n"},"spec":{"a":1}}`)
	req := NewRequest(parent)
	if name, err := req.Name(); err != nil || name != "x" || req.Namespace() != "n" {
		t.Fatal(name, err)
	}
	if Get(req.Spec(), "a") == nil {
		t.Fatal("spec")
	}
	_, err := NewRequest(NewObject()).Name()
	var e *Error
	if !errors.As(err, &e) || !e.IsPermanent() || e.Reason != "InvalidParent" {
		t.Fatal(err)
	}
}

func echo(req *Request) (*Response, error) {
	if req.Finalizing {
		return nil, NewTransient("Later", "not yet")
	}
	if req.Config != nil {
		return nil, errors.New("plain error")
	}
	return NewResponse().
		Child(NewObject("kind", "ConfigMap", "b", 1, "a", 2)).
		Condition(ConditionTrue("Synced", "Done", "")).
		Event(WarningEvent("Odd", "very")).
		RequeueAfter(30).
		SetStatus(NewObject("seen", len(req.Children))), nil
}

func TestDispatchRoundTripsAndKeepsKeyOrder(t *testing.T) {
	out, failure := Dispatch(echo, WireRequest{Parent: "{}", Children: []string{"{}", "[]"}, Now: "2026-01-01T00:00:00Z"})
	if failure != nil {
		t.Fatal(failure)
	}
	if len(out.Children) != 1 || out.Children[0] != `{"kind":"ConfigMap","b":1,"a":2}` {
		t.Fatal(out.Children)
	}
	if out.Status == nil || *out.Status != `{"seen":2}` {
		t.Fatal(out.Status)
	}
	if *out.RequeueAfterSeconds != 30 || out.Events[0].Type != Warning || out.Conditions[0].Status != StatusTrue {
		t.Fatal(out)
	}
}

func TestDispatchMapsErrors(t *testing.T) {
	_, failure := Dispatch(echo, WireRequest{Parent: "{}", Finalizing: true})
	if failure == nil || failure.Kind != Transient || failure.Reason != "Later" {
		t.Fatal(failure)
	}
	_, failure = Dispatch(echo, WireRequest{Parent: "{nope"})
	if failure == nil || !failure.IsPermanent() || failure.Reason != "InvalidRequest" || !strings.HasPrefix(failure.Message, "parent is not valid JSON") {
		t.Fatal(failure)
	}
	_, failure = Dispatch(echo, WireRequest{Parent: "{}", Related: []string{"{}", "x"}})
	if failure == nil || !strings.HasPrefix(failure.Message, "related[1] is not valid JSON") {
		t.Fatal(failure)
	}
	config := "{}"
	_, failure = Dispatch(echo, WireRequest{Parent: "{}", Config: &config})
	if failure == nil || failure.Kind != Transient || failure.Reason != "PluginError" || failure.Message != "plain error" {
		t.Fatal(failure)
	}
	_, failure = Dispatch(nil, WireRequest{Parent: "{}"})
	if failure == nil || failure.Reason != "NoReconciler" {
		t.Fatal(failure)
	}
}

func TestDispatchRethrowsPanics(t *testing.T) {
	defer func() {
		if p := recover(); p != "boom" {
			t.Fatalf("recovered %v", p)
		}
	}()
	Dispatch(func(*Request) (*Response, error) { panic("boom") }, WireRequest{Parent: "{}"})
	t.Fatal("the panic was swallowed")
}

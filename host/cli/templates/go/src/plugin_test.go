package main

import (
	"testing"

	wr "{{name}}/sdk"
)

func parent(spec any) any {
	return wr.NewObject(
		"apiVersion", "{{group}}/v1alpha1",
		"kind", "{{kind}}",
		"metadata", wr.NewObject("name", "hello", "namespace", "default"),
		"spec", spec,
	)
}

func TestRendersTheGreeting(t *testing.T) {
	resp, err := Reconcile(wr.NewRequest(parent(wr.NewObject("message", "hi"))))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Children) != 1 {
		t.Fatalf("want one child, got %d", len(resp.Children))
	}
	if name, _ := wr.Name(resp.Children[0]); name != "hello-greeting" {
		t.Fatalf("child name %q", name)
	}
	if got, _ := wr.GetString(wr.Get(resp.Children[0], "data"), "message"); got != "hi" {
		t.Fatalf("data.message %q", got)
	}
}

func TestAMessageThatIsNotAStringIsAnInvalidSpec(t *testing.T) {
	_, err := Reconcile(wr.NewRequest(parent(wr.NewObject("message", 42))))
	if err == nil {
		t.Fatal("want an error")
	}
}

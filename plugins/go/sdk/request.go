package wr

import "fmt"

// Request is everything a plugin may know when it is called, with every
// JSON text of the WIT record parsed (see Object for the value types).
type Request struct {
	// Parent is the parent object (apiVersion, kind, metadata, spec, status).
	Parent any
	// Children are the observed children controlled by the parent.
	Children []any
	// Related are the objects selected by the controller's related rules.
	Related []any
	// Finalizing: the parent is being deleted and the controller's
	// finalizer is still on it.
	Finalizing bool
	// Config holds the per-controller settings (spec.plugin.config of the
	// WasmController); nil when there are none.
	Config any
	// Now is an RFC 3339 UTC timestamp: the plugin's only clock.
	Now string
}

// NewRequest is a request for parent with nothing else; handy in tests.
func NewRequest(parent any) *Request {
	return &Request{Parent: parent, Now: "1970-01-01T00:00:00Z"}
}

// Name is the parent's metadata.name; a permanent "InvalidParent" error
// if it is missing.
func (r *Request) Name() (string, error) {
	name, ok := Name(r.Parent)
	if !ok {
		return "", NewPermanent("InvalidParent", "parent has no metadata.name")
	}
	return name, nil
}

// Namespace is the parent's metadata.namespace ("" for a cluster-scoped parent).
func (r *Request) Namespace() string {
	ns, _ := Namespace(r.Parent)
	return ns
}

// Spec is the parent's spec (nil when it has none).
func (r *Request) Spec() any { return Get(r.Parent, "spec") }

// Child is the observed child of kind named name, or nil.
func (r *Request) Child(kind, name string) *Object { return Find(r.Children, kind, name) }

// WireRequest is the WIT reconcile-request as it crosses the boundary:
// every object still JSON text.
type WireRequest struct {
	Parent     string
	Children   []string
	Related    []string
	Finalizing bool
	Config     *string
	Now        string
}

// ParseRequest parses a WireRequest; a JSON error is a permanent
// "InvalidRequest" error naming the object.
func ParseRequest(w WireRequest) (*Request, error) {
	parse := func(text, what string) (any, error) {
		v, err := ParseJSON(text)
		if err != nil {
			return nil, NewPermanent("InvalidRequest", fmt.Sprintf("%s is not valid JSON: %v", what, err))
		}
		return v, nil
	}
	req := &Request{Finalizing: w.Finalizing, Now: w.Now}
	var err error
	if req.Parent, err = parse(w.Parent, "parent"); err != nil {
		return nil, err
	}
	for i, c := range w.Children {
		v, err := parse(c, fmt.Sprintf("children[%d]", i))
		if err != nil {
			return nil, err
		}
		req.Children = append(req.Children, v)
	}
	for i, c := range w.Related {
		v, err := parse(c, fmt.Sprintf("related[%d]", i))
		if err != nil {
			return nil, err
		}
		req.Related = append(req.Related, v)
	}
	if w.Config != nil {
		if req.Config, err = parse(*w.Config, "config"); err != nil {
			return nil, err
		}
	}
	return req, nil
}

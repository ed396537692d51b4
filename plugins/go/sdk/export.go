package wr

import (
	"errors"
	"fmt"
)

// ReconcileFunc computes the desired children and status for one parent.
// Pure: the same request must always give the same response. Return a
// *Error for a permanent or transient failure.
type ReconcileFunc func(req *Request) (*Response, error)

var exported ReconcileFunc

// Export makes f the component's reconcile function. Call it from the
// plugin's main package, in an init function:
//
//	func init() { wr.Export(reconcile) }
//	func main() {}
func Export(f ReconcileFunc) { exported = f }

// WireCondition, WireEvent, WireResponse and WireError are the WIT types
// as they cross the boundary (objects as JSON text).
type WireResponse struct {
	Children            []string
	Conditions          []Condition
	Status              *string
	RequeueAfterSeconds *uint32
	Events              []Event
	Finalized           bool
}

// Dispatch parses the request, runs f and serialises the response: the
// whole export glue apart from the canonical ABI, so it is tested natively.
func Dispatch(f ReconcileFunc, w WireRequest) (*WireResponse, *Error) {
	req, err := ParseRequest(w)
	if err != nil {
		return nil, toError(err)
	}
	resp, err := call(f, req)
	if err != nil {
		return nil, toError(err)
	}
	if resp == nil {
		resp = NewResponse()
	}
	out := &WireResponse{
		Conditions:          resp.Conditions,
		RequeueAfterSeconds: resp.RequeueAfterSeconds,
		Events:              resp.Events,
		Finalized:           resp.Finalized,
	}
	for i, c := range resp.Children {
		text, err := ToJSON(c)
		if err != nil {
			return nil, NewPermanent("InvalidResponse", fmt.Sprintf("children[%d]: %v", i, err))
		}
		out.Children = append(out.Children, text)
	}
	if resp.Status != nil {
		text, err := ToJSON(resp.Status)
		if err != nil {
			return nil, NewPermanent("InvalidResponse", fmt.Sprintf("status: %v", err))
		}
		out.Status = &text
	}
	return out, nil
}

// call runs f; a panic is logged through the host's log (so its message
// is not lost) and re-raised, so the call traps and the host reports a
// plugin fault, like a Rust panic.
func call(f ReconcileFunc, req *Request) (resp *Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			Log(LogError, fmt.Sprintf("panic: %v", p))
			panic(p)
		}
	}()
	if f == nil {
		return nil, NewPermanent("NoReconciler", "the plugin never called wr.Export")
	}
	return f(req)
}

func toError(err error) *Error {
	var e *Error
	if errors.As(err, &e) && e != nil {
		return e
	}
	return NewTransient("PluginError", err.Error())
}

package wr

// ConditionStatus is True, False or Unknown.
type ConditionStatus uint8

const (
	StatusTrue ConditionStatus = iota
	StatusFalse
	StatusUnknown
)

func (s ConditionStatus) String() string {
	switch s {
	case StatusTrue:
		return "True"
	case StatusFalse:
		return "False"
	}
	return "Unknown"
}

// Condition is one condition on the parent. The host adds
// observedGeneration and lastTransitionTime, and owns "Ready".
type Condition struct {
	Type    string
	Status  ConditionStatus
	Reason  string
	Message string
}

// ConditionTrue, ConditionFalse and ConditionUnknown build a Condition.
func ConditionTrue(typ, reason, message string) Condition {
	return Condition{typ, StatusTrue, reason, message}
}

func ConditionFalse(typ, reason, message string) Condition {
	return Condition{typ, StatusFalse, reason, message}
}

func ConditionUnknown(typ, reason, message string) Condition {
	return Condition{typ, StatusUnknown, reason, message}
}

// EventType is Normal or Warning.
type EventType uint8

const (
	Normal EventType = iota
	Warning
)

// Event is recorded on the parent as a Kubernetes Event; the host
// deduplicates events, so a plugin may emit the same one on every call.
type Event struct {
	Type    EventType
	Reason  string
	Message string
}

// NormalEvent and WarningEvent build an Event.
func NormalEvent(reason, message string) Event  { return Event{Normal, reason, message} }
func WarningEvent(reason, message string) Event { return Event{Warning, reason, message} }

// Response is what the plugin wants: the complete desired set of children
// (an observed child missing from it is deleted), conditions, a status
// patch, events. Build it with the chaining methods.
type Response struct {
	Children            []any
	Conditions          []Condition
	Status              any // merged into the parent's .status; nil for none
	RequeueAfterSeconds *uint32
	Events              []Event
	Finalized           bool
}

// NewResponse returns an empty response.
func NewResponse() *Response { return &Response{} }

// Child adds a desired child (an object with apiVersion, kind, metadata.name).
func (r *Response) Child(obj any) *Response { r.Children = append(r.Children, obj); return r }

// Condition adds a condition.
func (r *Response) Condition(c Condition) *Response {
	r.Conditions = append(r.Conditions, c)
	return r
}

// SetStatus sets the JSON object merged into the parent's .status.
func (r *Response) SetStatus(status any) *Response { r.Status = status; return r }

// RequeueAfter asks to be called again after seconds even if nothing changes.
func (r *Response) RequeueAfter(seconds uint32) *Response {
	r.RequeueAfterSeconds = &seconds
	return r
}

// Event adds an event.
func (r *Response) Event(e Event) *Response { r.Events = append(r.Events, e); return r }

// SetFinalized reports that teardown is complete (only read when the
// request was finalizing).
func (r *Response) SetFinalized(done bool) *Response { r.Finalized = done; return r }

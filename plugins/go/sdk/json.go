package wr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"unicode/utf8"
)

// Object is a JSON object that keeps its keys in order, like the Rust SDK's
// serde_json (built with `preserve_order`): a parsed object iterates in the
// order of its text, and one built by a plugin serialises in the order its
// keys were set. A key set twice keeps its first place.
//
// JSON values in this SDK are: nil (null), bool, json.Number (numbers keep
// their text, so 2.0 stays a float as in serde_json), string, []any and
// *Object. A plugin may also put int, int64, float64, string maps and
// slices, or any value encoding/json can marshal, into an Object.
type Object struct {
	keys []string
	vals map[string]any
}

// NewObject returns an object with the given key/value pairs, in order:
// NewObject("name", "web", "port", 80).
func NewObject(pairs ...any) *Object {
	o := &Object{vals: make(map[string]any, len(pairs)/2)}
	for i := 0; i+1 < len(pairs); i += 2 {
		key, ok := pairs[i].(string)
		if !ok {
			panic(fmt.Sprintf("wr.NewObject: key %d is %T, not a string", i/2, pairs[i]))
		}
		o.Set(key, pairs[i+1])
	}
	return o
}

// Set sets key to value (keeping the key's place if it is already there)
// and returns the object, so calls chain.
func (o *Object) Set(key string, value any) *Object {
	if o.vals == nil {
		o.vals = map[string]any{}
	}
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = value
	return o
}

// Get returns the value of key and whether it is present.
func (o *Object) Get(key string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.vals[key]
	return v, ok
}

// Delete removes key.
func (o *Object) Delete(key string) {
	if o == nil {
		return
	}
	if _, ok := o.vals[key]; !ok {
		return
	}
	delete(o.vals, key)
	for i, k := range o.keys {
		if k == key {
			o.keys = append(o.keys[:i], o.keys[i+1:]...)
			break
		}
	}
}

// Keys returns the keys in order.
func (o *Object) Keys() []string {
	if o == nil {
		return nil
	}
	return append([]string(nil), o.keys...)
}

// Len is the number of keys.
func (o *Object) Len() int {
	if o == nil {
		return 0
	}
	return len(o.keys)
}

// MarshalJSON writes the object with its keys in order.
func (o *Object) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	if err := writeJSON(&buf, o); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Get returns v[key] when v is an object that has key, else nil: a safe
// walk through parsed JSON, Get(Get(obj, "spec"), "replicas").
func Get(v any, key string) any {
	o, ok := v.(*Object)
	if !ok {
		return nil
	}
	val, _ := o.Get(key)
	return val
}

// GetString returns v[key] when it is a string.
func GetString(v any, key string) (string, bool) {
	s, ok := Get(v, key).(string)
	return s, ok
}

// ParseJSON parses one JSON text into the SDK's values (see Object).
func ParseJSON(text string) (any, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing characters after the JSON value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("unexpected end of input")
		}
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &Object{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string: %v", kt)
				}
				val, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				o.Set(key, val)
			}
			if _, err := dec.Token(); err != nil { // '}'
				return nil, err
			}
			return o, nil
		case '[':
			arr := []any{}
			for dec.More() {
				val, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, val)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, err
			}
			return arr, nil
		default:
			return nil, fmt.Errorf("unexpected %v", t)
		}
	default: // nil, bool, json.Number, string
		return tok, nil
	}
}

// ToJSON serialises a value (see Object) to compact JSON text. Strings are
// written as UTF-8 without HTML escaping, as serde_json does.
func ToJSON(v any) (string, error) {
	var buf bytes.Buffer
	if err := writeJSON(&buf, v); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func writeJSON(buf *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(t))
	case string:
		writeString(buf, t)
	case json.Number:
		if !json.Valid([]byte(t)) {
			return fmt.Errorf("invalid number %q", string(t))
		}
		buf.WriteString(string(t))
	case int:
		buf.WriteString(strconv.FormatInt(int64(t), 10))
	case int32:
		buf.WriteString(strconv.FormatInt(int64(t), 10))
	case int64:
		buf.WriteString(strconv.FormatInt(t, 10))
	case uint32:
		buf.WriteString(strconv.FormatUint(uint64(t), 10))
	case uint64:
		buf.WriteString(strconv.FormatUint(t, 10))
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			buf.WriteString("null") // as serde_json writes a non-finite f64
		} else {
			buf.WriteString(FormatFloat(t))
		}
	case *Object:
		if t == nil {
			buf.WriteString("null")
			return nil
		}
		buf.WriteByte('{')
		for i, k := range t.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			if err := writeJSON(buf, t.vals[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case []string:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, e)
		}
		buf.WriteByte(']')
	case map[string]string:
		o := &Object{vals: make(map[string]any, len(t))}
		for _, k := range sortedKeys(t) {
			o.Set(k, t[k])
		}
		return writeJSON(buf, o)
	case map[string]any:
		o := &Object{vals: make(map[string]any, len(t))}
		for _, k := range sortedKeys(t) {
			o.Set(k, t[k])
		}
		return writeJSON(buf, o)
	default:
		// Anything else encoding/json can marshal (structs with json tags,
		// other number types), re-encoded through the same writer.
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
			buf.WriteString("null")
			return nil
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		parsed, err := ParseJSON(string(raw))
		if err != nil {
			return err
		}
		return writeJSON(buf, parsed)
	}
	return nil
}

// sortedKeys returns a Go map's keys sorted (Go maps have no order; sorted
// is what serde_json writes for a BTreeMap).
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// writeString quotes s as serde_json does: escapes '"', '\\' and control
// characters below U+0020, everything else as UTF-8 (invalid bytes become
// U+FFFD, as a WIT string must be valid UTF-8).
func writeString(buf *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	buf.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				buf.WriteString(`\"`)
			case c == '\\':
				buf.WriteString(`\\`)
			case c == '\n':
				buf.WriteString(`\n`)
			case c == '\r':
				buf.WriteString(`\r`)
			case c == '\t':
				buf.WriteString(`\t`)
			case c == '\b':
				buf.WriteString(`\b`)
			case c == '\f':
				buf.WriteString(`\f`)
			case c < 0x20:
				buf.WriteString(`\u00`)
				buf.WriteByte(hex[c>>4])
				buf.WriteByte(hex[c&0xf])
			default:
				buf.WriteByte(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf.WriteString("\ufffd")
		} else {
			buf.WriteString(s[i : i+size])
		}
		i += size
	}
	buf.WriteByte('"')
}

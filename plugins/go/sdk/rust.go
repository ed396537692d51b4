package wr

// Helpers that make a Go plugin give byte-identical answers to a Rust
// plugin for the same input: serde_json's idea of an integer, Rust's
// trim() whitespace, Rust's {:?} quoting and serde's wording for an
// unexpected value (for error messages that must match).

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// AsI64 returns v as an int64 when it is an integer that fits (Rust
// Value::as_i64): a JSON number written without fraction or exponent, or a
// Go integer. 2.0 and 1e3 are floats to serde_json, so not integers here.
func AsI64(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, 64)
		return i, err == nil
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint32:
		return int64(n), true
	case uint64:
		if n > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}

// IsBlank reports whether s is empty or only whitespace (Rust's
// s.trim().is_empty(): Unicode White_Space, which is what unicode.IsSpace
// tests).
func IsBlank(s string) bool {
	return strings.TrimFunc(s, unicode.IsSpace) == ""
}

// DebugQuote quotes s the way Rust's format!("{:?}", s) does, for error
// messages that name a map key: \" \\ \n \r \t \0 and \u{..} for other
// characters that are not graphic.
func DebugQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == 0:
			b.WriteString(`\0`)
		case r == ' ' || unicode.IsGraphic(r):
			b.WriteRune(r)
		default:
			b.WriteString(`\u{` + strconv.FormatInt(int64(r), 16) + `}`)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// FormatFloat writes f as Rust's Display does (shortest round-trip digits,
// never an exponent).
func FormatFloat(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// Unexpected describes a JSON value in serde's words ("integer `7`",
// "string \"x\"", "map", ...), for messages like serde_json's
// "invalid type: ..., expected ...".
func Unexpected(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean `" + strconv.FormatBool(t) + "`"
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return "integer `" + strconv.FormatInt(i, 10) + "`"
		}
		if u, err := strconv.ParseUint(string(t), 10, 64); err == nil {
			return "integer `" + strconv.FormatUint(u, 10) + "`"
		}
		f, _ := t.Float64()
		text := FormatFloat(f)
		if !strings.ContainsAny(text, ".") && !math.IsInf(f, 0) && !math.IsNaN(f) {
			text += ".0" // serde writes a float with a decimal point
		}
		return "floating point `" + text + "`"
	case string:
		return "string " + DebugQuote(t)
	case []any:
		return "sequence"
	case *Object:
		return "map"
	}
	if i, ok := AsI64(v); ok {
		return "integer `" + strconv.FormatInt(i, 10) + "`"
	}
	return "map"
}

package wr

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxLabelLen is the longest DNS-1123 label (Service names; a safe bound
// for every kind).
const MaxLabelLen = 63

// hashLen is how many hex characters of a hash a shortened name gets.
const hashLen = 10

// ChildName is the name for a child of parent with suffix:
// ChildName("web", "config") is "web-config", ChildName("web", "") is "web".
// Always a valid DNS-1123 label. Invalid characters become '-'; when the
// name had to change or is too long it is cut and "-<10 hex of
// sha256(parent/suffix)>" appended, so distinct inputs keep distinct names.
// Same results as the Rust SDK's child_name, so a plugin ported between
// languages keeps its children's names.
func ChildName(parent, suffix string) string {
	raw := parent
	if suffix != "" {
		raw = parent + "-" + suffix
	}
	clean := sanitize(raw)
	if len(clean) <= MaxLabelLen && clean == raw && clean != "" {
		return clean
	}
	hash := ContentHash([]byte(parent + "/" + suffix))[:hashLen]
	keep := MaxLabelLen - hashLen - 1
	prefix := strings.TrimRight(clean[:min(len(clean), keep)], "-")
	if prefix == "" {
		return hash
	}
	return prefix + "-" + hash
}

// ContentHash is the lowercase hex SHA-256 of b; use it for content-hash
// annotations so a change of content rolls the pods that use it.
func ContentHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// IsDNS1123Label reports whether name is a valid DNS-1123 label.
func IsDNS1123Label(name string) bool {
	if name == "" || len(name) > MaxLabelLen || name[0] == '-' || name[len(name)-1] == '-' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// sanitize maps each Unicode scalar value (as Rust's chars()) to itself
// when it is a lowercase ASCII letter or digit after ASCII lowercasing,
// else to '-', then trims '-' from both ends.
func sanitize(raw string) string {
	var b strings.Builder
	for _, r := range raw {
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

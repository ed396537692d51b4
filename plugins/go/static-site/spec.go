package main

// The StaticSite spec and the controller config, validated with messages
// that name the offending field (the same messages as plugins/static-site).

import (
	"fmt"
	"sort"

	wr "wasm-reconciler.dev/go/sdk"
)

// MaxContentBytes is the largest total content: a ConfigMap holds at most 1 MiB.
const MaxContentBytes = 1024*1024 - 4096

const defaultDomain = "cluster.local"

// File is one file of spec.content.
type File struct{ Name, Body string }

// SiteSpec is a validated spec.
type SiteSpec struct {
	Image    string
	Replicas int64
	Port     int64
	// Content holds the files sorted by name.
	Content []File
}

// Config holds the per-controller settings.
type Config struct {
	// ClusterDomain is the DNS suffix used in status.url (default cluster.local).
	ClusterDomain string
}

// ParseSpec reads and validates parent.spec.
func ParseSpec(parent any) (*SiteSpec, error) {
	spec := wr.Get(parent, "spec")
	image, isString := wr.Get(spec, "image").(string)
	switch raw := wr.Get(spec, "image"); {
	case raw == nil, isString && wr.IsBlank(image):
		return nil, wr.InvalidSpec("spec.image", "required")
	case !isString:
		return nil, wr.InvalidSpec("spec.image", "must be a string")
	}
	replicas, err := intField(spec, "replicas", 1)
	if err != nil {
		return nil, err
	}
	if replicas < 0 {
		return nil, wr.InvalidSpec("spec.replicas", fmt.Sprintf("must be >= 0, got %d", replicas))
	}
	port, err := intField(spec, "port", 80)
	if err != nil {
		return nil, err
	}
	if port < 1 || port > 65535 {
		return nil, wr.InvalidSpec("spec.port", fmt.Sprintf("must be between 1 and 65535, got %d", port))
	}
	content, err := contentField(spec)
	if err != nil {
		return nil, err
	}
	return &SiteSpec{Image: image, Replicas: replicas, Port: port, Content: content}, nil
}

// ContentHash is the sha256 (hex) over each file in name order as
// `name NUL contents NUL`.
func (s *SiteSpec) ContentHash() string {
	var b []byte
	for _, f := range s.Content {
		b = append(b, f.Name...)
		b = append(b, 0)
		b = append(b, f.Body...)
		b = append(b, 0)
	}
	return wr.ContentHash(b)
}

// ParseConfig reads the controller config ({clusterDomain}), checked like
// serde's deny_unknown_fields with serde_json's messages.
func ParseConfig(config any) (Config, error) {
	out := Config{ClusterDomain: defaultDomain}
	switch c := config.(type) {
	case nil:
		return out, nil
	case []any:
		// serde also accepts a struct as a sequence of its fields; a
		// missing field takes its default.
		if len(c) > 0 {
			domain, err := domainValue(c[0])
			if err != nil {
				return out, err
			}
			out.ClusterDomain = domain
		}
		if len(c) > 1 {
			return out, invalidConfig(fmt.Sprintf("invalid length %d, expected fewer elements in array", len(c)))
		}
		return out, nil
	case *wr.Object:
		for _, key := range c.Keys() {
			if key != "clusterDomain" {
				return out, invalidConfig(fmt.Sprintf("unknown field `%s`, expected `clusterDomain`", key))
			}
			value, _ := c.Get(key)
			domain, err := domainValue(value)
			if err != nil {
				return out, err
			}
			out.ClusterDomain = domain
		}
		return out, nil
	default:
		return out, invalidConfig(fmt.Sprintf("invalid type: %s, expected struct Config", wr.Unexpected(config)))
	}
}

func domainValue(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", invalidConfig(fmt.Sprintf("invalid type: %s, expected a string", wr.Unexpected(v)))
	}
	return s, nil
}

func invalidConfig(problem string) error {
	return wr.NewPermanent("InvalidConfig", "config: "+problem)
}

func intField(spec any, field string, fallback int64) (int64, error) {
	v := wr.Get(spec, field)
	if v == nil {
		return fallback, nil
	}
	n, ok := wr.AsI64(v)
	if !ok {
		return 0, wr.InvalidSpec("spec."+field, "must be an integer")
	}
	return n, nil
}

// contentField is spec.content as files sorted by name (byte order),
// validated in the order of the JSON text, as the Rust plugin does.
func contentField(spec any) ([]File, error) {
	raw := wr.Get(spec, "content")
	if raw == nil {
		return nil, nil
	}
	m, ok := raw.(*wr.Object)
	if !ok {
		return nil, wr.InvalidSpec("spec.content", "must be a map of file name to contents")
	}
	total := 0
	files := make([]File, 0, m.Len())
	for _, name := range m.Keys() {
		if !validKey(name) {
			return nil, wr.InvalidSpec("spec.content["+wr.DebugQuote(name)+"]",
				"file name must be 1-253 characters of letters, digits, '-', '_' or '.'")
		}
		value, _ := m.Get(name)
		body, ok := value.(string)
		if !ok {
			return nil, wr.InvalidSpec("spec.content["+wr.DebugQuote(name)+"]", "must be a string")
		}
		total += len(name) + len(body)
		files = append(files, File{name, body})
	}
	if total > MaxContentBytes {
		return nil, wr.InvalidSpec("spec.content", fmt.Sprintf("%d bytes is over the limit of %d", total, MaxContentBytes))
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, nil
}

// validKey reports whether key is a valid ConfigMap key.
func validKey(key string) bool {
	if key == "" || len(key) > 253 || key == "." || key == ".." {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

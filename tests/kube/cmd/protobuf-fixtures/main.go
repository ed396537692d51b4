// Command protobuf-fixtures is the reference for the embedded API server's
// protobuf codec: for every kind the Kubernetes schemes register it fills an
// object with random values (Kubernetes' own fuzzer functions), and prints
// what Go makes of it, one JSON line per kind:
//
//	{"apiVersion": …, "kind": …, "protobuf": "<base64 of k8s\0 + Unknown>", "json": …}
//
// where "json" is json.Marshal of the object Go decodes from those bytes.
//
// host/apiserver/tests/protobuf_go.rs decodes each protobuf with the Rust
// codec and compares with Go's JSON. Usage: go run ./cmd/protobuf-fixtures SEED
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"reflect"
	"sort"
	"strconv"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/randfill"
)

// The CRD schema types hold raw JSON and either-or unions; fill them with
// valid, shallow values (the apiextensions fuzzer covers internal types only).
func schemaV1(s *apiextensionsv1.JSONSchemaProps, c randfill.Continue) {
	max := c.Rand.Float64() * 100
	s.Type = "object"
	s.Description = c.String(0)
	s.Maximum = &max
	s.Properties = map[string]apiextensionsv1.JSONSchemaProps{
		"size": {Type: "integer", Default: &apiextensionsv1.JSON{Raw: []byte(strconv.Itoa(c.Intn(9)))}},
		"mode": {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"a"`)}, {Raw: []byte(`"b"`)}}},
		"list": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
	}
	if c.Bool() {
		s.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: c.Bool()}
	} else {
		s.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}
	}
	s.Dependencies = apiextensionsv1.JSONSchemaDependencies{"mode": {Property: []string{"size"}}}
	preserve := c.Bool()
	s.XPreserveUnknownFields = &preserve
	s.XListMapKeys = []string{c.String(0)}
	s.Ref = nil
}

func schemaV1beta1(s *apiextensionsv1beta1.JSONSchemaProps, c randfill.Continue) {
	s.Type = "object"
	s.Description = c.String(0)
	s.Properties = map[string]apiextensionsv1beta1.JSONSchemaProps{
		"size": {Type: "integer", Example: &apiextensionsv1beta1.JSON{Raw: []byte(`{"a":1}`)}},
		"list": {Type: "array", Items: &apiextensionsv1beta1.JSONSchemaPropsOrArray{JSONSchemas: []apiextensionsv1beta1.JSONSchemaProps{{Type: "string"}}}},
	}
	s.AdditionalItems = &apiextensionsv1beta1.JSONSchemaPropsOrBool{Allows: c.Bool()}
	s.XIntOrString = c.Bool()
}

func main() {
	seed := int64(1)
	if len(os.Args) > 1 {
		seed, _ = strconv.ParseInt(os.Args[1], 10, 64)
	}
	s := runtime.NewScheme()
	must(scheme.AddToScheme(s))
	must(apiextensionsv1.AddToScheme(s))
	must(apiextensionsv1beta1.AddToScheme(s))
	must(apiregistrationv1.AddToScheme(s))
	codecs := serializer.NewCodecFactory(s)
	funcs := fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, func(serializer.CodecFactory) []interface{} {
		return []interface{}{schemaV1, schemaV1beta1}
	})
	f := fuzzer.FuzzerFor(funcs, rand.NewSource(seed), codecs).NilChance(0.3).NumElements(1, 2).MaxDepth(12)
	pb := protobuf.NewSerializer(s, s)

	gvks := []schema.GroupVersionKind{}
	for gvk, t := range s.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || t.PkgPath() == "" {
			continue
		}
		gvks = append(gvks, gvk)
	}
	sort.Slice(gvks, func(i, j int) bool { return gvks[i].String() < gvks[j].String() })
	out := json.NewEncoder(os.Stdout)
	for _, gvk := range gvks {
		obj, ok := reflect.New(s.AllKnownTypes()[gvk]).Interface().(runtime.Object)
		if !ok {
			continue
		}
		f.Fill(obj)
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		var buf bytes.Buffer
		if err := pb.Encode(obj, &buf); err != nil {
			fmt.Fprintf(os.Stderr, "skip %s: no protobuf: %v\n", gvk, err)
			continue
		}
		// What a server makes of these bytes: Go's decoder, then its JSON.
		decoded, _, err := pb.Decode(buf.Bytes(), nil, nil)
		if err != nil {
			fmt.Fprintf(os.Stderr, "skip %s: protobuf does not decode: %v\n", gvk, err)
			continue
		}
		decoded.GetObjectKind().SetGroupVersionKind(gvk)
		j, err := json.Marshal(decoded)
		if err != nil {
			fmt.Fprintf(os.Stderr, "skip %s: no JSON: %v\n", gvk, err)
			continue
		}
		must(out.Encode(map[string]interface{}{
			"apiVersion": gvk.GroupVersion().String(),
			"kind":       gvk.Kind,
			"protobuf":   base64.StdEncoding.EncodeToString(buf.Bytes()),
			"json":       json.RawMessage(j),
		}))
	}
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

package wr

import (
	"encoding/json"
	"testing"
)

func TestParseKeepsKeyOrderAndNumberText(t *testing.T) {
	v, err := ParseJSON(`{"b":1,"a":[2.0,"x",null,true],"c":{"z":1e3,"y":-7}}`)
	if err != nil {
		t.Fatal(err)
	}
	o := v.(*Object)
	if got := o.Keys(); len(got) != 3 || got[0] != "b" || got[1] != "a" || got[2] != "c" {
		t.Fatalf("keys %v", got)
	}
	out, err := ToJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"b":1,"a":[2.0,"x",null,true],"c":{"z":1e3,"y":-7}}`; out != want {
		t.Fatalf("got %s, want %s", out, want)
	}
	if _, ok := AsI64(Get(o, "b")); !ok {
		t.Fatal("1 is an integer")
	}
	if _, ok := AsI64(v.(*Object).vals["a"].([]any)[0]); ok {
		t.Fatal("2.0 is a float to serde_json, not an integer")
	}
}

func TestDuplicateKeyKeepsFirstPlaceLastValue(t *testing.T) {
	v, err := ParseJSON(`{"a":1,"b":2,"a":3}`)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := ToJSON(v)
	if out != `{"a":3,"b":2}` {
		t.Fatal(out)
	}
}

func TestParseRejectsBadJSON(t *testing.T) {
	for _, text := range []string{``, `{`, `{"a":}`, `[1,]`, `{} {}`, `nope`} {
		if _, err := ParseJSON(text); err == nil {
			t.Errorf("%q: parsed", text)
		}
	}
}

func TestStringsAreEscapedLikeSerdeJSON(t *testing.T) {
	out, err := ToJSON(NewObject("s", "<a href=\"x\">&\u00e9\n\x01\\</a>", "bad", "\xff"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"s":"<a href=\"x\">&é\n\u0001\\</a>","bad":"` + "\ufffd" + `"}`
	if out != want {
		t.Fatalf("got %s\nwant %s", out, want)
	}
	// And encoding/json reads it back to the same strings.
	var back map[string]string
	if err := json.Unmarshal([]byte(out), &back); err != nil || back["s"] != "<a href=\"x\">&\u00e9\n\x01\\</a>" {
		t.Fatalf("%v %q", err, back["s"])
	}
}

func TestGoValuesSerialise(t *testing.T) {
	type port struct {
		Name string `json:"name"`
		Port int    `json:"port"`
	}
	var nilObj *Object
	out, err := ToJSON([]any{int64(-3), uint32(4), 1.5, 2.0, map[string]any{"b": 1, "a": "x"}, []string{"p"}, port{"http", 80}, nilObj})
	if err != nil {
		t.Fatal(err)
	}
	if want := `[-3,4,1.5,2,{"a":"x","b":1},["p"],{"name":"http","port":80},null]`; out != want {
		t.Fatalf("got %s, want %s", out, want)
	}
}

func TestObjectSetGetDelete(t *testing.T) {
	o := NewObject("a", 1, "b", 2)
	o.Set("a", 9).Set("c", 3)
	o.Delete("b")
	out, _ := ToJSON(o)
	if out != `{"a":9,"c":3}` || o.Len() != 2 {
		t.Fatal(out)
	}
	if Get("not an object", "a") != nil || Get(nil, "a") != nil {
		t.Fatal("Get on a non-object must be nil")
	}
}

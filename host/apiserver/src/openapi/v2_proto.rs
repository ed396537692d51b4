//! The v2 document in gnostic's protobuf form
//! (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`), the only
//! form client-go's `OpenAPISchema()` — and so kubectl's client-side
//! validation and its apply fallback — can read.
//!
//! Hand-written encoder: only the messages a Kubernetes document uses
//! (Document, PathItem, Operation, Parameter, Response, Schema) are needed,
//! for which generated bindings of gnostic's whole `OpenAPIv2.proto` (and a
//! protoc step in the build) would be far larger. Field numbers are those of
//! `github.com/google/gnostic-models/openapiv2/OpenAPIv2.proto`. Extension,
//! default, enum and example values travel as `Any.yaml`, which gnostic
//! fills with YAML; JSON is YAML, so they are written as JSON.

use serde_json::{Map, Value};

/// A protobuf message being written.
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint((u64::from(field) << 3) | u64::from(wire));
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    /// A proto3 string (omitted when empty).
    fn string(&mut self, field: u32, s: &str) {
        if !s.is_empty() {
            self.bytes(field, s.as_bytes());
        }
    }

    fn message(&mut self, field: u32, m: Msg) {
        self.bytes(field, &m.0);
    }

    /// A proto3 bool; `always` writes `false` too (a oneof member).
    fn bool(&mut self, field: u32, b: bool, always: bool) {
        if b || always {
            self.key(field, 0);
            self.varint(u64::from(b));
        }
    }

    fn double(&mut self, field: u32, d: f64) {
        self.key(field, 1);
        self.0.extend_from_slice(&d.to_le_bytes());
    }

    fn int64(&mut self, field: u32, i: i64) {
        self.key(field, 0);
        self.varint(i as u64);
    }
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// `Any { yaml = 2 }`.
fn any(v: &Value) -> Msg {
    let mut m = Msg::default();
    m.string(2, &serde_json::to_string(v).unwrap_or_default());
    m
}

/// `NamedAny { name = 1; value = 2 }`.
fn named_any(name: &str, v: &Value) -> Msg {
    let mut m = Msg::default();
    m.string(1, name);
    m.message(2, any(v));
    m
}

fn schema(v: &Value) -> Msg {
    let mut m = Msg::default();
    let Some(obj) = v.as_object() else {
        return m;
    };
    for (k, x) in obj {
        match k.as_str() {
            "$ref" => m.string(1, str_of(x)),
            "format" => m.string(2, str_of(x)),
            "title" => m.string(3, str_of(x)),
            "description" => m.string(4, str_of(x)),
            "default" => m.message(5, any(x)),
            "multipleOf" => m.double(6, x.as_f64().unwrap_or(0.0)),
            "maximum" => m.double(7, x.as_f64().unwrap_or(0.0)),
            "exclusiveMaximum" => m.bool(8, x.as_bool().unwrap_or(false), false),
            "minimum" => m.double(9, x.as_f64().unwrap_or(0.0)),
            "exclusiveMinimum" => m.bool(10, x.as_bool().unwrap_or(false), false),
            "maxLength" => m.int64(11, x.as_i64().unwrap_or(0)),
            "minLength" => m.int64(12, x.as_i64().unwrap_or(0)),
            "pattern" => m.string(13, str_of(x)),
            "maxItems" => m.int64(14, x.as_i64().unwrap_or(0)),
            "minItems" => m.int64(15, x.as_i64().unwrap_or(0)),
            "uniqueItems" => m.bool(16, x.as_bool().unwrap_or(false), false),
            "maxProperties" => m.int64(17, x.as_i64().unwrap_or(0)),
            "minProperties" => m.int64(18, x.as_i64().unwrap_or(0)),
            "required" => {
                for r in x.as_array().into_iter().flatten() {
                    m.bytes(19, str_of(r).as_bytes());
                }
            }
            "enum" => {
                for e in x.as_array().into_iter().flatten() {
                    m.message(20, any(e));
                }
            }
            "additionalProperties" => {
                let mut item = Msg::default();
                match x {
                    Value::Bool(b) => item.bool(2, *b, true),
                    other => item.message(1, schema(other)),
                }
                m.message(21, item);
            }
            "type" => {
                let mut t = Msg::default();
                match x {
                    Value::Array(a) => a.iter().for_each(|s| t.bytes(1, str_of(s).as_bytes())),
                    s => t.bytes(1, str_of(s).as_bytes()),
                }
                m.message(22, t);
            }
            "items" => {
                let mut items = Msg::default();
                match x {
                    Value::Array(a) => a.iter().for_each(|s| items.message(1, schema(s))),
                    s => items.message(1, schema(s)),
                }
                m.message(23, items);
            }
            "allOf" => {
                for s in x.as_array().into_iter().flatten() {
                    m.message(24, schema(s));
                }
            }
            "properties" => {
                let mut props = Msg::default();
                for (name, s) in x.as_object().into_iter().flatten() {
                    props.message(1, named_schema(name, s));
                }
                m.message(25, props);
            }
            "discriminator" => m.string(26, str_of(x)),
            "readOnly" => m.bool(27, x.as_bool().unwrap_or(false), false),
            "example" => m.message(30, any(x)),
            ext if ext.starts_with("x-") => m.message(31, named_any(ext, x)),
            _ => {}
        }
    }
    m
}

/// `NamedSchema { name = 1; value = 2 }`.
fn named_schema(name: &str, v: &Value) -> Msg {
    let mut m = Msg::default();
    m.string(1, name);
    m.message(2, schema(v));
    m
}

/// `ParametersItem { parameter = 1 }` of a body, query or path parameter.
fn parameter(p: &Value) -> Msg {
    let mut param = Msg::default();
    match str_of(&p["in"]) {
        "body" => {
            let mut b = Msg::default();
            b.string(1, str_of(&p["description"]));
            b.string(2, str_of(&p["name"]));
            b.string(3, "body");
            b.bool(4, p["required"].as_bool().unwrap_or(false), false);
            b.message(5, schema(&p["schema"]));
            param.message(1, b);
        }
        location => {
            // Query and path sub-schemas differ in field numbers after `name`.
            let path = location == "path";
            let mut s = Msg::default();
            s.bool(1, p["required"].as_bool().unwrap_or(false), false);
            s.string(2, location);
            s.string(3, str_of(&p["description"]));
            s.string(4, str_of(&p["name"]));
            s.string(if path { 5 } else { 6 }, str_of(&p["type"]));
            s.bool(
                if path { 19 } else { 20 },
                p["uniqueItems"].as_bool().unwrap_or(false),
                false,
            );
            let mut nb = Msg::default();
            nb.message(if path { 4 } else { 3 }, s);
            param.message(2, nb);
        }
    }
    let mut item = Msg::default();
    item.message(1, param);
    item
}

fn operation(op: &Value) -> Msg {
    let mut m = Msg::default();
    let strings = |m: &mut Msg, field: u32, v: &Value| {
        for s in v.as_array().into_iter().flatten() {
            m.bytes(field, str_of(s).as_bytes());
        }
    };
    m.string(3, str_of(&op["description"]));
    m.string(5, str_of(&op["operationId"]));
    strings(&mut m, 6, &op["produces"]);
    strings(&mut m, 7, &op["consumes"]);
    for p in op["parameters"].as_array().into_iter().flatten() {
        m.message(8, parameter(p));
    }
    let mut responses = Msg::default();
    for (code, r) in op["responses"].as_object().into_iter().flatten() {
        let mut resp = Msg::default();
        resp.string(1, str_of(&r["description"]));
        if r.get("schema").is_some() {
            let mut item = Msg::default();
            item.message(1, schema(&r["schema"]));
            resp.message(2, item);
        }
        let mut value = Msg::default();
        value.message(1, resp);
        let mut named = Msg::default();
        named.string(1, code);
        named.message(2, value);
        responses.message(1, named);
    }
    m.message(9, responses);
    strings(&mut m, 10, &op["schemes"]);
    for (k, x) in op.as_object().into_iter().flatten() {
        if k.starts_with("x-") {
            m.message(13, named_any(k, x));
        }
    }
    m
}

fn path_item(item: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    for (method, field) in [
        ("get", 2),
        ("put", 3),
        ("post", 4),
        ("delete", 5),
        ("patch", 8),
    ] {
        if let Some(op) = item.get(method) {
            m.message(field, operation(op));
        }
    }
    for p in item
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(9, parameter(p));
    }
    m
}

/// Encode a v2 document (as [`super::v2`] builds it) as a gnostic `Document`.
pub fn encode(doc: &Value) -> Vec<u8> {
    let mut d = Msg::default();
    d.string(1, str_of(&doc["swagger"]));
    let mut info = Msg::default();
    info.string(1, str_of(&doc["info"]["title"]));
    info.string(2, str_of(&doc["info"]["version"]));
    d.message(2, info);
    let mut paths = Msg::default();
    for (p, item) in doc["paths"].as_object().into_iter().flatten() {
        let mut named = Msg::default();
        named.string(1, p);
        named.message(2, path_item(item.as_object().unwrap_or(&Map::new())));
        paths.message(2, named);
    }
    d.message(8, paths);
    let mut defs = Msg::default();
    for (name, s) in doc["definitions"].as_object().into_iter().flatten() {
        defs.message(1, named_schema(name, s));
    }
    d.message(9, defs);
    d.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn varints_and_keys_follow_the_wire_format() {
        let mut m = Msg::default();
        m.varint(300);
        assert_eq!(m.0, [0xac, 0x02]);
        let mut m = Msg::default();
        m.string(1, "2.0");
        assert_eq!(m.0, [0x0a, 3, b'2', b'.', b'0']);
    }

    #[test]
    fn schema_fields_use_gnostic_numbers() {
        let s = schema(&json!({"type": "string", "x-kubernetes-int-or-string": true}));
        // type = 22 (TypeItem{value="string"}), then vendor_extension = 31.
        assert_eq!(&s.0[..2], &[0xb2, 0x01]);
        let ext = [0xfa, 0x01];
        assert!(s.0.windows(2).any(|w| w == ext));
        let b = schema(&json!({"additionalProperties": false}));
        assert_eq!(b.0, [0xaa, 0x01, 2, 0x10, 0]);
    }
}

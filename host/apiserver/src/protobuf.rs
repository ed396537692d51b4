//! Decoding of the Kubernetes protobuf envelope for the few built-in kinds
//! kubectl's typed generators send as protobuf (`kubectl create namespace`,
//! `create configmap`, `create secret generic`). Responses stay JSON (the
//! client decodes by response Content-Type). Hand-written because only a
//! handful of messages matter and generated bindings for all of k8s.io/api
//! would dwarf this crate; field numbers are those of `generated.proto`.

use serde_json::{Map, Value, json};

#[derive(Debug, thiserror::Error)]
#[error("invalid protobuf: {0}")]
pub struct PbError(&'static str);

struct Reader<'a> {
    buf: &'a [u8],
}

enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, PbError> {
        let mut v = 0u64;
        for i in 0..10 {
            let (&b, rest) = self.buf.split_first().ok_or(PbError("truncated varint"))?;
            self.buf = rest;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(PbError("varint too long"))
    }

    fn next(&mut self) -> Result<Option<(u64, Field<'a>)>, PbError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let field = match key & 7 {
            0 => Field::Varint(self.varint()?),
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| PbError("length"))?;
                if len > self.buf.len() {
                    return Err(PbError("truncated field"));
                }
                let (b, rest) = self.buf.split_at(len);
                self.buf = rest;
                Field::Bytes(b)
            }
            1 => {
                let (_, rest) = self.buf.split_at_checked(8).ok_or(PbError("truncated"))?;
                self.buf = rest;
                Field::Varint(0)
            }
            5 => {
                let (_, rest) = self.buf.split_at_checked(4).ok_or(PbError("truncated"))?;
                self.buf = rest;
                Field::Varint(0)
            }
            _ => return Err(PbError("unsupported wire type")),
        };
        Ok(Some((key >> 3, field)))
    }
}

fn fields(buf: &[u8]) -> Result<Vec<(u64, Field<'_>)>, PbError> {
    let mut r = Reader { buf };
    let mut out = Vec::new();
    while let Some(f) = r.next()? {
        out.push(f);
    }
    Ok(out)
}

fn text(b: &[u8]) -> Result<String, PbError> {
    String::from_utf8(b.to_vec()).map_err(|_| PbError("invalid utf-8"))
}

fn base64(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// A map entry (key = 1, value = 2).
fn entry(b: &[u8]) -> Result<(String, &[u8]), PbError> {
    let mut k = String::new();
    let mut v: &[u8] = &[];
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => k = text(x)?,
            (2, Field::Bytes(x)) => v = x,
            _ => {}
        }
    }
    Ok((k, v))
}

fn object_meta(b: &[u8]) -> Result<Value, PbError> {
    let mut m = Map::new();
    let mut labels = Map::new();
    let mut annotations = Map::new();
    let mut finalizers = Vec::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => {
                m.insert("name".into(), json!(text(x)?));
            }
            (2, Field::Bytes(x)) => {
                m.insert("generateName".into(), json!(text(x)?));
            }
            (3, Field::Bytes(x)) => {
                m.insert("namespace".into(), json!(text(x)?));
            }
            (6, Field::Bytes(x)) => {
                m.insert("resourceVersion".into(), json!(text(x)?));
            }
            (11, Field::Bytes(x)) => {
                let (k, v) = entry(x)?;
                labels.insert(k, json!(text(v)?));
            }
            (12, Field::Bytes(x)) => {
                let (k, v) = entry(x)?;
                annotations.insert(k, json!(text(v)?));
            }
            (14, Field::Bytes(x)) => finalizers.push(json!(text(x)?)),
            _ => {}
        }
    }
    if !labels.is_empty() {
        m.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        m.insert("annotations".into(), Value::Object(annotations));
    }
    if !finalizers.is_empty() {
        m.insert("finalizers".into(), Value::Array(finalizers));
    }
    Ok(Value::Object(m))
}

/// Decode `k8s\0` + `runtime.Unknown` into JSON, for the supported kinds.
pub fn decode(body: &[u8]) -> Result<Value, PbError> {
    let rest = body
        .strip_prefix(b"k8s\0")
        .ok_or(PbError("missing k8s magic"))?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, f) in fields(rest)? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (n, f) in fields(tm)? {
                    match (n, f) {
                        (1, Field::Bytes(x)) => api_version = text(x)?,
                        (2, Field::Bytes(x)) => kind = text(x)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(x)) => raw = x,
            _ => {}
        }
    }
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    let mut data = Map::new();
    let mut binary = Map::new();
    let mut string_data = Map::new();
    for (n, f) in fields(raw)? {
        match (kind.as_str(), n, f) {
            (_, 1, Field::Bytes(x)) => {
                obj.insert("metadata".into(), object_meta(x)?);
            }
            ("ConfigMap", 2, Field::Bytes(x)) => {
                let (k, v) = entry(x)?;
                data.insert(k, json!(text(v)?));
            }
            ("ConfigMap", 3, Field::Bytes(x)) => {
                let (k, v) = entry(x)?;
                binary.insert(k, json!(base64(v)));
            }
            ("ConfigMap", 4, Field::Varint(v)) | ("Secret", 5, Field::Varint(v)) => {
                obj.insert("immutable".into(), json!(v != 0));
            }
            ("Secret", 2, Field::Bytes(x)) => {
                let (k, v) = entry(x)?;
                data.insert(k, json!(base64(v)));
            }
            ("Secret", 3, Field::Bytes(x)) => {
                obj.insert("type".into(), json!(text(x)?));
            }
            ("Secret", 4, Field::Bytes(x)) => {
                let (k, v) = entry(x)?;
                string_data.insert(k, json!(text(v)?));
            }
            ("Namespace", 2, Field::Bytes(x)) => {
                let mut fins = Vec::new();
                for (n, f) in fields(x)? {
                    if let (1, Field::Bytes(s)) = (n, f) {
                        fins.push(json!(text(s)?));
                    }
                }
                obj.insert("spec".into(), json!({"finalizers": fins}));
            }
            ("DeleteOptions", 2, Field::Bytes(x)) => {
                let mut pre = Map::new();
                for (n, f) in fields(x)? {
                    match (n, f) {
                        (1, Field::Bytes(s)) => {
                            pre.insert("uid".into(), json!(text(s)?));
                        }
                        (2, Field::Bytes(s)) => {
                            pre.insert("resourceVersion".into(), json!(text(s)?));
                        }
                        _ => {}
                    }
                }
                obj.insert("preconditions".into(), Value::Object(pre));
            }
            ("DeleteOptions", 3, Field::Varint(v)) => {
                obj.insert("orphanDependents".into(), json!(v != 0));
            }
            ("DeleteOptions", 4, Field::Bytes(x)) => {
                obj.insert("propagationPolicy".into(), json!(text(x)?));
            }
            ("DeleteOptions", 5, Field::Bytes(x)) => {
                let e = obj.entry("dryRun").or_insert_with(|| json!([]));
                if let Some(a) = e.as_array_mut() {
                    a.push(json!(text(x)?));
                }
            }
            ("ConfigMap" | "Secret" | "Namespace" | "DeleteOptions", _, _) => {}
            _ => return Err(PbError("kind not supported as protobuf; send JSON")),
        }
    }
    if !data.is_empty() {
        obj.insert("data".into(), Value::Object(data));
    }
    if !binary.is_empty() {
        obj.insert("binaryData".into(), Value::Object(binary));
    }
    if !string_data.is_empty() {
        obj.insert("stringData".into(), Value::Object(string_data));
    }
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: u8, bytes: &[u8]) -> Vec<u8> {
        let mut v = vec![(n << 3) | 2, bytes.len() as u8];
        v.extend_from_slice(bytes);
        v
    }

    #[test]
    fn decodes_a_configmap_as_kubectl_sends_it() {
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let meta = [
            field(1, b"cfg"),
            field(11, &[field(1, b"app"), field(2, b"web")].concat()),
        ]
        .concat();
        let data = field(2, &[field(1, b"k"), field(2, b"v")].concat());
        let raw = [field(1, &meta), data].concat();
        let body = [b"k8s\0".to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(v["kind"], "ConfigMap");
        assert_eq!(v["metadata"]["name"], "cfg");
        assert_eq!(v["metadata"]["labels"]["app"], "web");
        assert_eq!(v["data"]["k"], "v");
    }

    #[test]
    fn other_kinds_and_garbage_are_rejected() {
        let type_meta = [field(1, b"apps/v1"), field(2, b"Deployment")].concat();
        let raw = field(2, b"x");
        let body = [b"k8s\0".to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        assert!(decode(&body).is_err());
        assert!(decode(b"k8s\0\xff\xff").is_err());
        assert!(decode(b"{}").is_err());
    }
}

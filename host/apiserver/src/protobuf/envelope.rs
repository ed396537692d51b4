//! The protobuf wire envelope: `k8s\0` then a `runtime.Unknown` holding the
//! type (`apiVersion`, `kind`) and the object's message in `raw`; and the
//! watch stream's frames (a 4-byte big-endian length, then a bare
//! `WatchEvent` whose object is itself enveloped).

use prost::Message as _;
use prost_reflect::{DynamicMessage, Value as PValue};
use serde_json::{Map, Value, json};

use super::PbError;
use super::convert;
use super::schema::{self, Schema};

/// The magic that starts every enveloped object.
pub const MAGIC: &[u8] = b"k8s\0";
const UNKNOWN: &str = "k8s.io.apimachinery.pkg.runtime.Unknown";
const WATCH_EVENT: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent";

fn text(m: &DynamicMessage, name: &str) -> String {
    m.get_field_by_name(name)
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Decode an enveloped object into its JSON form (with `apiVersion`/`kind`).
pub fn decode(body: &[u8]) -> Result<Value, PbError> {
    let s = schema::get()?;
    decode_with(s, body)
}

fn decode_with(s: &Schema, body: &[u8]) -> Result<Value, PbError> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| PbError::new("missing the k8s protobuf magic"))?;
    let unknown = DynamicMessage::decode(s.message(UNKNOWN)?, rest)
        .map_err(|e| PbError::new(format!("invalid runtime.Unknown envelope: {e}")))?;
    let type_meta = unknown
        .get_field_by_name("typeMeta")
        .and_then(|v| v.as_message().cloned());
    let (api_version, kind) = match &type_meta {
        Some(tm) => (text(tm, "apiVersion"), text(tm, "kind")),
        None => (String::new(), String::new()),
    };
    let raw = unknown
        .get_field_by_name("raw")
        .and_then(|v| v.as_bytes().cloned())
        .unwrap_or_default();
    let content_type = text(&unknown, "contentType");
    let encoding = text(&unknown, "contentEncoding");
    if !encoding.is_empty() {
        return Err(PbError::new(format!(
            "unsupported contentEncoding {encoding:?}"
        )));
    }
    if content_type.contains("json") {
        return serde_json::from_slice(&raw)
            .map_err(|e| PbError::new(format!("embedded JSON: {e}")));
    }
    // The real server's words (`transformDecodeError`).
    let version = api_version.rsplit('/').next().unwrap_or("");
    let cannot = |e: &dyn std::fmt::Display| {
        format!("{kind} in version {version:?} cannot be handled as a {kind}: {e}")
    };
    let desc = s.message_for(&api_version, &kind).ok_or_else(|| {
        PbError::new(cannot(&"object *unstructured.Unstructured does not implement the protobuf marshalling interface and cannot be encoded to a protobuf message"))
    })?;
    let msg = DynamicMessage::decode(desc, raw.as_ref()).map_err(|e| PbError::new(cannot(&e)))?;
    let embedded = |b: &[u8]| decode_with(s, b);
    let body = convert::to_json(s, &msg, "", &embedded).map_err(|e| PbError::new(cannot(&e)))?;
    let mut obj = Map::new();
    obj.insert("kind".into(), json!(kind));
    obj.insert("apiVersion".into(), json!(api_version));
    if let Value::Object(fields) = body {
        obj.extend(fields);
    }
    Ok(Value::Object(obj))
}

/// Whether an object (by its `apiVersion`/`kind`) has a protobuf form.
pub fn supports(obj: &Value) -> bool {
    let (Some(av), Some(k)) = (
        obj.get("apiVersion").and_then(Value::as_str),
        obj.get("kind").and_then(Value::as_str),
    ) else {
        return false;
    };
    schema::get().is_ok_and(|s| s.message_for(av, k).is_some())
}

/// Encode a JSON object (with `apiVersion`/`kind`) into the envelope.
pub fn encode(obj: &Value) -> Result<Vec<u8>, PbError> {
    let s = schema::get()?;
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let desc = s
        .message_for(api_version, kind)
        .ok_or_else(|| PbError::new(format!("{kind} ({api_version}) has no protobuf form")))?;
    let raw = convert::to_message(s, &desc, obj, "")?.encode_to_vec();
    let mut type_meta = DynamicMessage::new(s.message("k8s.io.apimachinery.pkg.runtime.TypeMeta")?);
    type_meta.set_field_by_name("apiVersion", PValue::String(api_version.into()));
    type_meta.set_field_by_name("kind", PValue::String(kind.into()));
    let mut unknown = DynamicMessage::new(s.message(UNKNOWN)?);
    unknown.set_field_by_name("typeMeta", PValue::Message(type_meta));
    unknown.set_field_by_name("raw", PValue::Bytes(raw.into()));
    // Go writes its non-pointer strings even when empty; so do we.
    unknown.set_field_by_name("contentEncoding", PValue::String(String::new()));
    unknown.set_field_by_name("contentType", PValue::String(String::new()));
    let mut out = MAGIC.to_vec();
    unknown
        .encode(&mut out)
        .map_err(|e| PbError::new(e.to_string()))?;
    Ok(out)
}

/// One watch event (`{"type": …, "object": …}`) as a length-prefixed frame.
pub fn watch_frame(event: &Value) -> Result<Vec<u8>, PbError> {
    let s = schema::get()?;
    let ty = event.get("type").and_then(Value::as_str).unwrap_or("");
    let object = event.get("object").unwrap_or(&Value::Null);
    let mut raw = DynamicMessage::new(s.message(super::special::RAW_EXTENSION)?);
    raw.set_field_by_name("raw", PValue::Bytes(encode(object)?.into()));
    let mut ev = DynamicMessage::new(s.message(WATCH_EVENT)?);
    ev.set_field_by_name("type", PValue::String(ty.into()));
    ev.set_field_by_name("object", PValue::Message(raw));
    let body = ev.encode_to_vec();
    let len = u32::try_from(body.len()).map_err(|_| PbError::new("watch event too large"))?;
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

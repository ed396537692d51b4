//! The Kubernetes types whose JSON form is not their protobuf message's field
//! by field mapping: they marshal themselves in Go (`MarshalJSON` and a
//! hand-written protobuf `Marshal`). Recognised by message name; everything
//! else converts generically.

use base64::Engine;
use chrono::{DateTime, SecondsFormat, Utc};
use prost_reflect::{DynamicMessage, MessageDescriptor, ReflectMessage, Value as PValue};
use serde_json::{Value, json};

use super::PbError;

const INT_OR_STRING: &str = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
const QUANTITY: &str = "k8s.io.apimachinery.pkg.api.resource.Quantity";
const QUANTITY_VALUE: &str = "k8s.io.apimachinery.pkg.api.resource.QuantityValue";
const TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime";
const DURATION: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Duration";
const FIELDS_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1";
pub const RAW_EXTENSION: &str = "k8s.io.apimachinery.pkg.runtime.RawExtension";
const CRD_JSON_V1: &str = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON";
const CRD_JSON_V1BETA1: &str = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1beta1.JSON";

/// The kinds of special message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Special {
    IntOrString,
    /// A string (`Quantity`, `QuantityValue`).
    Quantity,
    Time,
    MicroTime,
    Duration,
    /// Embedded JSON (or a `k8s\0`-prefixed protobuf object) in `raw`/`Raw`
    /// (`RawExtension`, `FieldsV1`, the CRD schema's `JSON`).
    Raw,
    /// A `[]string` type of its own (`Verbs`, `ExtraValue`): one repeated
    /// string field `items`, a JSON array (message lists such as
    /// `DownwardAPIProjection.items` are ordinary objects).
    StringList,
}

/// Which special type a message is, if any.
pub fn special(desc: &MessageDescriptor) -> Option<Special> {
    Some(match desc.full_name() {
        INT_OR_STRING => Special::IntOrString,
        QUANTITY | QUANTITY_VALUE => Special::Quantity,
        TIME => Special::Time,
        MICRO_TIME => Special::MicroTime,
        DURATION => Special::Duration,
        FIELDS_V1 | RAW_EXTENSION | CRD_JSON_V1 | CRD_JSON_V1BETA1 => Special::Raw,
        _ => {
            let mut fields = desc.fields();
            let only = fields.next()?;
            if fields.next().is_some()
                || only.name() != "items"
                || !only.is_list()
                || only.kind() != prost_reflect::Kind::String
            {
                return None;
            }
            Special::StringList
        }
    })
}

fn set(msg: &mut DynamicMessage, name: &str, v: PValue) -> Result<(), PbError> {
    msg.try_set_field_by_name(name, v)
        .map_err(|e| PbError::new(format!("{}: {e}", msg.descriptor().full_name())))
}

/// JSON to a special message. `raw` encodes an embedded object (JSON bytes).
pub fn to_proto(
    kind: Special,
    desc: &MessageDescriptor,
    v: &Value,
    path: &str,
) -> Result<DynamicMessage, PbError> {
    let mut m = DynamicMessage::new(desc.clone());
    let wrong = |want: &str| PbError::at(path, format!("expected {want}, got {}", type_name(v)));
    match kind {
        Special::IntOrString => match v {
            Value::Number(n) => {
                let i = n
                    .as_i64()
                    .and_then(|i| i32::try_from(i).ok())
                    .ok_or_else(|| wrong("a 32-bit integer or a string"))?;
                set(&mut m, "type", PValue::I64(0))?;
                set(&mut m, "intVal", PValue::I32(i))?;
            }
            Value::String(s) => {
                set(&mut m, "type", PValue::I64(1))?;
                set(&mut m, "strVal", PValue::String(s.clone()))?;
            }
            _ => return Err(wrong("an integer or a string")),
        },
        Special::Quantity => {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err(wrong("a quantity string")),
            };
            set(&mut m, "string", PValue::String(s))?;
        }
        Special::Time | Special::MicroTime => {
            let s = v.as_str().ok_or_else(|| wrong("an RFC 3339 time"))?;
            let t = DateTime::parse_from_rfc3339(s)
                .map_err(|e| PbError::at(path, format!("invalid time {s:?}: {e}")))?;
            set(&mut m, "seconds", PValue::I64(t.timestamp()))?;
            if kind == Special::MicroTime {
                let micros = t.timestamp_subsec_micros();
                set(&mut m, "nanos", PValue::I32((micros * 1000) as i32))?;
            }
        }
        Special::Duration => {
            let s = v.as_str().ok_or_else(|| wrong("a duration string"))?;
            let nanos = parse_go_duration(s)
                .ok_or_else(|| PbError::at(path, format!("invalid duration {s:?}")))?;
            set(&mut m, "duration", PValue::I64(nanos))?;
        }
        Special::Raw => {
            let bytes = serde_json::to_vec(v).map_err(|e| PbError::at(path, e.to_string()))?;
            let field = desc
                .fields()
                .next()
                .ok_or_else(|| PbError::at(path, "raw message without a field"))?;
            m.set_field(&field, PValue::Bytes(bytes.into()));
        }
        Special::StringList => {
            let items = v.as_array().ok_or_else(|| wrong("an array of strings"))?;
            let mut out = Vec::with_capacity(items.len());
            for (i, s) in items.iter().enumerate() {
                let s = s
                    .as_str()
                    .ok_or_else(|| PbError::at(&format!("{path}[{i}]"), "expected a string"))?;
                out.push(PValue::String(s.to_string()));
            }
            set(&mut m, "items", PValue::List(out))?;
        }
    }
    Ok(m)
}

/// A special message to JSON. `embedded` decodes the `k8s\0` objects a
/// `RawExtension` may hold (watch events, `List` items).
pub fn to_json(
    kind: Special,
    m: &DynamicMessage,
    path: &str,
    embedded: &dyn Fn(&[u8]) -> Result<Value, PbError>,
) -> Result<Value, PbError> {
    let get = |name: &str| m.get_field_by_name(name).map(|v| v.into_owned());
    let has = |name: &str| m.has_field_by_name(name);
    Ok(match kind {
        Special::IntOrString => {
            if get("type").and_then(|t| t.as_i64()) == Some(1) {
                json!(
                    get("strVal")
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                )
            } else {
                json!(get("intVal").and_then(|v| v.as_i32()).unwrap_or(0))
            }
        }
        Special::Quantity => {
            let s = get("string").and_then(|v| v.as_str().map(str::to_string));
            json!(s.filter(|s| !s.is_empty()).unwrap_or_else(|| "0".into()))
        }
        Special::Time | Special::MicroTime => {
            // Go decodes an empty message as the zero time, which JSON writes as null.
            if !has("seconds") && !has("nanos") {
                return Ok(Value::Null);
            }
            let secs = get("seconds").and_then(|v| v.as_i64()).unwrap_or(0);
            let nanos = if kind == Special::MicroTime {
                let n = get("nanos").and_then(|v| v.as_i32()).unwrap_or(0);
                u32::try_from(n - n % 1000).unwrap_or(0)
            } else {
                0 // Time keeps whole seconds (as Go's Time.Unmarshal does).
            };
            let t = DateTime::<Utc>::from_timestamp(secs, nanos)
                .ok_or_else(|| PbError::at(path, format!("time out of range: {secs}")))?;
            if kind == Special::MicroTime {
                json!(t.to_rfc3339_opts(SecondsFormat::Micros, true))
            } else {
                json!(t.to_rfc3339_opts(SecondsFormat::Secs, true))
            }
        }
        Special::Duration => json!(format_go_duration(
            get("duration").and_then(|v| v.as_i64()).unwrap_or(0)
        )),
        Special::Raw => {
            let bytes = m
                .descriptor()
                .fields()
                .next()
                .map(|f| m.get_field(&f).into_owned())
                .and_then(|v| v.as_bytes().cloned())
                .unwrap_or_default();
            if bytes.is_empty() {
                Value::Null
            } else if bytes.starts_with(super::envelope::MAGIC) {
                embedded(&bytes)?
            } else {
                serde_json::from_slice(&bytes).map_err(|e| {
                    PbError::at(
                        path,
                        format!("embedded object is neither protobuf nor JSON: {e}"),
                    )
                })?
            }
        }
        Special::StringList => {
            let items = get("items").and_then(|v| v.as_list().map(<[PValue]>::to_vec));
            Value::Array(
                items
                    .unwrap_or_default()
                    .iter()
                    .map(|s| json!(s.as_str().unwrap_or_default()))
                    .collect(),
            )
        }
    })
}

/// Bytes as JSON writes them (standard base64).
pub fn base64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

const UNITS: [(&str, i64); 7] = [
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("µs", 1_000),
    ("ns", 1),
];

/// Go's `time.ParseDuration` (`1h30m`, `1.5s`, `-300ms`), in nanoseconds.
pub fn parse_go_duration(s: &str) -> Option<i64> {
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let (unit, scale) = UNITS
            .iter()
            .filter(|(u, _)| rest.starts_with(u))
            .max_by_key(|(u, _)| u.len())?;
        total += n * (*scale as f64);
        rest = &rest[unit.len()..];
    }
    let v = total.round() as i64;
    Some(if neg { -v } else { v })
}

/// Go's `time.Duration.String()`: `1h30m0s`, `1.5s`, `300ms`, `0s`.
pub fn format_go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let neg = nanos < 0;
    let u = nanos.unsigned_abs();
    let sign = if neg { "-" } else { "" };
    let frac = |v: u64, digits: u32| -> String {
        let s = format!("{v:0width$}", width = digits as usize);
        let t = s.trim_end_matches('0');
        if t.is_empty() {
            String::new()
        } else {
            format!(".{t}")
        }
    };
    if u < 1_000 {
        return format!("{sign}{u}ns");
    }
    if u < 1_000_000 {
        return format!("{sign}{}{}µs", u / 1_000, frac(u % 1_000, 3));
    }
    if u < 1_000_000_000 {
        return format!("{sign}{}{}ms", u / 1_000_000, frac(u % 1_000_000, 6));
    }
    let secs = u / 1_000_000_000;
    let sub = frac(u % 1_000_000_000, 9);
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    if h > 0 {
        format!("{sign}{h}h{m}m{s}{sub}s")
    } else if m > 0 {
        format!("{sign}{m}m{s}{sub}s")
    } else {
        format!("{sign}{s}{sub}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_round_trip() {
        for (s, n) in [
            ("0s", 0),
            ("1h30m0s", 5_400_000_000_000),
            ("1.5s", 1_500_000_000),
            ("300ms", 300_000_000),
            ("2m3s", 123_000_000_000),
            ("-5s", -5_000_000_000),
            ("1µs", 1_000),
            ("7ns", 7),
        ] {
            assert_eq!(parse_go_duration(s), Some(n), "{s}");
            assert_eq!(format_go_duration(n), s, "{n}");
        }
        assert_eq!(parse_go_duration("90m"), Some(5_400_000_000_000));
        assert_eq!(parse_go_duration("5"), None);
        assert_eq!(parse_go_duration("x"), None);
    }
}

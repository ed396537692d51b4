//! Generic conversion between a Kubernetes object's JSON and its protobuf
//! message, driven by the descriptors: field names are the JSON names (the
//! index lists the few that differ), maps are map entries, lists are repeated
//! fields, and the types that marshal themselves are in `special` (leaves) or
//! `SchemaUnion` (the CRD schema's either-or types). No per-kind code.

use std::collections::HashMap;

use base64::Engine;
use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, ReflectMessage,
    Value as PValue,
};
use serde_json::{Map, Number, Value};

use super::PbError;
use super::schema::Schema;
use super::special::{self, Special};

/// Decodes the `k8s\0` objects embedded in a `RawExtension`.
pub type Embedded<'a> = &'a dyn Fn(&[u8]) -> Result<Value, PbError>;

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn wrong(path: &str, want: &str, v: &Value) -> PbError {
    PbError::at(
        path,
        format!("expected {want}, got {}", special::type_name(v)),
    )
}

/// JSON object to message. Fields the message does not have are dropped (Go's
/// decoder would drop them too); `apiVersion`/`kind` travel in the envelope.
pub fn to_message(
    s: &Schema,
    desc: &MessageDescriptor,
    v: &Value,
    path: &str,
) -> Result<DynamicMessage, PbError> {
    if let Some(kind) = special::special(desc) {
        return special::to_proto(kind, desc, v, path);
    }
    if let Some(union) = SchemaUnion::of(desc) {
        return union.to_proto(s, desc, v, path);
    }
    let obj = v.as_object().ok_or_else(|| wrong(path, "an object", v))?;
    let mut m = DynamicMessage::new(desc.clone());
    // Embedded structs: their fields sit in this object in JSON.
    for fd in desc.fields().filter(|fd| s.is_inline(fd)) {
        let Kind::Message(inner) = fd.kind() else {
            continue;
        };
        let part: Map<String, Value> = obj
            .iter()
            .filter(|(k, _)| s.field_for_json(desc, k).is_none() && s.accepts(&inner, k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let sub = to_message(s, &inner, &Value::Object(part), path)?;
        m.set_field(&fd, PValue::Message(sub));
    }
    for (key, val) in obj {
        let Some(fd) = s.field_for_json(desc, key) else {
            if !path.is_empty() || (key != "apiVersion" && key != "kind") {
                tracing::debug!(field = %child(path, key), message = desc.full_name(), "field has no protobuf counterpart; dropped");
            }
            continue;
        };
        if val.is_null() {
            // Go writes a zero time (`null` in JSON) as an empty message.
            if let Kind::Message(t) = fd.kind()
                && !fd.is_list()
                && matches!(
                    special::special(&t),
                    Some(Special::Time | Special::MicroTime)
                )
            {
                m.set_field(&fd, PValue::Message(DynamicMessage::new(t)));
            }
            continue;
        }
        let p = child(path, key);
        let value = if fd.is_map() {
            to_map(s, &fd, val, &p)?
        } else if fd.is_list() {
            let items = val.as_array().ok_or_else(|| wrong(&p, "an array", val))?;
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                out.push(to_single(s, &fd.kind(), item, &format!("{p}[{i}]"))?);
            }
            PValue::List(out)
        } else {
            to_single(s, &fd.kind(), val, &p)?
        };
        m.set_field(&fd, value);
    }
    Ok(m)
}

fn to_map(s: &Schema, fd: &FieldDescriptor, v: &Value, path: &str) -> Result<PValue, PbError> {
    let obj = v.as_object().ok_or_else(|| wrong(path, "an object", v))?;
    let Kind::Message(entry) = fd.kind() else {
        return Err(PbError::at(path, "map field without an entry message"));
    };
    let key_kind = entry.map_entry_key_field().kind();
    let value_kind = entry.map_entry_value_field().kind();
    let mut out = HashMap::with_capacity(obj.len());
    for (k, val) in obj {
        let p = child(path, k);
        let key = match key_kind {
            Kind::String => MapKey::String(k.clone()),
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => MapKey::I32(
                k.parse()
                    .map_err(|_| PbError::at(&p, "expected an int32 key"))?,
            ),
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => MapKey::I64(
                k.parse()
                    .map_err(|_| PbError::at(&p, "expected an int64 key"))?,
            ),
            _ => return Err(PbError::at(&p, "unsupported map key type")),
        };
        if val.is_null() {
            continue;
        }
        out.insert(key, to_single(s, &value_kind, val, &p)?);
    }
    Ok(PValue::Map(out))
}

fn int(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
            .map(|f| f as i64)
    })
}

fn to_single(s: &Schema, kind: &Kind, v: &Value, path: &str) -> Result<PValue, PbError> {
    let w = |want: &str| wrong(path, want, v);
    Ok(match kind {
        Kind::String => PValue::String(v.as_str().ok_or_else(|| w("a string"))?.to_string()),
        Kind::Bool => PValue::Bool(v.as_bool().ok_or_else(|| w("a boolean"))?),
        Kind::Bytes => {
            let text = v.as_str().ok_or_else(|| w("a base64 string"))?;
            let b = base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|e| PbError::at(path, format!("invalid base64: {e}")))?;
            PValue::Bytes(b.into())
        }
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => PValue::I32(
            int(v)
                .and_then(|i| i32::try_from(i).ok())
                .ok_or_else(|| w("a 32-bit integer"))?,
        ),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
            PValue::I64(int(v).ok_or_else(|| w("an integer"))?)
        }
        Kind::Uint32 | Kind::Fixed32 => PValue::U32(
            int(v)
                .and_then(|i| u32::try_from(i).ok())
                .ok_or_else(|| w("an unsigned 32-bit integer"))?,
        ),
        Kind::Uint64 | Kind::Fixed64 => {
            PValue::U64(v.as_u64().ok_or_else(|| w("an unsigned integer"))?)
        }
        Kind::Double => PValue::F64(v.as_f64().ok_or_else(|| w("a number"))?),
        Kind::Float => PValue::F32(v.as_f64().ok_or_else(|| w("a number"))? as f32),
        Kind::Enum(_) => PValue::EnumNumber(
            int(v)
                .and_then(|i| i32::try_from(i).ok())
                .ok_or_else(|| w("an enum number"))?,
        ),
        Kind::Message(d) => PValue::Message(to_message(s, d, v, path)?),
    })
}

/// Message to JSON, as Go's `json.Marshal` writes the decoded struct: fields
/// in message order, map keys sorted, zero scalars dropped where the Go field
/// is `omitempty` (the index says which), present messages kept (`{}`).
pub fn to_json(
    s: &Schema,
    m: &DynamicMessage,
    path: &str,
    embedded: Embedded,
) -> Result<Value, PbError> {
    let desc = m.descriptor();
    if let Some(kind) = special::special(&desc) {
        return special::to_json(kind, m, path, embedded);
    }
    if let Some(union) = SchemaUnion::of(&desc) {
        return union.to_json(s, m, path, embedded);
    }
    let mut out = Map::new();
    for fd in desc.fields() {
        if !m.has_field(&fd) {
            continue;
        }
        let name = s.json_name(&fd);
        let p = child(path, name);
        let value = m.get_field(&fd);
        let json = match &*value {
            PValue::List(items) => {
                let mut arr = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    arr.push(single_to_json(s, item, &format!("{p}[{i}]"), embedded)?);
                }
                Value::Array(arr)
            }
            PValue::Map(entries) => {
                let mut keys: Vec<&MapKey> = entries.keys().collect();
                keys.sort();
                let mut obj = Map::new();
                for k in keys {
                    let ks = match k {
                        MapKey::String(s) => s.clone(),
                        MapKey::Bool(b) => b.to_string(),
                        MapKey::I32(i) => i.to_string(),
                        MapKey::I64(i) => i.to_string(),
                        MapKey::U32(i) => i.to_string(),
                        MapKey::U64(i) => i.to_string(),
                    };
                    let v = single_to_json(s, &entries[k], &child(&p, &ks), embedded)?;
                    obj.insert(ks, v);
                }
                Value::Object(obj)
            }
            PValue::Message(_) if s.is_inline(&fd) => {
                if let Value::Object(fields) = single_to_json(s, &value, path, embedded)? {
                    out.extend(fields);
                }
                continue;
            }
            PValue::Message(_) => single_to_json(s, &value, &p, embedded)?,
            scalar => {
                if is_zero(scalar) && s.omits_zero(fd.full_name()) {
                    continue;
                }
                single_to_json(s, scalar, &p, embedded)?
            }
        };
        out.insert(name.to_string(), json);
    }
    Ok(Value::Object(out))
}

fn is_zero(v: &PValue) -> bool {
    match v {
        PValue::Bool(b) => !b,
        PValue::I32(i) | PValue::EnumNumber(i) => *i == 0,
        PValue::I64(i) => *i == 0,
        PValue::U32(i) => *i == 0,
        PValue::U64(i) => *i == 0,
        PValue::F32(f) => *f == 0.0,
        PValue::F64(f) => *f == 0.0,
        PValue::String(s) => s.is_empty(),
        PValue::Bytes(b) => b.is_empty(),
        PValue::Message(_) | PValue::List(_) | PValue::Map(_) => false,
    }
}

fn single_to_json(
    s: &Schema,
    v: &PValue,
    path: &str,
    embedded: Embedded,
) -> Result<Value, PbError> {
    let float = |f: f64| {
        Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| PbError::at(path, "not a finite number"))
    };
    Ok(match v {
        PValue::Bool(b) => Value::Bool(*b),
        PValue::I32(i) | PValue::EnumNumber(i) => Value::from(*i),
        PValue::I64(i) => Value::from(*i),
        PValue::U32(i) => Value::from(*i),
        PValue::U64(i) => Value::from(*i),
        PValue::F32(f) => float(f64::from(*f))?,
        PValue::F64(f) => float(*f)?,
        PValue::String(s) => Value::String(s.clone()),
        PValue::Bytes(b) => Value::String(special::base64(b)),
        PValue::Message(m) => to_json(s, m, path, embedded)?,
        PValue::List(_) | PValue::Map(_) => {
            return Err(PbError::at(path, "nested list or map"));
        }
    })
}

/// The CRD schema's either-or types (`apiextensions` v1 and v1beta1), which
/// Go marshals as one of two JSON shapes.
#[derive(Clone, Copy)]
enum SchemaUnion {
    /// `additionalProperties`: `false`/`true` or a schema.
    Bool,
    /// `items`: a schema or an array of schemas.
    Array,
    /// `dependencies` values: a schema or an array of property names.
    StringArray,
}

impl SchemaUnion {
    fn of(desc: &MessageDescriptor) -> Option<SchemaUnion> {
        if !desc
            .package_name()
            .starts_with("k8s.io.apiextensions_apiserver.")
        {
            return None;
        }
        match desc.name() {
            "JSONSchemaPropsOrBool" => Some(SchemaUnion::Bool),
            "JSONSchemaPropsOrArray" => Some(SchemaUnion::Array),
            "JSONSchemaPropsOrStringArray" => Some(SchemaUnion::StringArray),
            _ => None,
        }
    }

    fn field(desc: &MessageDescriptor, name: &str) -> Result<FieldDescriptor, PbError> {
        desc.get_field_by_name(name)
            .ok_or_else(|| PbError::new(format!("{} lacks {name}", desc.full_name())))
    }

    fn to_proto(
        self,
        s: &Schema,
        desc: &MessageDescriptor,
        v: &Value,
        path: &str,
    ) -> Result<DynamicMessage, PbError> {
        let mut m = DynamicMessage::new(desc.clone());
        let schema_field = Self::field(desc, "schema")?;
        let schema = |v: &Value, p: &str| -> Result<PValue, PbError> {
            to_single(s, &schema_field.kind(), v, p)
        };
        match (self, v) {
            (SchemaUnion::Bool, Value::Bool(b)) => {
                m.set_field(&Self::field(desc, "allows")?, PValue::Bool(*b));
            }
            (SchemaUnion::Bool, Value::Object(_)) => {
                m.set_field(&Self::field(desc, "allows")?, PValue::Bool(true));
                m.set_field(&schema_field, schema(v, path)?);
            }
            (SchemaUnion::Array | SchemaUnion::StringArray, Value::Object(_)) => {
                m.set_field(&schema_field, schema(v, path)?);
            }
            (SchemaUnion::Array, Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    out.push(schema(item, &format!("{path}[{i}]"))?);
                }
                m.set_field(&Self::field(desc, "jSONSchemas")?, PValue::List(out));
            }
            (SchemaUnion::StringArray, Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let p = format!("{path}[{i}]");
                    let text = item.as_str().ok_or_else(|| wrong(&p, "a string", item))?;
                    out.push(PValue::String(text.to_string()));
                }
                m.set_field(&Self::field(desc, "property")?, PValue::List(out));
            }
            (SchemaUnion::Bool, _) => return Err(wrong(path, "a boolean or a schema", v)),
            _ => return Err(wrong(path, "a schema or an array", v)),
        }
        Ok(m)
    }

    fn to_json(
        self,
        s: &Schema,
        m: &DynamicMessage,
        path: &str,
        embedded: Embedded,
    ) -> Result<Value, PbError> {
        let desc = m.descriptor();
        let schema_field = Self::field(&desc, "schema")?;
        let schema = || -> Result<Value, PbError> {
            if m.has_field(&schema_field) {
                single_to_json(s, &m.get_field(&schema_field), path, embedded)
            } else {
                Ok(Value::Null)
            }
        };
        let list = |name: &str| -> Result<Vec<PValue>, PbError> {
            Ok(m.get_field(&Self::field(&desc, name)?)
                .as_list()
                .map(<[PValue]>::to_vec)
                .unwrap_or_default())
        };
        match self {
            SchemaUnion::Bool => {
                if m.has_field(&schema_field) {
                    schema()
                } else {
                    let allows = m.get_field(&Self::field(&desc, "allows")?).as_bool();
                    Ok(Value::Bool(allows.unwrap_or(false)))
                }
            }
            SchemaUnion::Array => {
                let items = list("jSONSchemas")?;
                if items.is_empty() {
                    return schema();
                }
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    out.push(single_to_json(s, item, &format!("{path}[{i}]"), embedded)?);
                }
                Ok(Value::Array(out))
            }
            SchemaUnion::StringArray => {
                let items = list("property")?;
                if items.is_empty() {
                    return schema();
                }
                Ok(Value::Array(
                    items
                        .iter()
                        .map(|p| Value::String(p.as_str().unwrap_or_default().to_string()))
                        .collect(),
                ))
            }
        }
    }
}

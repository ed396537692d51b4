//! What kube-apiserver does to a written object before it is stored, in its
//! order: decode by type (wrong types are a 400, unknown fields are dropped
//! and reported as `fieldValidation` asks), default, validate (a 422 listing
//! every field cause). A plugin whose child is invalid must fail in `dev` as
//! it would in production, so built-ins follow the real rules for the common
//! cases and custom resources follow their CRD's structural schema.
//!
//! - [`typed`]: decoding of built-in kinds from k8s-openapi's schemas.
//! - [`apply_typed`]: what server-side apply makes of a configuration's types.
//! - [`structural`]: pruning, defaulting and validation of custom resources.
//! - [`objectmeta`]: names, labels, annotations, label selectors.
//! - [`builtin`]: per-kind rules (workloads, pods, ConfigMaps, Secrets, Services).
//! - [`crd`]: the rules for CustomResourceDefinitions themselves.

mod apply_typed;
mod builtin;
pub mod crd;
mod go_json;
pub mod objectmeta;
pub mod structural;
mod typed;

use std::sync::Mutex;

use serde_json::Value;

use crate::errors::{ApiError, Cause};
use crate::resources::ResourceDef;

/// The `fieldValidation` query parameter: what to do about unknown (and
/// dropped) fields in a request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and say so in `Warning` headers (the server's default).
    Warn,
    /// Refuse the request (400), as kubectl asks by default.
    Strict,
}

/// Per-request decoding options and the warnings they produced.
#[derive(Debug)]
pub struct Decoding {
    pub mode: FieldValidation,
    /// A non-apply patch: strict errors are reported against the patch.
    patch: Option<PatchContext>,
    warnings: Mutex<Vec<String>>,
}

/// What a strict error of a patch request shows.
#[derive(Debug, Clone)]
struct PatchContext {
    strategic: bool,
    body: Value,
}

/// Decoding for writes the server makes itself (garbage collection).
pub static SYSTEM: Decoding = Decoding::new(FieldValidation::Ignore);

impl Decoding {
    pub const fn new(mode: FieldValidation) -> Decoding {
        Decoding {
            mode,
            patch: None,
            warnings: Mutex::new(Vec::new()),
        }
    }

    /// Marks a JSON, merge or strategic merge patch request: kube-apiserver
    /// reports strict decoding errors of patches as a 422 on `patch`,
    /// showing the patched object (or, for strategic merge, the patch).
    pub fn for_patch(mut self, strategic: bool, body: &Value) -> Decoding {
        self.patch = Some(PatchContext {
            strategic,
            body: body.clone(),
        });
        self
    }

    /// From the `fieldValidation` query parameter (absent: `Warn`);
    /// `options` names the request's options kind (`CreateOptions`, …).
    pub fn from_query(v: Option<&str>, options: &str) -> Result<Decoding, ApiError> {
        let mode = match v.unwrap_or("") {
            "" | "Warn" => FieldValidation::Warn,
            "Strict" => FieldValidation::Strict,
            "Ignore" => FieldValidation::Ignore,
            other => {
                return Err(ApiError::invalid(
                    "meta.k8s.io",
                    options,
                    "",
                    vec![Cause {
                        reason: "FieldValueNotSupported",
                        field: "fieldValidation".into(),
                        message: format!(
                            "Unsupported value: {}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
                            objectmeta::quote(other)
                        ),
                    }],
                ));
            }
        };
        Ok(Decoding::new(mode))
    }

    /// Warnings to send as `Warning: 299 - "..."` headers.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn warn(&self, msg: String) {
        let mut w = self.warnings.lock().unwrap_or_else(|p| p.into_inner());
        if !w.contains(&msg) {
            w.push(msg);
        }
    }
}

/// Decode a request body in place: type errors are a 400 (built-ins), unknown
/// fields are pruned and then ignored, warned about or refused.
pub fn decode(
    def: &ResourceDef,
    version: &str,
    obj: &mut Value,
    decoding: &Decoding,
) -> Result<(), ApiError> {
    let unknown = if def.custom {
        let mut unknown = typed::decode_object_meta(obj).unknown;
        if let Some(schema) = def.schemas.get(version) {
            unknown.extend(structural::prune_and_default(obj, schema));
        }
        unknown
    } else {
        match typed::decode(&def.group, version, &def.kind, obj) {
            None => Vec::new(),
            Some(out) => {
                if let Some(e) = out.error {
                    let kind = &def.kind;
                    return Err(ApiError::bad_request(format!(
                        "{kind} in version \"{version}\" cannot be handled as a {kind}: {e}"
                    )));
                }
                out.unknown
            }
        }
    };
    if unknown.is_empty() {
        return Ok(());
    }
    match decoding.mode {
        FieldValidation::Ignore => Ok(()),
        FieldValidation::Warn => {
            for u in unknown {
                decoding.warn(format!("unknown field \"{u}\""));
            }
            Ok(())
        }
        FieldValidation::Strict => {
            let list = unknown
                .iter()
                .map(|u| format!("unknown field \"{u}\""))
                .collect::<Vec<_>>()
                .join(", ");
            if let Some(p) = &decoding.patch {
                let shown = if p.strategic {
                    go_print(&p.body)
                } else {
                    serde_json::to_string(&*obj).unwrap_or_default()
                };
                return Err(ApiError::invalid(
                    "",
                    "",
                    "",
                    vec![Cause {
                        reason: "FieldValueInvalid",
                        field: "patch".into(),
                        message: format!(
                            "Invalid value: {}: strict decoding error: {list}",
                            objectmeta::quote(&shown)
                        ),
                    }],
                ));
            }
            let kind = &def.kind;
            Err(ApiError::bad_request(format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {list}"
            )))
        }
    }
}

/// Adds to a defaulted built-in object the fields Go always writes (`{}`
/// for structs, `null` for non-omitempty slices...), as it is stored.
pub fn written(def: &ResourceDef, version: &str, obj: &mut Value) {
    if !def.custom {
        typed::written(&def.group, version, &def.kind, obj);
    }
}

/// The zero object of a built-in resource (what a create's managedFields
/// are computed against); `None` for custom resources and unknown kinds.
pub fn zero_object(def: &ResourceDef, version: &str) -> Option<Value> {
    if def.custom {
        return None;
    }
    typed::zero_object(&def.group, version, &def.kind)
}

/// Whether objects of this resource need defaulting when read (a custom
/// resource whose schema in `version` declares defaults).
pub fn defaults_on_read(def: &ResourceDef, version: &str) -> bool {
    def.custom
        && def
            .schemas
            .get(version)
            .is_some_and(structural::has_defaults)
}

/// Go's `%v` of a decoded JSON value (`map[spec:map[replicas:1]]`), as the
/// strict error of a strategic merge patch shows the patch.
fn go_print(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_print).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items = keys
                .iter()
                .map(|k| format!("{k}:{}", go_print(&m[*k])))
                .collect::<Vec<_>>()
                .join(" ");
            format!("map[{items}]")
        }
        other => other.to_string(),
    }
}

/// Server-side apply builds a typed object from the applied configuration
/// first: a field the type does not have or a value of the wrong type is a
/// 500 without a reason, whatever `fieldValidation` says (structured-merge-
/// diff's plain error, kubernetes/kubernetes#139253; see [`apply_typed`]).
/// The message names the namespace of the configuration, not of the URL.
/// Built-ins only.
pub fn check_apply_config(
    def: &ResourceDef,
    version: &str,
    name: &str,
    config: &Value,
) -> Result<(), ApiError> {
    if def.custom {
        return Ok(());
    }
    let Some(errors) = apply_typed::errors(&def.group, version, &def.kind, config) else {
        return Ok(());
    };
    if errors.is_empty() {
        return Ok(());
    }
    let ns = config
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    // GroupVersionKind.String(): the core group prints as an empty group.
    let gv = format!("{}/{version}", def.group);
    Err(ApiError::new(
        500,
        "",
        format!(
            "failed to create typed patch object ({ns}/{name}; {gv}, Kind={}): {}",
            def.kind,
            apply_typed::message(&errors)
        ),
    ))
}

/// Apply the schema defaults of a custom resource as it is read
/// (kube-apiserver does, so objects stored before a default was added get it).
pub fn default_on_read(def: &ResourceDef, version: &str, obj: &mut Value) {
    if let Some(schema) = def.schemas.get(version).filter(|_| def.custom) {
        structural::default_only(obj, schema);
    }
}

/// The field causes of a 422 for a defaulted object; `old` is the stored
/// object on updates (immutable fields).
pub fn validate(
    def: &ResourceDef,
    version: &str,
    name: &str,
    obj: &Value,
    old: Option<&Value>,
) -> Vec<Cause> {
    let mut causes = objectmeta::check_name(&def.group, &def.resource, name);
    causes.extend(objectmeta::check(obj));
    if def.custom {
        if let Some(schema) = def.schemas.get(version) {
            causes.extend(structural::validate(obj, schema));
        }
    } else {
        causes.extend(builtin::check(&def.group, &def.kind, obj, old));
    }
    causes
}

/// etcd's default request limit (`--max-request-bytes`, 1.5 MiB): a larger
/// object never reaches storage on a real cluster.
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;

/// kube-apiserver's gRPC client refuses to even send more than this to etcd.
const MAX_GRPC_SEND: usize = 2 * 1024 * 1024;

/// Bytes of an etcd transaction beyond the stored value and three copies of
/// its key (compare, put, get): protobuf framing, measured against the real
/// server (the message quotes the request size).
const ETCD_TXN_FRAMING: usize = 38;

/// Refuse objects etcd would refuse, with the answer kube-apiserver relays:
/// a 500 Status without a reason, worded by etcd or by gRPC.
pub fn check_storable(
    def: &ResourceDef,
    namespace: &str,
    name: &str,
    obj: &Value,
) -> Result<(), ApiError> {
    let key = if def.namespaced {
        format!(
            "/registry/{}/{}/{namespace}/{name}",
            def.group, def.resource
        )
    } else {
        format!("/registry/{}/{}/{name}", def.group, def.resource)
    };
    let value = serde_json::to_vec(obj).map_or(0, |b| b.len());
    let size = value + 3 * key.len() + ETCD_TXN_FRAMING;
    if size > MAX_GRPC_SEND {
        return Err(ApiError::new(
            500,
            "",
            format!(
                "rpc error: code = ResourceExhausted desc = trying to send message larger than max ({size} vs. {MAX_GRPC_SEND})"
            ),
        ));
    }
    if size > MAX_OBJECT_BYTES {
        return Err(ApiError::new(500, "", "etcdserver: request is too large"));
    }
    Ok(())
}

/// The causes the `/scale` subresource of a CRD adds: a value at
/// `specReplicasPath` that is not an integer cannot be read as replicas.
pub fn scale_replicas_causes(
    store: &crate::store::Store,
    def: &ResourceDef,
    version: &str,
    obj: &Value,
) -> Vec<Cause> {
    let key = crate::store::obj_key("", &format!("{}.{}", def.resource, def.group));
    let Some(crd) = store.get(crate::app::CRD_KEY, &key) else {
        return Vec::new();
    };
    let path = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("name").and_then(Value::as_str) == Some(version))
        })
        .and_then(|v| v.pointer("/subresources/scale/specReplicasPath"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let Some(path) = path else {
        return Vec::new();
    };
    let ptr: String = path
        .split('.')
        .filter(|s| !s.is_empty())
        .map(|s| format!("/{s}"))
        .collect();
    let (shown, go_type) = match obj.pointer(&ptr) {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Number(n)) if n.is_i64() => return Vec::new(),
        Some(Value::Number(n)) => (n.to_string(), "float64"),
        Some(Value::String(s)) => (s.clone(), "string"),
        Some(Value::Bool(b)) => (b.to_string(), "bool"),
        Some(Value::Array(_)) => ("[...]".to_string(), "[]interface {}"),
        Some(Value::Object(_)) => ("map[...]".to_string(), "map[string]interface {}"),
    };
    vec![Cause {
        reason: "FieldValueInvalid",
        field: path.clone(),
        message: format!(
            "Invalid value: 0: {path} accessor error: {shown} is of the type {go_type}, expected int64"
        ),
    }]
}

/// Add the decoding warnings to a response (`Warning: 299 - "..."`).
pub fn with_warnings(
    mut resp: axum::response::Response,
    decoding: &Decoding,
) -> axum::response::Response {
    for w in decoding.warnings() {
        let text = format!("299 - {}", objectmeta::quote(&w));
        if let Ok(v) = axum::http::HeaderValue::from_str(&text) {
            resp.headers_mut().append(axum::http::header::WARNING, v);
        }
    }
    resp
}

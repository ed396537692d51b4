//! Decoding of built-in objects by their types, as kube-apiserver's JSON
//! decoder does before anything else: a value of the wrong type is a 400
//! naming the Go struct field (`json: cannot unmarshal string into Go struct
//! field DeploymentSpec.spec.replicas of type int32`), unknown fields are
//! dropped and reported (for `fieldValidation`), `null` leaves a field unset.
//!
//! The types come from k8s-openapi's JSON schemas (its `schemars` feature),
//! so every built-in kind is covered from one table without hand-written
//! field lists. The walk itself is hand-written because the messages must be
//! Go's (`encoding/json` as forked by `sigs.k8s.io/json`), which no Rust
//! decoder produces.

use std::collections::HashMap;
use std::sync::OnceLock;

use base64::Engine;
use k8s_openapi::schemars::SchemaGenerator;
use serde_json::{Map, Value};

/// Schemas of every built-in kind known to k8s-openapi, by `group/version/kind`.
struct Types {
    /// `group/version/Kind` → definition name (`io.k8s.api.apps.v1.Deployment`).
    roots: HashMap<String, String>,
    defs: Map<String, Value>,
}

macro_rules! kinds {
    ($gen:ident, $roots:ident; $($t:ty),* $(,)?) => {
        $(
            let s = $gen.subschema_for::<$t>();
            if let Some(r) = s.get("$ref").and_then(Value::as_str) {
                $roots.insert(
                    format!(
                        "{}/{}/{}",
                        <$t as k8s_openapi::Resource>::GROUP,
                        <$t as k8s_openapi::Resource>::VERSION,
                        <$t as k8s_openapi::Resource>::KIND
                    ),
                    r.rsplit('/').next().unwrap_or_default().to_string(),
                );
            }
        )*
    };
}

fn types() -> &'static Types {
    static TYPES: OnceLock<Types> = OnceLock::new();
    TYPES.get_or_init(|| {
        use k8s_openapi::api::{
            admissionregistration::v1 as adm, apps::v1 as apps, autoscaling::v1 as as1,
            autoscaling::v2 as as2, batch::v1 as batch, certificates::v1 as cert,
            coordination::v1 as coord, core::v1 as core, discovery::v1 as disc, events::v1 as ev,
            networking::v1 as net, node::v1 as node, policy::v1 as pol, rbac::v1 as rbac,
            scheduling::v1 as sched, storage::v1 as st,
        };
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
        let mut g = SchemaGenerator::default();
        let mut roots = HashMap::new();
        kinds!(g, roots;
            core::ConfigMap, core::Secret, core::Service, core::ServiceAccount, core::Namespace,
            core::Pod, core::PodTemplate, core::ReplicationController, core::Endpoints,
            core::Event, core::LimitRange, core::ResourceQuota, core::Node,
            core::PersistentVolume, core::PersistentVolumeClaim,
            apps::Deployment, apps::ReplicaSet, apps::StatefulSet, apps::DaemonSet,
            apps::ControllerRevision, batch::Job, batch::CronJob,
            as1::HorizontalPodAutoscaler, as2::HorizontalPodAutoscaler,
            net::Ingress, net::IngressClass, net::NetworkPolicy, pol::PodDisruptionBudget,
            rbac::ClusterRole, rbac::ClusterRoleBinding, rbac::Role, rbac::RoleBinding,
            coord::Lease, disc::EndpointSlice, ev::Event, sched::PriorityClass,
            st::StorageClass, st::CSIDriver, st::CSINode, st::VolumeAttachment,
            node::RuntimeClass, cert::CertificateSigningRequest,
            adm::ValidatingWebhookConfiguration, adm::MutatingWebhookConfiguration,
            apiext::CustomResourceDefinition,
        );
        // The metadata of custom resources is decoded by the same ObjectMeta type.
        let meta = g.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>();
        if let Some(r) = meta.get("$ref").and_then(Value::as_str) {
            roots.insert(
                OBJECT_META.into(),
                r.rsplit('/').next().unwrap_or_default().into(),
            );
        }
        Types {
            roots,
            defs: g.take_definitions(false),
        }
    })
}

const OBJECT_META: &str = "ObjectMeta";

/// What decoding found.
#[derive(Debug, Default)]
pub struct Decoded {
    /// Paths of fields the type does not have (`spec.foo`,
    /// `spec.template.spec.containers[0].bar`); they were removed.
    pub unknown: Vec<String>,
    /// The first type error, in Go's words (decoding stops being useful there).
    pub error: Option<String>,
}

/// Decode `obj` as the built-in `group/version/kind` in place. `None` when
/// the kind has no known type.
pub fn decode(group: &str, version: &str, kind: &str, obj: &mut Value) -> Option<Decoded> {
    let (defs, root, schema) = kind_root(group, version, kind)?;
    let mut w = Walker {
        defs,
        out: Decoded::default(),
        fill: false,
    };
    w.walk(obj, &schema, &mut Ctx::root(short_name(root)));
    Some(w.out)
}

/// The definitions of every built-in kind and, for `group/version/kind`,
/// a schema referring to its root definition; `None` for an unknown kind.
pub(super) fn kind_schema(
    group: &str,
    version: &str,
    kind: &str,
) -> Option<(&'static Map<String, Value>, Value)> {
    kind_root(group, version, kind).map(|(defs, _, schema)| (defs, schema))
}

/// [`kind_schema`] and the root definition's name. The schema refers to
/// the root by reference, so a walk knows the root's definition (Go's
/// omitempty).
fn kind_root(
    group: &str,
    version: &str,
    kind: &str,
) -> Option<(&'static Map<String, Value>, &'static str, Value)> {
    let t = types();
    let root = t.roots.get(&format!("{group}/{version}/{kind}"))?;
    t.defs.get(root)?;
    Some((
        &t.defs,
        root.as_str(),
        serde_json::json!({ "$ref": format!("#/definitions/{root}") }),
    ))
}

/// A decoded, defaulted built-in object as kube-apiserver stores it: the
/// fields Go always writes are added (see `go_json`). Runs after defaulting,
/// which looks for absent fields as Go's defaulters look for zero ones.
pub fn written(group: &str, version: &str, kind: &str, obj: &mut Value) {
    let t = types();
    let Some(root) = t.roots.get(&format!("{group}/{version}/{kind}")) else {
        return;
    };
    let mut w = Walker {
        defs: &t.defs,
        out: Decoded::default(),
        fill: true,
    };
    let schema = serde_json::json!({ "$ref": format!("#/definitions/{root}") });
    w.walk(obj, &schema, &mut Ctx::root(short_name(root)));
}

/// The zero object of a built-in kind as Go writes it (see `go_json`);
/// `None` when the kind has no known type.
pub fn zero_object(group: &str, version: &str, kind: &str) -> Option<Value> {
    let t = types();
    let root = t.roots.get(&format!("{group}/{version}/{kind}"))?;
    Some(super::go_json::zero(root, &t.defs))
}

/// Decode a custom resource's `metadata` as ObjectMeta (unknown fields under
/// `metadata.` are reported like any other).
pub fn decode_object_meta(obj: &mut Value) -> Decoded {
    let t = types();
    let mut w = Walker {
        defs: &t.defs,
        out: Decoded::default(),
        fill: false,
    };
    let (Some(root), Some(meta)) = (t.roots.get(OBJECT_META), obj.get_mut("metadata")) else {
        return w.out;
    };
    if let Some(schema) = t.defs.get(root) {
        let mut ctx = Ctx {
            path: "metadata".into(),
            stack: vec!["metadata".into()],
            strukt: String::new(),
        };
        w.walk(meta, schema, &mut ctx);
    }
    w.out
}

/// Position in the document: the full path (with list indices) for unknown
/// fields, Go's field stack (without indices) and the innermost struct for
/// type errors.
struct Ctx {
    path: String,
    stack: Vec<String>,
    strukt: String,
}

impl Ctx {
    fn root(strukt: &str) -> Ctx {
        Ctx {
            path: String::new(),
            stack: Vec::new(),
            strukt: strukt.to_string(),
        }
    }
}

pub(super) fn short_name(def: &str) -> &str {
    def.rsplit('.').next().unwrap_or(def)
}

/// Go's name of a type: `v1.DeploymentSpec`, `int32`, `[]v1.Container`.
fn go_type(defs: &Map<String, Value>, s: &Value) -> String {
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or_default();
        let mut parts = name.rsplit('.');
        let last = parts.next().unwrap_or_default();
        return match parts.next() {
            Some(pkg) => format!("{pkg}.{last}"),
            None => last.to_string(),
        };
    }
    let _ = defs;
    match s.get("type").and_then(Value::as_str) {
        Some("integer") => match s.get("format").and_then(Value::as_str) {
            Some("int32") => "int32".into(),
            Some("int64") => "int64".into(),
            _ => "int".into(),
        },
        Some("number") => "float64".into(),
        Some("boolean") => "bool".into(),
        Some("string") if s.get("format").and_then(Value::as_str) == Some("byte") => {
            "[]uint8".into()
        }
        Some("string") => "string".into(),
        Some("array") => format!(
            "[]{}",
            s.get("items")
                .map_or_else(|| "interface {}".into(), |i| go_type(defs, i))
        ),
        Some("object") => match s.get("additionalProperties") {
            Some(a @ Value::Object(_)) => format!("map[string]{}", go_type(defs, a)),
            _ => "map[string]interface {}".into(),
        },
        _ => "interface {}".into(),
    }
}

/// Whether `q` matches `^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$`, the
/// shape `resource.ParseQuantity` checks first.
fn is_quantity(q: &str) -> bool {
    let b = q.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let start = i;
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
        i += 1;
    }
    if i == start {
        return false;
    }
    while i < b.len() && b"eEinumkKMGTP".contains(&b[i]) {
        i += 1;
    }
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    i == b.len()
}

/// How Go names a JSON value in `cannot unmarshal X`.
fn go_value(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Definitions that hold arbitrary JSON whatever their schema says.
pub(super) fn is_free_form(def: &str) -> bool {
    matches!(
        short_name(def),
        "JSON" | "FieldsV1" | "RawExtension" | "JSONSchemaPropsOrStringArray"
    )
}

struct Walker<'a> {
    defs: &'a Map<String, Value>,
    out: Decoded,
    /// Also add what Go always writes (after defaulting: see [`written`]).
    fill: bool,
}

impl<'a> Walker<'a> {
    fn type_error(&mut self, what: String, s: &Value, ctx: &Ctx) {
        if self.out.error.is_some() {
            return;
        }
        let ty = go_type(self.defs, s);
        let msg = if ctx.stack.is_empty() {
            format!("json: cannot unmarshal {what} into Go value of type {ty}")
        } else {
            format!(
                "json: cannot unmarshal {what} into Go struct field {}.{} of type {ty}",
                ctx.strukt,
                ctx.stack.join(".")
            )
        };
        self.out.error = Some(msg);
    }

    /// Decodes `v` as Go would into the type `schema` describes: resolves a
    /// `$ref`, then `oneOf`, int-or-string or the declared type.
    fn walk(&mut self, v: &mut Value, schema: &Value, ctx: &mut Ctx) {
        let Some((s, def_name)) = self.resolve(schema) else {
            return;
        };
        if v.is_null() {
            return;
        }
        if let Some(alts) = s.get("oneOf").and_then(Value::as_array) {
            self.one_of(v, alts, ctx);
        } else if s.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) {
            self.int_or_string(v, schema, def_name, ctx);
        } else {
            self.typed(v, schema, s, def_name, ctx);
        }
    }

    /// The schema behind a `$ref` and its definition's name; `None` when the
    /// walk stops (free-form JSON, or a definition this document lacks).
    fn resolve<'s>(&self, schema: &'s Value) -> Option<(&'s Value, Option<&'s str>)>
    where
        'a: 's,
    {
        let Some(r) = schema.get("$ref").and_then(Value::as_str) else {
            return Some((schema, None));
        };
        let name = r.rsplit('/').next().unwrap_or_default();
        if is_free_form(name) {
            return None;
        }
        self.defs.get(name).map(|d| (d, Some(name)))
    }

    /// JSONSchemaPropsOrArray / OrBool: the branch of the value's type.
    fn one_of(&mut self, v: &mut Value, alts: &[Value], ctx: &mut Ctx) {
        let pick = alts.iter().find(|a| {
            let t = a.get("type").and_then(Value::as_str);
            match v {
                Value::Array(_) => t == Some("array"),
                Value::Bool(_) => t == Some("boolean"),
                _ => a.get("$ref").is_some(),
            }
        });
        if let Some(a) = pick {
            self.walk(v, a, ctx);
        }
    }

    /// `x-kubernetes-int-or-string` (IntOrString, Quantity): a string, or an
    /// integer (any number for a Quantity, whose text must parse).
    fn int_or_string(&mut self, v: &Value, schema: &Value, def_name: Option<&str>, ctx: &Ctx) {
        let quantity = def_name.is_some_and(|d| short_name(d) == "Quantity");
        if quantity
            && let Value::String(q) = v
            && !is_quantity(q)
            && self.out.error.is_none()
        {
            self.out.error = Some(
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".into(),
            );
            return;
        }
        let ok = match v {
            Value::String(_) => true,
            Value::Number(n) => quantity || n.is_i64() || n.is_u64(),
            _ => false,
        };
        if !ok {
            let shown = schema_with_ref(schema);
            self.type_error(go_value(v).into(), &shown, ctx);
        }
    }

    /// A value against its declared `type` (`s`, resolved from `schema`).
    fn typed(
        &mut self,
        v: &mut Value,
        schema: &Value,
        s: &Value,
        def_name: Option<&str>,
        ctx: &mut Ctx,
    ) {
        let shown = schema_with_ref(schema);
        match (s.get("type").and_then(Value::as_str), &mut *v) {
            (Some("integer"), Value::Number(n)) => {
                let fits = match s.get("format").and_then(Value::as_str) {
                    Some("int32") => n.as_i64().is_some_and(|x| i32::try_from(x).is_ok()),
                    _ => n.is_i64(),
                };
                if !fits {
                    self.type_error(format!("number {n}"), &shown, ctx);
                }
            }
            (Some("number"), Value::Number(_)) | (Some("boolean"), Value::Bool(_)) => {}
            (Some("string"), Value::String(text)) => {
                if s.get("format").and_then(Value::as_str) == Some("byte")
                    && let Err(e) =
                        base64::engine::general_purpose::STANDARD.decode(text.as_bytes())
                    && self.out.error.is_none()
                {
                    self.out.error = Some(go_base64_error(&e, text.len()));
                }
            }
            (Some("array"), Value::Array(items)) => {
                if let Some(item) = s.get("items") {
                    self.each(items.iter_mut().enumerate(), item, ctx, |base, i| {
                        format!("{base}[{i}]")
                    });
                }
            }
            (Some("object") | None, Value::Object(map)) => self.object_value(map, s, def_name, ctx),
            (None, _) => {}
            (Some(_), other) => {
                let what = go_value(other).to_string();
                self.type_error(what, &shown, ctx);
            }
        }
    }

    /// Walks each `(key, child)` against `schema`, at the path `at(base, key)`.
    fn each<'v, K>(
        &mut self,
        children: impl Iterator<Item = (K, &'v mut Value)>,
        schema: &Value,
        ctx: &mut Ctx,
        at: impl Fn(&str, K) -> String,
    ) {
        let base = ctx.path.clone();
        for (k, child) in children {
            ctx.path = at(&base, k);
            self.walk(child, schema, ctx);
        }
        ctx.path = base;
    }

    /// A JSON object: a struct (`properties`; Go's omitempty and, with
    /// `fill`, what Go always writes) or a map (`additionalProperties`).
    fn object_value(
        &mut self,
        map: &mut Map<String, Value>,
        s: &Value,
        def_name: Option<&str>,
        ctx: &mut Ctx,
    ) {
        if let Some(props) = s.get("properties").and_then(Value::as_object) {
            let strukt = def_name.map_or(ctx.strukt.clone(), |d| short_name(d).into());
            self.object(map, props, &strukt, ctx);
            if let Some(d) = def_name {
                super::go_json::drop_omitted(d, map);
                if self.fill {
                    super::go_json::fill_written(d, map, self.defs);
                }
            }
        } else if let Some(add) = s.get("additionalProperties").filter(|a| a.is_object()) {
            self.each(map.iter_mut(), add, ctx, |base, k: &String| join(base, k));
        }
    }

    fn object(
        &mut self,
        map: &mut Map<String, Value>,
        props: &Map<String, Value>,
        strukt: &str,
        ctx: &mut Ctx,
    ) {
        let keys: Vec<String> = map.keys().cloned().collect();
        let base_path = ctx.path.clone();
        let base_struct = std::mem::replace(&mut ctx.strukt, strukt.to_string());
        for k in keys {
            let path = join(&base_path, &k);
            let Some(sub) = props.get(&k) else {
                map.remove(&k);
                self.out.unknown.push(path);
                continue;
            };
            if map.get(&k).is_some_and(Value::is_null) {
                // Go leaves the field unset; the stored object omits it.
                map.remove(&k);
                continue;
            }
            ctx.path = path;
            ctx.stack.push(k.clone());
            ctx.strukt = strukt.to_string();
            if let Some(child) = map.get_mut(&k) {
                self.walk(child, sub, ctx);
            }
            ctx.stack.pop();
        }
        ctx.path = base_path;
        ctx.strukt = base_struct;
    }
}

/// The schema used for naming the Go type: a `$ref` names its definition.
fn schema_with_ref(s: &Value) -> Value {
    match s.get("$ref") {
        Some(r) => serde_json::json!({"$ref": r}),
        None => s.clone(),
    }
}

fn go_base64_error(e: &base64::DecodeError, len: usize) -> String {
    let at = match e {
        base64::DecodeError::InvalidByte(i, _) => *i,
        base64::DecodeError::InvalidLastSymbol(i, _) => *i,
        base64::DecodeError::InvalidLength(_) | base64::DecodeError::InvalidPadding => len / 4 * 4,
    };
    format!("illegal base64 data at input byte {at}")
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_have_kubes_shape() {
        for ok in ["1", "100m", "1.5Gi", "+2e3", "-1", "0.5"] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["lots", "", "1 Gi", "Gi", "1Gi3x"] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }

    #[test]
    fn wrong_type_names_the_go_struct_field() {
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"}, "spec": {"replicas": "three"}});
        let out = decode("apps", "v1", "Deployment", &mut d).unwrap();
        assert_eq!(
            out.error.as_deref(),
            Some(
                "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
            )
        );
    }

    #[test]
    fn nested_lists_keep_the_field_stack_without_indices() {
        let mut d =
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": 5}]}}}});
        let out = decode("apps", "v1", "Deployment", &mut d).unwrap();
        assert_eq!(
            out.error.as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field Container.spec.template.spec.containers.image of type string"
            )
        );
    }

    #[test]
    fn unknown_fields_are_dropped_and_reported_with_indices() {
        let mut d = json!({"metadata": {"name": "d", "bogus": 1},
            "spec": {"foo": 1, "template": {"spec": {"containers": [{"name": "a", "image": "x", "bar": true}]}}}});
        let out = decode("apps", "v1", "Deployment", &mut d).unwrap();
        assert!(out.error.is_none());
        assert_eq!(
            out.unknown,
            vec![
                "metadata.bogus",
                "spec.foo",
                "spec.template.spec.containers[0].bar"
            ]
        );
        assert!(d["spec"].get("foo").is_none());
    }

    #[test]
    fn int_or_string_quantity_and_bytes() {
        let mut s = json!({"spec": {"ports": [{"port": 80, "targetPort": "http"}]}});
        assert!(decode("", "v1", "Service", &mut s).unwrap().error.is_none());
        let mut p =
            json!({"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": 0.5}}}]}});
        assert!(decode("", "v1", "Pod", &mut p).unwrap().error.is_none());
        let mut sec = json!({"data": {"k": "not base64!"}});
        let out = decode("", "v1", "Secret", &mut sec).unwrap();
        assert!(
            out.error
                .unwrap()
                .starts_with("illegal base64 data at input byte")
        );
        let mut cm = json!({"data": {"k": 1}});
        let out = decode("", "v1", "ConfigMap", &mut cm).unwrap();
        assert!(
            out.error
                .unwrap()
                .contains("Go struct field ConfigMap.data")
        );
    }
}

//! What structured-merge-diff makes of the configuration of a server-side
//! apply to a built-in kind before anything else (`ObjectToTyped`): a field
//! the type lacks is "field not declared in schema", a value of the wrong type
//! is "expected string, got …". kube-apiserver returns that plain error as a
//! 500 without a reason (kubernetes/kubernetes#139253), whatever
//! `fieldValidation` says; a create or update with the same body is instead a
//! 400 from the JSON decoder ([`super::decode`]).
//!
//! The types are k8s-openapi's schemas, read as kube-openapi's `schemaconv`
//! reads kube-apiserver's own: integers and numbers are numeric, strings
//! (plain or `byte`) are strings, other string formats (`date-time`),
//! int-or-string and Quantity are "any scalar", free-form JSON takes anything.
//! List items are named by the merge hints of [`crate::patch::Schema`]
//! (`[name="c"]`, `[containerPort=80,protocol="TCP"]`, `[="a"]`, `[0]`).
//! Hand-written because the messages must be Go's, value printing included.
//!
//! Known approximations: Go iterates a map in random order, so with several
//! errors the real server lists them in any order (and, as it stops reading a
//! map at its first unknown field, may list fewer); this walk goes in document
//! order. An item of a keyed list without its keys stops the walk of that list
//! here; the apply reports it afterwards (`patch::walk::validate`).

use serde_json::{Map, Value};

use super::typed::{is_free_form, kind_schema, short_name};
use crate::patch::{Node, Schema, item_path};

/// The errors structured-merge-diff reports for `config`, each as
/// `.path: message`; `None` for a kind without a known type.
pub(super) fn errors(
    group: &str,
    version: &str,
    kind: &str,
    config: &Value,
) -> Option<Vec<String>> {
    let (defs, root) = kind_schema(group, version, kind)?;
    let hints = Schema::for_builtin(group, kind);
    let mut w = Walk {
        defs,
        errors: Vec::new(),
    };
    w.walk(config, &root, &hints.root, &mut String::new());
    Some(w.errors)
}

/// The whole error as `ValidationErrors.Error()` prints it.
pub(super) fn message(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => {
            let mut s = String::from("errors:");
            for e in many {
                s.push_str("\n  ");
                s.push_str(e);
            }
            s
        }
    }
}

/// structured-merge-diff's scalar types.
#[derive(Clone, Copy)]
enum Scalar {
    Numeric,
    String,
    Boolean,
    /// Any scalar (int-or-string, Quantity, date-time).
    Untyped,
}

/// structured-merge-diff's view of one schema position.
enum Atom<'s> {
    Scalar(Scalar),
    /// A struct (`properties`) or a map (`additionalProperties`).
    Map {
        fields: Option<&'s Map<String, Value>>,
        elem: Option<&'s Value>,
    },
    List(Option<&'s Value>),
    /// Free-form: anything goes.
    Any,
}

struct Walk<'a> {
    defs: &'a Map<String, Value>,
    errors: Vec<String>,
}

impl<'a> Walk<'a> {
    fn atom<'s>(&self, schema: &'s Value) -> Atom<'s>
    where
        'a: 's,
    {
        let mut s = schema;
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            let name = r.rsplit('/').next().unwrap_or_default();
            if is_free_form(name) {
                return Atom::Any;
            }
            if short_name(name) == "Quantity" {
                return Atom::Scalar(Scalar::Untyped);
            }
            match self.defs.get(name) {
                Some(d) => s = d,
                None => return Atom::Any,
            }
        }
        if s.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) {
            return Atom::Scalar(Scalar::Untyped);
        }
        if s.get("oneOf").is_some() {
            return Atom::Any;
        }
        let fields = s.get("properties").and_then(Value::as_object);
        let elem = s.get("additionalProperties").filter(|a| a.is_object());
        match s.get("type").and_then(Value::as_str) {
            Some("integer" | "number") => Atom::Scalar(Scalar::Numeric),
            Some("boolean") => Atom::Scalar(Scalar::Boolean),
            Some("string") => match s.get("format").and_then(Value::as_str) {
                None | Some("" | "byte") => Atom::Scalar(Scalar::String),
                Some(_) => Atom::Scalar(Scalar::Untyped),
            },
            Some("array") => Atom::List(s.get("items")),
            _ if fields.is_some() || elem.is_some() => Atom::Map { fields, elem },
            _ => Atom::Any,
        }
    }

    fn error(&mut self, path: &str, msg: String) {
        self.errors.push(format!("{path}: {msg}"));
    }

    fn walk(&mut self, v: &Value, schema: &Value, hints: &Node, path: &mut String) {
        if v.is_null() {
            return;
        }
        match self.atom(schema) {
            Atom::Any => {}
            Atom::Scalar(t) => self.scalar(t, v, path),
            Atom::Map { fields, elem } => {
                let Value::Object(m) = v else {
                    return self.error(path, format!("expected map, got &{{{}}}", go_v(v)));
                };
                let base = path.len();
                for (k, child) in m {
                    path.push('.');
                    path.push_str(k);
                    match fields.and_then(|f| f.get(k)).or(elem) {
                        Some(sub) => self.walk(child, sub, hints.child(k), path),
                        None => {
                            self.error(path, "field not declared in schema".into());
                            path.truncate(base);
                            // structured-merge-diff stops reading the map here.
                            return;
                        }
                    }
                    path.truncate(base);
                }
            }
            Atom::List(items) => {
                let Value::Array(list) = v else {
                    return self.error(path, format!("expected list, got &{{{}}}", go_v(v)));
                };
                let Some(items) = items else { return };
                let base = path.len();
                for (i, item) in list.iter().enumerate() {
                    let Some(pe) = item_path(hints, item, i) else {
                        return;
                    };
                    path.push_str(&pe);
                    self.walk(item, items, hints.item(), path);
                    path.truncate(base);
                }
            }
        }
    }

    /// `validateScalar`: each type prints the value its own way (`%T`,
    /// `%#v`, `%v` of the `*valueUnstructured`).
    fn scalar(&mut self, t: Scalar, v: &Value, path: &str) {
        let msg = match (t, v) {
            (Scalar::Numeric, Value::Number(_))
            | (Scalar::String, Value::String(_))
            | (Scalar::Boolean, Value::Bool(_))
            | (Scalar::Untyped, Value::Number(_) | Value::String(_) | Value::Bool(_)) => return,
            (Scalar::Numeric, _) => format!("expected numeric (int or float), got {}", go_type(v)),
            (Scalar::String, _) => format!(
                "expected string, got &value.valueUnstructured{{Value:{}}}",
                go_sharp_v(v)
            ),
            (Scalar::Boolean, _) => format!("expected boolean, got &{{{}}}", go_v(v)),
            (Scalar::Untyped, _) => format!("expected any scalar, got &{{{}}}", go_v(v)),
        };
        self.error(path, msg);
    }
}

/// Go's `%T` of a decoded value.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if go_int(n).is_some() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// The number as kube-apiserver holds it: the apply body goes YAML → JSON
/// (`encoding/json` writes a whole float as an integer) → `int64` when the
/// text parses as one, else `float64`.
fn go_int(n: &serde_json::Number) -> Option<i64> {
    if let Some(i) = n.as_i64() {
        return Some(i);
    }
    let f = n.as_f64()?;
    // Whole and within int64 (-2^63 is, 2^63 is not).
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    (f.fract() == 0.0 && (-TWO_63..TWO_63).contains(&f)).then_some(f as i64)
}

fn go_number(n: &serde_json::Number) -> String {
    match go_int(n) {
        Some(i) => i.to_string(),
        None => go_float(n.as_f64().unwrap_or_default()),
    }
}

/// Go's `%v` of a `float64` (`strconv.FormatFloat(f, 'g', -1, 64)`): the
/// shortest digits, with an exponent (`1.5e-05`, `1.2345675e+06`) when it is
/// below -4 or at least 6 (Go's rule for the shortest form).
fn go_float(f: f64) -> String {
    if !f.is_finite() {
        return f.to_string();
    }
    if f == 0.0 {
        return "0".into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: `-1.2345675e6`.
    let sci = format!("{f:e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mant}e{sign}{:02}", exp.abs());
    }
    f.to_string()
}

/// Go's `%v` of a decoded value: `map[a:1 k:v]`, `[a 2]`, strings bare.
fn go_v(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_v).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .iter()
                .map(|k| format!("{k}:{}", go_v(&m[*k])))
                .collect();
            format!("map[{}]", items.join(" "))
        }
    }
}

/// Go's `%#v` of a decoded value held in an `interface{}`:
/// `map[string]interface {}{"a":1}`, `[]interface {}{"a", 2}`. Strings are
/// quoted as JSON does, which is Go's quoting for printable text.
fn go_sharp_v(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => Value::String(s.clone()).to_string(),
        Value::Array(a) => format!(
            "[]interface {{}}{{{}}}",
            a.iter().map(go_sharp_v).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), go_sharp_v(&m[*k])))
                .collect();
            format!("map[string]interface {{}}{{{}}}", items.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errs(group: &str, kind: &str, v: Value) -> Vec<String> {
        errors(group, "v1", kind, &v).unwrap_or_default()
    }

    #[test]
    fn go_prints_values_as_kube_apiserver_holds_them() {
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(1.5e-5), "1.5e-05");
        assert_eq!(go_float(1_234_567.5), "1.2345675e+06");
        assert_eq!(go_float(123_456.7), "123456.7");
        assert_eq!(go_float(1e100), "1e+100");
        assert_eq!(go_v(&json!(1_000_000.0)), "1000000");
        assert_eq!(go_v(&json!(1e20)), "1e+20");
        assert_eq!(
            go_v(&json!({"k": "v", "a": [1, null]})),
            "map[a:[1 <nil>] k:v]"
        );
        assert_eq!(
            go_sharp_v(&json!(["a", 2, null, "x\"y"])),
            r#"[]interface {}{"a", 2, interface {}(nil), "x\"y"}"#
        );
        assert_eq!(
            go_sharp_v(&json!({"k": "v", "a": 1})),
            r#"map[string]interface {}{"a":1, "k":"v"}"#
        );
        assert_eq!(go_type(&json!({})), "map[string]interface {}");
    }

    #[test]
    fn each_type_has_its_wording() {
        let e = errs("", "ConfigMap", json!({"data": {"message": 5}}));
        assert_eq!(
            e,
            [".data.message: expected string, got &value.valueUnstructured{Value:5}"]
        );
        let e = errs("", "ConfigMap", json!({"immutable": "yes", "data": "x"}));
        assert_eq!(
            e,
            [
                ".immutable: expected boolean, got &{yes}",
                ".data: expected map, got &{x}"
            ]
        );
        let e = errs(
            "",
            "ConfigMap",
            json!({"metadata": {"finalizers": "x", "creationTimestamp": {"a": 1}}}),
        );
        assert_eq!(
            e,
            [
                ".metadata.finalizers: expected list, got &{x}",
                ".metadata.creationTimestamp: expected any scalar, got &{map[a:1]}"
            ]
        );
        let e = errs("apps", "Deployment", json!({"spec": {"replicas": "two"}}));
        assert_eq!(
            e,
            [".spec.replicas: expected numeric (int or float), got string"]
        );
    }

    #[test]
    fn list_items_are_named_by_their_keys() {
        let d = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "x", "args": ["a", 5],
             "ports": [{"containerPort": 80, "name": 5}],
             "resources": {"limits": {"cpu": {"a": 1}}}}]}}}});
        let e = errs("apps", "Deployment", d);
        let c = r#".spec.template.spec.containers[name="c"]"#;
        assert_eq!(
            e,
            [
                format!("{c}.args[1]: expected string, got &value.valueUnstructured{{Value:5}}"),
                format!(
                    r#"{c}.ports[containerPort=80,protocol="TCP"].name: expected string, got &value.valueUnstructured{{Value:5}}"#
                ),
                format!("{c}.resources.limits.cpu: expected any scalar, got &{{map[a:1]}}"),
            ]
        );
        let e = errs("", "ConfigMap", json!({"metadata": {"finalizers": [5]}}));
        assert_eq!(
            e,
            [".metadata.finalizers[=5]: expected string, got &value.valueUnstructured{Value:5}"]
        );
    }

    #[test]
    fn an_unknown_field_stops_its_map() {
        let e = errs(
            "apps",
            "Deployment",
            json!({"spec": {"bogus": 1, "replicas": "two"}, "metadata": {"name": 5}}),
        );
        assert_eq!(
            e,
            [
                ".spec.bogus: field not declared in schema",
                ".metadata.name: expected string, got &value.valueUnstructured{Value:5}"
            ]
        );
        assert_eq!(
            message(&e),
            "errors:\n  .spec.bogus: field not declared in schema\n  .metadata.name: expected string, got &value.valueUnstructured{Value:5}"
        );
        let ok = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"x": "y"}}, "data": {"k": "v"}, "binaryData": {"b": "YQ=="}});
        assert!(errs("", "ConfigMap", ok).is_empty());
    }
}

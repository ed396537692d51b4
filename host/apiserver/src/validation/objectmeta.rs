//! The object-meta rules every kind shares (apimachinery's
//! `ValidateObjectMeta`): names by kind (DNS subdomain, DNS label, DNS-1035
//! label, path segment), labels, annotations and label selectors, worded as
//! `k8s.io/apimachinery/pkg/util/validation` words them.

use serde_json::{Map, Value};

use crate::errors::Cause;

const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";

/// Total size limit of `metadata.annotations` (keys and values).
pub const ANNOTATIONS_LIMIT: usize = 256 * 1024;

/// apimachinery's `RegexError`: the message, examples and the regex.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

pub fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

fn is_alnum_lower(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn label_like(s: &str, first: fn(char) -> bool) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(first)
        && s.chars().all(|c| is_alnum_lower(c) || c == '-')
        && s.ends_with(is_alnum_lower)
}

/// `IsDNS1123Subdomain`.
pub fn dns1123_subdomain(v: &str) -> Vec<String> {
    let mut out = Vec::new();
    if v.len() > 253 {
        out.push(max_len_error(253));
    }
    if !v.split('.').all(|l| label_like(l, is_alnum_lower)) {
        out.push(regex_error(SUBDOMAIN_MSG, SUBDOMAIN_FMT, &["example.com"]));
    }
    out
}

/// `IsDNS1123Label` (a valid subdomain that is not a label has dots).
pub fn dns1123_label(v: &str) -> Vec<String> {
    let mut out = Vec::new();
    if v.len() > 63 {
        out.push(max_len_error(63));
    }
    if !label_like(v, is_alnum_lower) {
        if v.split('.').all(|l| label_like(l, is_alnum_lower)) {
            out.push("must not contain dots".into());
        } else {
            out.push(regex_error(LABEL_MSG, LABEL_FMT, &["my-name", "123-abc"]));
        }
    }
    out
}

/// `IsValidPathSegmentName` (RBAC object names such as `system:controller:x`).
fn path_segment(v: &str) -> Vec<String> {
    let mut out = Vec::new();
    if v == "." || v == ".." {
        out.push(format!("may not be '{v}'"));
    }
    for bad in ["/", "%"] {
        if v.contains(bad) {
            out.push(format!("may not contain '{bad}'"));
        }
    }
    out
}

fn qualified_name_part(name: &str) -> bool {
    name.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// `IsQualifiedName` (annotation keys; label keys say "a valid label key"
/// when the shape is wrong).
pub fn qualified_name(v: &str) -> Vec<String> {
    qualified(v, "a qualified name")
}

/// Label keys (`metadata.labels`, selectors).
pub fn label_key(v: &str) -> Vec<String> {
    qualified(v, "a valid label key")
}

fn qualified(v: &str, what: &str) -> Vec<String> {
    let mut out = Vec::new();
    let parts: Vec<&str> = v.split('/').collect();
    let name = match parts.as_slice() {
        [n] => *n,
        [prefix, n] => {
            if prefix.is_empty() {
                out.push("prefix part must be non-empty".to_string());
            } else {
                out.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            n
        }
        _ => {
            out.push(format!(
                "{what} {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return out;
        }
    };
    if name.is_empty() {
        out.push("name part must be non-empty".to_string());
    } else {
        if name.len() > 63 {
            out.push("name part must be no more than 63 bytes".into());
        }
        if !qualified_name_part(name) {
            out.push(format!(
                "name part {}",
                regex_error(
                    QUALIFIED_NAME_MSG,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
        }
    }
    out
}

/// `IsValidLabelValue`.
pub fn label_value(v: &str) -> Vec<String> {
    let mut out = Vec::new();
    if v.len() > 63 {
        out.push("must be no more than 63 bytes".into());
    }
    if !(v.is_empty() || qualified_name_part(v)) {
        out.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    out
}

/// Go's `%q` of a string (as in `Invalid value: "x"`).
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

pub fn invalid(field: &str, value: &str, msg: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field: field.to_string(),
        message: format!("Invalid value: {}: {msg}", quote(value)),
    }
}

/// The name rule of a resource: which `Is…` check `metadata.name` gets.
pub fn check_name(group: &str, resource: &str, name: &str) -> Vec<Cause> {
    let msgs = match (group, resource) {
        // Service names are DNS labels too since RelaxedServiceNameValidation.
        ("", "namespaces" | "services") => dns1123_label(name),
        ("rbac.authorization.k8s.io", _) => path_segment(name),
        ("batch", "cronjobs") => {
            let mut m = dns1123_subdomain(name);
            if name.len() > 52 {
                m.insert(0, max_len_error(52));
            }
            m
        }
        _ => dns1123_subdomain(name),
    };
    msgs.iter()
        .map(|m| invalid("metadata.name", name, m))
        .collect()
}

/// `ValidateLabels` at `field` (`metadata.labels`, `spec.selector.matchLabels`).
pub fn check_label_map(labels: &Map<String, Value>, field: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    for (k, v) in labels {
        for m in label_key(k) {
            out.push(invalid(field, k, &m));
        }
        if let Some(s) = v.as_str() {
            for m in label_value(s) {
                out.push(invalid(field, s, &m));
            }
        }
    }
    out
}

/// `ValidateLabelSelector` at `field` (`spec.selector`).
pub fn check_selector(sel: &Value, field: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    if let Some(ml) = sel.get("matchLabels").and_then(Value::as_object) {
        out.extend(check_label_map(ml, &format!("{field}.matchLabels")));
    }
    let exprs = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, e) in exprs.iter().enumerate() {
        let at = format!("{field}.matchExpressions[{i}]");
        let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
        let n = e
            .get("values")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        match op {
            "In" | "NotIn" if n == 0 => out.push(Cause {
                reason: "FieldValueRequired",
                field: format!("{at}.values"),
                message: "Required value: must be specified when `operator` is 'In' or 'NotIn'"
                    .into(),
            }),
            "Exists" | "DoesNotExist" if n > 0 => out.push(Cause {
                reason: "FieldValueForbidden",
                field: format!("{at}.values"),
                message:
                    "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                        .into(),
            }),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => out.push(invalid(
                &format!("{at}.operator"),
                other,
                "not a valid selector operator",
            )),
        }
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        for m in label_key(key) {
            out.push(invalid(&format!("{at}.key"), key, &m));
        }
    }
    out
}

/// Labels, annotations and owner references of any object.
pub fn check(obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let meta = obj.get("metadata");
    if let Some(labels) = meta
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
    {
        out.extend(check_label_map(labels, "metadata.labels"));
    }
    if let Some(ann) = meta
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object)
    {
        let mut total = 0;
        for (k, v) in ann {
            for m in qualified_name(&k.to_lowercase()) {
                out.push(invalid("metadata.annotations", k, &m));
            }
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > ANNOTATIONS_LIMIT {
            out.push(Cause {
                reason: "FieldValueTooLong",
                field: "metadata.annotations".into(),
                message: format!("Too long: may not be more than {ANNOTATIONS_LIMIT} bytes"),
            });
        }
    }
    out.extend(crate::meta::check_owner_references(obj));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn long_names_say_how_long_they_may_be() {
        let c = check_name("", "configmaps", &"a".repeat(254));
        assert_eq!(c.len(), 1);
        assert!(
            c[0].message
                .ends_with("must be no more than 253 characters")
        );
        let c = check_name("", "namespaces", &"a".repeat(64));
        assert!(c[0].message.ends_with("must be no more than 63 characters"));
        assert!(check_name("", "services", "1abc").is_empty());
        assert_eq!(
            check_name("", "namespaces", "a.b")[0].message,
            "Invalid value: \"a.b\": must not contain dots"
        );
        assert!(check_name("rbac.authorization.k8s.io", "clusterroles", "system:x:Y").is_empty());
    }

    #[test]
    fn label_keys_values_and_selectors() {
        let o = json!({"metadata": {"labels": {"a": "ok", "b": "not ok", "example.com/x": "y", "/x": "y"}}});
        let c = check(&o);
        assert_eq!(c.len(), 2, "{c:?}");
        assert!(
            c[0].message
                .contains("a valid label must be an empty string")
        );
        assert!(c[1].message.contains("prefix part must be non-empty"));
        let sel = json!({"matchExpressions": [{"key": "a", "operator": "In"}, {"key": "b", "operator": "Foo"}]});
        let c = check_selector(&sel, "spec.selector");
        assert_eq!(c[0].field, "spec.selector.matchExpressions[0].values");
        assert_eq!(c[1].field, "spec.selector.matchExpressions[1].operator");
    }
}

//! Label and field selectors, parsed as kube-apiserver parses them
//! (`k8s.io/apimachinery/pkg/labels` grammar: `=`, `==`, `!=`, `in`, `notin`,
//! exists, `!` not-exists, `>`/`<`). Hand-written: no crate implements this grammar.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    Gt(String, i64),
    Lt(String, i64),
}

/// A parsed label selector (all requirements must hold).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<Req>);

/// Split on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 317
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn set_values(rest: &str) -> Option<Vec<String>> {
    let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector(reqs));
        }
        for part in split_top(s) {
            let p = part.trim();
            let bad = || format!("unable to parse requirement: found '{p}', expected: identifier");
            let req = if let Some(k) = p.strip_prefix('!') {
                Req::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = p.split_once("!=") {
                Req::Ne(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = p.split_once("==") {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = p.split_once('=') {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = p.split_once(" notin ") {
                Req::NotIn(k.trim().into(), set_values(v).ok_or_else(bad)?)
            } else if let Some((k, v)) = p.split_once(" in ") {
                Req::In(k.trim().into(), set_values(v).ok_or_else(bad)?)
            } else if let Some((k, v)) = p.split_once('>') {
                Req::Gt(k.trim().into(), v.trim().parse().map_err(|_| bad())?)
            } else if let Some((k, v)) = p.split_once('<') {
                Req::Lt(k.trim().into(), v.trim().parse().map_err(|_| bad())?)
            } else {
                Req::Exists(p.to_string())
            };
            let key = match &req {
                Req::Eq(k, _)
                | Req::Ne(k, _)
                | Req::In(k, _)
                | Req::NotIn(k, _)
                | Req::Exists(k)
                | Req::NotExists(k)
                | Req::Gt(k, _)
                | Req::Lt(k, _) => k,
            };
            if !valid_key(key) {
                return Err(bad());
            }
            // `a===b`: the lexer finds a third `=` where a value starts.
            if let Req::Eq(_, v) | Req::Ne(_, v) = &req
                && v.starts_with('=')
            {
                return Err("unable to parse requirement: found '=', expected: identifier".into());
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::Ne(k, v) => get(k) != Some(v.as_str()),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Req::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
            Req::Gt(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x > *n),
            Req::Lt(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x < *n),
        })
    }
}

/// A parsed field selector: `path=value`, `path==value`, `path!=value`.
#[derive(Debug, Clone, Default)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// `allowed` are the field labels the resource supports besides
    /// `metadata.name` and `metadata.namespace`.
    pub fn parse(s: &str, allowed: &[&str]) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector(reqs));
        }
        for part in s.split(',') {
            let p = part.trim();
            let (k, eq, v) = if let Some((k, v)) = p.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = p.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = p.split_once('=') {
                (k, true, v)
            } else {
                return Err(format!("invalid selector: '{s}'; can't understand '{p}'"));
            };
            let k = k.trim();
            if k != "metadata.name" && k != "metadata.namespace" && !allowed.contains(&k) {
                // Resources with only the generic fields answer with the
                // generic message; others with their conversion function's.
                return Err(if allowed.is_empty() {
                    format!(
                        "\"{k}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                    )
                } else {
                    format!("field label not supported: {k}")
                });
            }
            reqs.push((k.to_string(), eq, v.trim().to_string()));
        }
        Ok(FieldSelector(reqs))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, eq, want)| {
            let mut cur = Some(obj);
            for seg in path.split('.') {
                cur = cur.and_then(|c| c.get(seg));
            }
            let got = match cur {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (got == *want) == *eq
        })
    }
}

/// Extra field labels per resource key (kube-apiserver's field label conversions).
pub fn extra_fields(resource_key: &str) -> &'static [&'static str] {
    match resource_key {
        "/secrets" => &["type"],
        "/namespaces" => &["status.phase"],
        "/events" => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        "events.k8s.io/events" => &[
            "regarding.kind",
            "regarding.name",
            "regarding.namespace",
            "reason",
            "type",
        ],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "n", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn label_operators() {
        let o = obj(json!({"app": "web", "tier": "front", "n": "5"}));
        let yes = [
            "app=web",
            "app==web",
            "app!=db",
            "app in (web, db)",
            "tier notin (back)",
            "app",
            "!missing",
            "n>3",
            "n<6",
            "app=web,tier=front",
            "missing notin (x)",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).unwrap().matches(&o), "{s}");
        }
        let no = [
            "app=db",
            "app in (db)",
            "!app",
            "missing",
            "n>5",
            "app=web,tier=back",
        ];
        for s in no {
            assert!(!LabelSelector::parse(s).unwrap().matches(&o), "{s}");
        }
    }

    #[test]
    fn bad_label_selector_is_an_error() {
        assert!(LabelSelector::parse("a in x").is_err());
        assert!(LabelSelector::parse("a b=c").is_err());
    }

    #[test]
    fn field_selectors_and_unsupported_labels() {
        let o = obj(json!({}));
        let f = FieldSelector::parse("metadata.name=n,metadata.namespace!=x", &[]).unwrap();
        assert!(f.matches(&o));
        assert!(
            !FieldSelector::parse("metadata.name=m", &[])
                .unwrap()
                .matches(&o)
        );
        assert_eq!(
            FieldSelector::parse("spec.x=1", &[]).unwrap_err(),
            "\"spec.x\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        assert_eq!(
            FieldSelector::parse("spec.x=1", &["spec.nodeName"]).unwrap_err(),
            "field label not supported: spec.x"
        );
        // kube-apiserver v1.37.2 answers `a===b` this way.
        assert_eq!(
            LabelSelector::parse("a===b").err().as_deref(),
            Some("unable to parse requirement: found '=', expected: identifier")
        );
    }
}

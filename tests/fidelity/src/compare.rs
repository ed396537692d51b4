//! Comparison of two runs and the report (JSON and markdown).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::run::Observations;

/// Result of one check.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckResult {
    pub id: String,
    pub identical: bool,
    /// First difference: JSON path and both values (embedded, real).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difference: Option<String>,
}

/// identical / total for one area.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AreaFigure {
    pub identical: usize,
    pub total: usize,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Report {
    pub embedded_version: String,
    pub real_version: String,
    pub areas: BTreeMap<String, AreaFigure>,
    pub identical: usize,
    pub total: usize,
    pub checks: Vec<CheckResult>,
}

pub fn area_of(id: &str) -> &str {
    id.split('/').next().unwrap_or(id)
}

/// Compares the observations of both servers, check by check.
pub fn compare(embedded: &Observations, real: &Observations) -> Vec<CheckResult> {
    let ids: BTreeSet<&String> = embedded.keys().chain(real.keys()).collect();
    ids.into_iter()
        .map(|id| {
            let difference = match (embedded.get(id), real.get(id)) {
                (Some(a), Some(b)) if a == b => None,
                (Some(a), Some(b)) => Some(first_difference(
                    "",
                    &Value::from(a.clone()),
                    &Value::from(b.clone()),
                )),
                (Some(_), None) => Some("only observed on the embedded server".into()),
                (None, _) => Some("only observed on the real server".into()),
            };
            CheckResult {
                id: id.clone(),
                identical: difference.is_none(),
                difference,
            }
        })
        .collect()
}

/// Figures per area.
pub fn figures(results: &[CheckResult]) -> BTreeMap<String, AreaFigure> {
    let mut areas: BTreeMap<String, AreaFigure> = BTreeMap::new();
    for r in results {
        let f = areas.entry(area_of(&r.id).to_string()).or_default();
        f.total += 1;
        f.identical += usize::from(r.identical);
    }
    areas
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 300 {
        format!("{}…", s.chars().take(300).collect::<String>())
    } else {
        s
    }
}

/// Where `a` (embedded) and `b` (real) differ: for two responses with
/// different codes, both codes and messages; otherwise up to three paths with
/// both values.
pub fn first_difference(path: &str, a: &Value, b: &Value) -> String {
    if let (Some(x), Some(y)) = (response(a), response(b))
        && x["code"] != y["code"]
    {
        let say = |v: &Value| {
            let body = &v["body"];
            match body["kind"].as_str() {
                Some("Status") => format!(
                    "{} {} \"{}\"",
                    v["code"],
                    body["reason"].as_str().unwrap_or_default(),
                    body["message"].as_str().unwrap_or_default()
                ),
                _ => format!("{} {}", v["code"], body["kind"].as_str().unwrap_or("")),
            }
        };
        return format!("code: embedded {} / real {}", say(x), say(y));
    }
    let mut out = Vec::new();
    differences(path, a, b, &mut out);
    out.join("; ")
}

/// The single response view inside an observation list, if that is what it is.
fn response(v: &Value) -> Option<&Value> {
    let first = v.as_array().filter(|a| a.len() == 1)?.first()?;
    first.get("code").filter(|c| c.is_number())?;
    Some(first)
}

const MAX_DIFFERENCES: usize = 3;

fn differences(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    if out.len() >= MAX_DIFFERENCES || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            // What a reader checks first: the code, the reason, the message.
            let mut keys: Vec<&String> = x
                .keys()
                .chain(y.keys())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            keys.sort_by_key(|k| {
                (
                    !matches!(k.as_str(), "code" | "reason" | "message"),
                    k.as_str() == "managedFields",
                )
            });
            for k in keys {
                let p = format!("{path}.{k}");
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => differences(&p, u, v, out),
                    (Some(u), None) => {
                        out.push(format!("{p}: embedded has {}, real has none", short(u)))
                    }
                    (None, Some(v)) => {
                        out.push(format!("{p}: embedded has none, real has {}", short(v)))
                    }
                    (None, None) => {}
                }
                if out.len() >= MAX_DIFFERENCES {
                    return;
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                differences(&format!("{path}[{i}]"), u, v, out);
            }
        }
        (Value::Array(x), Value::Array(y)) => out.push(format!(
            "{path}: embedded has {} items, real has {} (embedded {} / real {})",
            x.len(),
            y.len(),
            short(a),
            short(b)
        )),
        _ => out.push(format!("{path}: embedded {} / real {}", short(a), short(b))),
    }
}

/// Why a check differs, by check-id prefix (the longest prefix wins);
/// `tests/fidelity/reasons.json`. Without one: "to fix".
pub type Reasons = BTreeMap<String, String>;

pub fn reason_for<'a>(reasons: &'a Reasons, id: &str) -> &'a str {
    reasons
        .iter()
        .filter(|(p, _)| id.starts_with(p.as_str()))
        .max_by_key(|(p, _)| p.len())
        .map(|(_, r)| r.as_str())
        .unwrap_or("to fix")
}

/// The markdown report: figures per area, then every difference with its reason.
pub fn markdown(r: &Report, reasons: &Reasons) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "Embedded server: {}; real kube-apiserver: {}.\n\n\
         Identical: **{} / {}** checks.\n\n| area | identical / total |\n| --- | --- |\n",
        r.embedded_version, r.real_version, r.identical, r.total
    ));
    for (a, f) in &r.areas {
        s.push_str(&format!("| {a} | {} / {} |\n", f.identical, f.total));
    }
    s.push_str("\n## Differences\n\nEach: check id — reason — what differs (embedded / real).\n");
    let mut area = "";
    for c in r.checks.iter().filter(|c| !c.identical) {
        if area_of(&c.id) != area {
            area = area_of(&c.id);
            s.push_str(&format!("\n### {area}\n\n"));
        }
        let what = c
            .difference
            .as_deref()
            .unwrap_or("")
            .replace('\n', " ")
            .replace('|', "\\|");
        s.push_str(&format!(
            "- `{}` — {} — {}\n",
            c.id,
            reason_for(reasons, &c.id),
            what
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn longest_prefix_gives_the_reason() {
        let reasons: Reasons = [
            ("a/".to_string(), "broad".to_string()),
            ("a/b".to_string(), "narrow".to_string()),
        ]
        .into();
        assert_eq!(reason_for(&reasons, "a/b/c"), "narrow");
        assert_eq!(reason_for(&reasons, "a/x"), "broad");
        assert_eq!(reason_for(&reasons, "z"), "to fix");
    }

    #[test]
    fn compares_per_check_and_names_the_first_difference() {
        let mut a = Observations::new();
        let mut b = Observations::new();
        a.insert("x/same".into(), vec![json!({"code": 200})]);
        b.insert("x/same".into(), vec![json!({"code": 200})]);
        a.insert(
            "x/diff".into(),
            vec![json!({"code": 422, "body": {"reason": "Invalid"}})],
        );
        b.insert(
            "x/diff".into(),
            vec![json!({"code": 422, "body": {"reason": "BadRequest"}})],
        );
        b.insert("y/only-real".into(), vec![json!(1)]);
        let r = compare(&a, &b);
        let f = figures(&r);
        assert_eq!((f["x"].identical, f["x"].total), (1, 2));
        assert_eq!((f["y"].identical, f["y"].total), (0, 1));
        let diff = r
            .iter()
            .find(|c| c.id == "x/diff")
            .and_then(|c| c.difference.clone());
        assert_eq!(
            diff.as_deref(),
            Some("[0].body.reason: embedded \"Invalid\" / real \"BadRequest\"")
        );
        let codes = first_difference(
            "",
            &json!([{"code": 201, "body": {"kind": "ConfigMap"}}]),
            &json!([{"code": 422, "body": {"kind": "Status", "reason": "Invalid", "message": "bad key"}}]),
        );
        assert_eq!(
            codes,
            "code: embedded 201 ConfigMap / real 422 Invalid \"bad key\""
        );
    }
}

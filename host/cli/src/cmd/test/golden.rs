//! One golden case: its files, its expectation, and how a result is
//! compared with it.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::cmd::render::{ErrorClass, Failure};

/// The time a case sees when it has no `now` file (and no `--now=` in `args`).
pub const DEFAULT_NOW: &str = "2026-01-15T12:00:00Z";

/// A case directory, read.
pub struct Case {
    pub dir: PathBuf,
    pub name: String,
    pub finalizing: bool,
    pub now: String,
}

impl Case {
    /// Reads `now`, `finalizing` and the older `args` file (`--finalizing`,
    /// `--now=...`, one per line).
    pub fn read(dir: &Path) -> anyhow::Result<Case> {
        let mut case = Case {
            dir: dir.to_path_buf(),
            name: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| dir.display().to_string()),
            finalizing: dir.join("finalizing").exists(),
            now: DEFAULT_NOW.to_string(),
        };
        if let Ok(text) = std::fs::read_to_string(dir.join("args")) {
            for arg in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
                match arg.split_once('=') {
                    _ if arg == "--finalizing" => case.finalizing = true,
                    Some(("--now", now)) => case.now = now.to_string(),
                    _ => bail!(
                        "{}: unsupported line {arg:?} (use the files `now` and `finalizing`)",
                        dir.join("args").display()
                    ),
                }
            }
        }
        if let Ok(text) = std::fs::read_to_string(dir.join("now")) {
            case.now = text.trim().to_string();
        }
        Ok(case)
    }

    /// `dir/name` when the file exists.
    pub fn file(&self, name: &str) -> Option<PathBuf> {
        let p = self.dir.join(name);
        p.exists().then_some(p)
    }
}

/// What a case expects.
#[derive(Debug, Clone, PartialEq)]
pub enum Expected {
    /// A response equal to this one (compared as data).
    Response(Value),
    /// A failure of this class; reason and message are checked when given.
    Error {
        class: ErrorClass,
        reason: Option<String>,
        message: Option<String>,
    },
    /// `expected-error.txt`: an exit code and a substring of the message.
    Legacy { exit_code: u8, contains: String },
}

impl Expected {
    /// Reads `expected.yaml` (or `expected-error.txt`); `None` when neither exists.
    pub fn read(case: &Case) -> anyhow::Result<Option<Expected>> {
        if let Some(path) = case.file("expected.yaml") {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let value: Value = serde_yaml::from_str(&text)
                .with_context(|| format!("{}: not valid YAML", path.display()))?;
            if let Some(error) = value.get("error") {
                let text = |k: &str| error.get(k).and_then(Value::as_str).map(str::to_string);
                let class = error
                    .get("class")
                    .cloned()
                    .with_context(|| format!("{}: error.class missing", path.display()))?;
                let class: ErrorClass = serde_json::from_value(class).with_context(|| {
                    format!(
                        "{}: error.class must be Permanent, Transient, Fault or InvalidOutput",
                        path.display()
                    )
                })?;
                return Ok(Some(Expected::Error {
                    class,
                    reason: text("reason"),
                    message: text("message"),
                }));
            }
            return Ok(Some(Expected::Response(value)));
        }
        if let Some(path) = case.file("expected-error.txt") {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let mut lines = text.lines();
            let exit_code = lines
                .next()
                .and_then(|l| l.trim().parse().ok())
                .with_context(|| format!("{}: first line must be an exit code", path.display()))?;
            return Ok(Some(Expected::Legacy {
                exit_code,
                contains: lines.next().unwrap_or("").trim().to_string(),
            }));
        }
        Ok(None)
    }

    /// What `--update` writes for a result.
    pub fn of(result: &Result<Value, Failure>) -> Value {
        match result {
            Ok(response) => response.clone(),
            Err(f) => serde_json::json!({"error": f}),
        }
    }

    /// The differences between this expectation and a result; empty when it passes.
    pub fn compare(&self, result: &Result<Value, Failure>) -> Vec<String> {
        match (self, result) {
            (Expected::Response(want), Ok(got)) => {
                let mut out = Vec::new();
                diff("", want, got, &mut out);
                out
            }
            (Expected::Response(_), Err(f)) => {
                vec![format!("expected a response, got {f}")]
            }
            (Expected::Error { class, .. }, Ok(_)) => {
                vec![format!("expected a {class:?} error, got a response")]
            }
            (
                Expected::Error {
                    class,
                    reason,
                    message,
                },
                Err(f),
            ) => {
                let mut out = Vec::new();
                if *class != f.class {
                    out.push(format!(
                        "error.class: expected {class:?}, got {:?}",
                        f.class
                    ));
                }
                if let Some(r) = reason.as_ref().filter(|r| **r != f.reason) {
                    out.push(format!("error.reason: expected {r:?}, got {:?}", f.reason));
                }
                if let Some(m) = message.as_ref().filter(|m| **m != f.message) {
                    out.push(format!(
                        "error.message: expected {m:?}\n               got {:?}",
                        f.message
                    ));
                }
                out
            }
            (Expected::Legacy { exit_code, .. }, Ok(_)) => {
                vec![format!("expected exit code {exit_code}, got a response")]
            }
            (
                Expected::Legacy {
                    exit_code,
                    contains,
                },
                Err(f),
            ) => {
                let mut out = Vec::new();
                if *exit_code != f.class.exit_code() {
                    out.push(format!(
                        "expected exit code {exit_code}, got {} ({f})",
                        f.class.exit_code()
                    ));
                }
                let text = f.to_string();
                if !text.contains(contains.as_str()) {
                    out.push(format!(
                        "expected the error to contain {contains:?}, got {text:?}"
                    ));
                }
                out
            }
        }
    }
}

fn show(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Field-by-field differences as `path: expected X, got Y` lines. Hand-written:
/// field paths read better than a line diff of two YAML texts (list items
/// shift, key order differs), and no diff crate in the workspace does this.
fn diff(path: &str, want: &Value, got: &Value, out: &mut Vec<String>) {
    let at = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                match g.get(k) {
                    Some(gv) => diff(&at(k), wv, gv, out),
                    None => out.push(format!("{}: missing (expected {})", at(k), show(wv))),
                }
            }
            for (k, gv) in g {
                if !w.contains_key(k) {
                    out.push(format!("{}: unexpected {}", at(k), show(gv)));
                }
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                diff(&format!("{path}[{i}]"), wv, gv, out);
            }
            for (i, wv) in w.iter().enumerate().skip(g.len()) {
                out.push(format!("{path}[{i}]: missing (expected {})", show(wv)));
            }
            for (i, gv) in g.iter().enumerate().skip(w.len()) {
                out.push(format!("{path}[{i}]: unexpected {}", show(gv)));
            }
        }
        _ if want == got => {}
        _ => out.push(format!(
            "{}: expected {}, got {}",
            if path.is_empty() { "(root)" } else { path },
            show(want),
            show(got)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differences_name_the_field() {
        let want = json!({"children": [{"spec": {"replicas": 3}}, {"a": 1}], "status": {"x": 1}});
        let got = json!({"children": [{"spec": {"replicas": 2}}], "status": {"x": 1, "y": 2}});
        let out = Expected::Response(want).compare(&Ok(got));
        assert_eq!(
            out,
            vec![
                "children[0].spec.replicas: expected 3, got 2",
                "children[1]: missing (expected {\"a\":1})",
                "status.y: unexpected 2",
            ]
        );
    }

    #[test]
    fn errors_compare_class_reason_and_message_when_given() {
        let failure = Failure {
            class: ErrorClass::Permanent,
            reason: "InvalidSpec".into(),
            message: "bad".into(),
        };
        let only_class = Expected::Error {
            class: ErrorClass::Permanent,
            reason: None,
            message: None,
        };
        assert!(only_class.compare(&Err(failure.clone())).is_empty());
        let other = Expected::Error {
            class: ErrorClass::Fault,
            reason: Some("InvalidSpec".into()),
            message: Some("worse".into()),
        };
        assert_eq!(other.compare(&Err(failure)).len(), 2);
    }
}

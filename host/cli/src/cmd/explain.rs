//! `wasm-reconciler explain --records DIR PARENT`: a parent's reconcile
//! history from a record store — per recorded plugin call: when, which
//! component, the input digest, what triggered it (which inputs changed
//! since the previous record), what changed in the output, and which writes
//! followed.
//!
//! The host's queue does not keep why a key was queued, so the trigger is
//! told from the inputs themselves: a request differs from the previous one
//! exactly where the world changed (parent spec, a child's status, a related
//! object, the config); equal inputs mean a resync or a requested requeue.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;
use serde_json::Value;
use wr_engine::record::{Record, WriteRef, store};

/// The trigger of a parent's first record.
const FIRST: &str = "first record";

#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// The record store (`--record DIR` of `run` or `dev`).
    #[arg(long, value_name = "DIR")]
    pub records: PathBuf,
    /// The parent: `namespace/name`, or `name` for a cluster-scoped parent.
    pub parent: String,
    /// Only records of this WasmController.
    #[arg(long)]
    pub controller: Option<String>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = super::replay::Format::Text)]
    pub output: super::replay::Format,
}

/// One step of the history.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// Record number.
    pub seq: u64,
    /// When.
    pub time: String,
    /// WasmController.
    pub controller: String,
    /// Component digest.
    pub plugin: String,
    /// Parent generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Input digest (request without `now`).
    pub input_digest: String,
    /// `first record`, `inputs unchanged (resync or requeue)`, or `inputs changed`.
    pub trigger: String,
    /// Inputs that changed since the previous record (JSON pointers into the request).
    pub input_changes: Vec<store::Change>,
    /// Output fields that changed since the previous record.
    pub output_changes: Vec<store::Change>,
    /// Writes that followed.
    pub writes: Vec<WriteRef>,
    /// Secrets redacted in this record.
    pub redacted_secrets: usize,
}

pub fn run(args: ExplainArgs) -> anyhow::Result<ExitCode> {
    let steps = explain(&args)?;
    if steps.is_empty() {
        anyhow::bail!(
            "no records of parent {:?} in {}{}",
            args.parent,
            args.records.display(),
            args.controller
                .as_ref()
                .map(|c| format!(" for controller {c}"))
                .unwrap_or_default()
        );
    }
    match args.output {
        super::replay::Format::Json => println!("{}", serde_json::to_string_pretty(&steps)?),
        super::replay::Format::Text => print!("{}", text(&args.parent, &steps)),
    }
    Ok(ExitCode::SUCCESS)
}

fn blob(args: &ExplainArgs, r: &Record, id: &str) -> anyhow::Result<Value> {
    let bytes = store::read_blob(&args.records, id)
        .with_context(|| format!("record {}: reading blob {id}", r.seq))?;
    serde_json::from_slice(&bytes).with_context(|| format!("record {}: blob {id}", r.seq))
}

/// The parent's records, oldest first, each compared with the one before.
pub fn explain(args: &ExplainArgs) -> anyhow::Result<Vec<Step>> {
    let recs: Vec<Record> = store::read_records(&args.records)
        .with_context(|| format!("reading the record store {}", args.records.display()))?
        .into_iter()
        .map(|(_, r)| r)
        .filter(|r| r.parent.key() == args.parent)
        .filter(|r| args.controller.as_ref().is_none_or(|c| *c == r.controller))
        .collect();
    let mut steps = Vec::new();
    let mut prev: Option<(Value, Value)> = None;
    for r in recs {
        let mut req = blob(args, &r, &r.request)?;
        if let Value::Object(m) = &mut req {
            m.remove("now");
        }
        let out = blob(args, &r, &r.outcome)?;
        let (trigger, input_changes, output_changes) = match &prev {
            None => (FIRST.to_string(), vec![], vec![]),
            Some((pr, po)) => {
                let ic = store::changes(pr, &req, 6);
                let t = if ic.is_empty() {
                    "inputs unchanged (resync or requeue)"
                } else {
                    "inputs changed"
                };
                (t.to_string(), ic, store::changes(po, &out, 64))
            }
        };
        steps.push(Step {
            seq: r.seq,
            time: r.time.clone(),
            controller: r.controller.clone(),
            plugin: r.plugin.clone(),
            generation: r.parent.generation,
            input_digest: r.input_digest.clone(),
            trigger,
            input_changes,
            output_changes,
            writes: r.writes.clone(),
            redacted_secrets: r.redacted_secrets,
        });
        prev = Some((req, out));
    }
    Ok(steps)
}

fn short_digest(d: &str) -> &str {
    d.get(..19).unwrap_or(d)
}

fn text(parent: &str, steps: &[Step]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "{parent}: {} recorded reconcile(s)", steps.len());
    for s in steps {
        let generation = s
            .generation
            .map(|g| format!(" generation {g}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "#{} {} {}{generation} plugin {} input {}",
            s.seq,
            s.time,
            s.controller,
            short_digest(&s.plugin),
            short_digest(&s.input_digest)
        );
        let _ = writeln!(out, "    trigger: {}", s.trigger);
        for c in &s.input_changes {
            let _ = writeln!(out, "      input {}", c.path);
        }
        if s.trigger == FIRST {
            let _ = writeln!(out, "    output: (nothing earlier to compare with)");
        } else if s.output_changes.is_empty() {
            let _ = writeln!(out, "    output: unchanged");
        } else {
            let _ = writeln!(
                out,
                "    output: {} field(s) changed",
                s.output_changes.len()
            );
            // Cut as `replay` cuts them: a response that appears after an
            // error is the whole response (`-o json` has it in full).
            let v = super::replay::short;
            for c in &s.output_changes {
                let _ = writeln!(out, "      {}: {} -> {}", c.path, v(&c.old), v(&c.new));
            }
        }
        if s.writes.is_empty() {
            let _ = writeln!(out, "    writes: none");
        } else {
            let w: Vec<String> = s
                .writes
                .iter()
                .map(|w| {
                    let ns = w
                        .namespace
                        .as_ref()
                        .map(|n| format!("{n}/"))
                        .unwrap_or_default();
                    format!("{} {} {ns}{}", w.verb, w.kind, w.name)
                })
                .collect();
            let _ = writeln!(out, "    writes: {}", w.join(", "));
        }
        if s.redacted_secrets > 0 {
            let _ = writeln!(out, "    ({} Secret(s) redacted)", s.redacted_secrets);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A parent whose plugin first failed and then answered: the output
    /// change is the whole response, which the text report cuts to a line.
    #[test]
    fn text_cuts_a_whole_response_to_one_short_line() {
        let response =
            serde_json::json!({"children": {"ConfigMap ns/a": {"data": {"x": "y".repeat(500)}}}});
        let step = Step {
            seq: 2,
            time: "2026-12-01T00:00:00Z".into(),
            controller: "c".into(),
            plugin: "sha256:aa".into(),
            generation: Some(1),
            input_digest: "sha256:bb".into(),
            trigger: "inputs changed".into(),
            input_changes: vec![],
            output_changes: vec![store::Change {
                path: "/response".into(),
                old: None,
                new: Some(response),
            }],
            writes: vec![],
            redacted_secrets: 0,
        };
        let text = text("ns/p", &[step]);
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("/response:"))
            .expect("the output change is listed");
        assert!(line.chars().count() < 120, "line not cut: {line}");
        assert!(line.contains("(absent) -> {\"children\""), "{line}");
    }
}

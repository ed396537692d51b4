//! The human-readable plan: one block per parent that would change or fails,
//! one line per parent that would not, then the summary. Values longer than
//! [`MAX_VALUE`] characters are shortened here (never in `-o json`).

use std::fmt::Write;

use serde_json::Value;
use wr_engine::plan::{
    ChildPlan, ConditionView, FieldChange, FinalizerChange, ParentPlan, ParentResult, Plan,
    PlannedAction,
};

/// Longest value shown in full.
const MAX_VALUE: usize = 160;

/// Renders `plan` as text.
pub fn render(plan: &Plan) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Plan for WasmController {} with plugin {} (now {})",
        plan.controller, plan.plugin_digest, plan.now
    );
    for p in &plan.parents {
        out.push('\n');
        parent(&mut out, p);
    }
    summary(&mut out, plan);
    out
}

fn key(ns: Option<&str>, name: &str) -> String {
    match ns {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

fn parent(out: &mut String, p: &ParentPlan) {
    let id = key(p.namespace.as_deref(), &p.name);
    let unchanged = p
        .children
        .iter()
        .filter(|c| c.action == PlannedAction::Unchanged)
        .count();
    match p.result {
        ParentResult::Unchanged => {
            let _ = writeln!(out, "{id}: unchanged ({unchanged} children up to date)");
            return;
        }
        ParentResult::Skipped => {
            let _ = writeln!(
                out,
                "{id}: skipped ({})",
                p.skipped.as_deref().unwrap_or("")
            );
        }
        ParentResult::Error => {
            if let Some(e) = &p.error {
                let class = serde_json::to_value(e.class)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "{id}: ERROR {class} {}: {} (nothing applied)",
                    e.reason,
                    shorten(&e.message)
                );
            }
        }
        ParentResult::Changes => {
            let what = if p.finalizing { " (finalizing)" } else { "" };
            let _ = writeln!(out, "{id}: changes{what}, {unchanged} children up to date");
        }
    }
    for c in &p.children {
        child(out, c);
    }
    for c in &p.conditions {
        let _ = writeln!(
            out,
            "  condition {}: {} -> {}",
            c.type_,
            cond(c.old.as_ref()),
            cond(c.new.as_ref())
        );
    }
    for f in &p.status {
        let _ = writeln!(out, "  status {}", field(f));
    }
    match p.finalizer {
        Some(FinalizerChange::Add) => out.push_str("  finalizer: added\n"),
        Some(FinalizerChange::Remove) => out.push_str("  finalizer: removed\n"),
        None => {}
    }
}

fn child(out: &mut String, c: &ChildPlan) {
    let (mark, word) = match c.action {
        PlannedAction::Unchanged => return,
        PlannedAction::Create => ("+", "create"),
        PlannedAction::Change => ("~", "change"),
        PlannedAction::Recreate => ("±", "recreate"),
        PlannedAction::Leave => ("=", "leave (OnDelete)"),
        PlannedAction::Delete => ("-", "delete"),
        PlannedAction::Wait => (".", "wait (being deleted)"),
        PlannedAction::Conflict => ("!", "conflict"),
        PlannedAction::Queued => ("…", "queued (rolling update)"),
    };
    let _ = write!(
        out,
        "  {mark} {word} {} {}",
        c.kind,
        key(c.namespace.as_deref(), &c.name)
    );
    if let Some(m) = &c.message {
        let _ = write!(out, ": {m}");
    }
    out.push('\n');
    for f in &c.changes {
        let _ = writeln!(out, "      {}", field(f));
    }
}

fn field(f: &FieldChange) -> String {
    format!(
        "{}: {} -> {}",
        f.path,
        value(f.old.as_ref()),
        value(f.new.as_ref())
    )
}

fn value(v: Option<&Value>) -> String {
    match v {
        None => "(absent)".into(),
        Some(v) => shorten(&v.to_string()),
    }
}

fn cond(c: Option<&ConditionView>) -> String {
    match c {
        None => "(absent)".into(),
        Some(c) if c.message.is_empty() => format!("{} {}", c.status, c.reason),
        Some(c) => format!("{} {} {:?}", c.status, c.reason, shorten(&c.message)),
    }
}

fn shorten(s: &str) -> String {
    if s.chars().count() <= MAX_VALUE {
        return s.to_string();
    }
    let mut t: String = s.chars().take(MAX_VALUE).collect();
    t.push('…');
    t
}

fn summary(out: &mut String, plan: &Plan) {
    let s = &plan.summary;
    let c = &s.children;
    let _ = writeln!(
        out,
        "\nSummary: {} parents: {} unchanged, {} with changes, {} errors, {} skipped",
        s.parents, s.unchanged, s.with_changes, s.errors, s.skipped
    );
    let _ = writeln!(
        out,
        "Children: {} create, {} change, {} recreate, {} leave, {} delete, {} wait, {} conflict, {} unchanged",
        c.create, c.change, c.recreate, c.leave, c.delete, c.wait, c.conflict, c.unchanged
    );
    let _ = writeln!(
        out,
        "Status: {} condition changes, {} status writes, {} finalizers added, {} removed",
        s.condition_changes, s.status_writes, s.finalizers_added, s.finalizers_removed
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn long_values_are_shortened_and_absent_ones_named() {
        let long = "x".repeat(500);
        let f = FieldChange {
            path: "/data/a".into(),
            old: None,
            new: Some(json!(long)),
        };
        let line = field(&f);
        assert!(line.starts_with("/data/a: (absent) -> \"xxx"));
        assert!(line.ends_with('…'));
        assert!(line.chars().count() < 200);
    }
}

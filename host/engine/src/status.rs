//! The parent's status as the host writes it: a host-owned `Ready` condition plus
//! the plugin's conditions, each with `observedGeneration`, `lastTransitionTime`
//! kept while the status value does not change, and the plugin's `status` object
//! merged in. [`next_status`] returns `None` when nothing would change, so the
//! caller never writes an identical status (writes trigger more reconciles and
//! noisy API traffic).

use serde_json::{Map, Value, json};
use wr_runtime::{Condition, ConditionStatus};

/// One condition the host wants on the parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredCondition {
    /// CamelCase type.
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable detail.
    pub message: String,
}

impl DesiredCondition {
    /// The host's `Ready` condition.
    pub fn ready(ok: bool, reason: &str, message: &str) -> Self {
        Self {
            type_: "Ready".into(),
            status: if ok { "True" } else { "False" },
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// Converts a plugin condition.
    pub fn from_plugin(c: &Condition) -> Self {
        Self {
            type_: c.type_.clone(),
            status: match c.status {
                ConditionStatus::True => "True",
                ConditionStatus::False => "False",
                ConditionStatus::Unknown => "Unknown",
            },
            reason: c.reason.clone(),
            message: c.message.clone(),
        }
    }
}

/// What one reconcile wants the status to say.
#[derive(Debug, Clone, Default)]
pub struct StatusUpdate {
    /// Conditions to set (Ready first).
    pub conditions: Vec<DesiredCondition>,
    /// When true, conditions not in `conditions` are dropped (the plugin answered,
    /// so its list is complete); when false they are kept (the plugin failed and
    /// said nothing about them).
    pub replace_conditions: bool,
    /// The plugin's status object, merged in (JSON merge patch; `conditions` and
    /// `observedGeneration` are host-owned and ignored).
    pub plugin_status: Option<Value>,
}

/// Computes the parent's next `.status`, or `None` if it would not change.
pub fn next_status(
    current: Option<&Value>,
    generation: Option<i64>,
    update: &StatusUpdate,
    now: &str,
) -> Option<Value> {
    let mut status = match current {
        Some(Value::Object(m)) => Value::Object(m.clone()),
        _ => Value::Object(Map::new()),
    };
    if let Some(Value::Object(patch)) = &update.plugin_status {
        let mut patch = patch.clone();
        patch.remove("conditions");
        patch.remove("observedGeneration");
        json_patch::merge(&mut status, &Value::Object(patch));
    }
    let existing: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let conditions = merge_conditions(&existing, update, generation, now);
    let obj = status.as_object_mut()?;
    obj.insert("conditions".into(), Value::Array(conditions));
    if let Some(g) = generation {
        obj.insert("observedGeneration".into(), json!(g));
    }
    if current == Some(&status) {
        None
    } else {
        Some(status)
    }
}

fn merge_conditions(
    existing: &[Value],
    update: &StatusUpdate,
    generation: Option<i64>,
    now: &str,
) -> Vec<Value> {
    let type_of = |c: &Value| c.get("type").and_then(Value::as_str).map(str::to_string);
    let mut out: Vec<Value> = Vec::new();
    for old in existing {
        let Some(t) = type_of(old) else { continue };
        if let Some(d) = update.conditions.iter().find(|d| d.type_ == t) {
            out.push(render(d, Some(old), generation, now));
        } else if !update.replace_conditions {
            out.push(old.clone());
        }
    }
    for d in &update.conditions {
        if !out
            .iter()
            .any(|c| type_of(c).as_deref() == Some(d.type_.as_str()))
        {
            out.push(render(d, None, generation, now));
        }
    }
    out
}

fn render(d: &DesiredCondition, old: Option<&Value>, generation: Option<i64>, now: &str) -> Value {
    let ltt = old
        .filter(|o| o.get("status").and_then(Value::as_str) == Some(d.status))
        .and_then(|o| o.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| Value::String(now.to_string()));
    let mut c = json!({
        "type": d.type_,
        "status": d.status,
        "reason": d.reason,
        "message": d.message,
        "lastTransitionTime": ltt,
    });
    if let (Some(g), Some(m)) = (generation, c.as_object_mut()) {
        m.insert("observedGeneration".into(), json!(g));
    }
    c
}

/// The `Ready` condition's status in a parent's `.status`, if any.
pub fn ready_status(status: Option<&Value>) -> Option<&str> {
    status?
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))?
        .get("status")?
        .as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upd(ok: bool, reason: &str) -> StatusUpdate {
        StatusUpdate {
            conditions: vec![DesiredCondition::ready(ok, reason, "m")],
            replace_conditions: true,
            plugin_status: None,
        }
    }

    #[test]
    fn first_status_gets_conditions_with_generation() {
        let s = next_status(None, Some(3), &upd(true, "Reconciled"), "T1").unwrap();
        assert_eq!(s["observedGeneration"], 3);
        assert_eq!(s["conditions"][0]["type"], "Ready");
        assert_eq!(s["conditions"][0]["status"], "True");
        assert_eq!(s["conditions"][0]["observedGeneration"], 3);
        assert_eq!(s["conditions"][0]["lastTransitionTime"], "T1");
    }

    #[test]
    fn unchanged_status_is_not_written_even_at_a_later_time() {
        let s = next_status(None, Some(3), &upd(true, "Reconciled"), "T1").unwrap();
        assert_eq!(
            next_status(Some(&s), Some(3), &upd(true, "Reconciled"), "T2"),
            None
        );
    }

    #[test]
    fn transition_time_moves_only_when_status_value_changes() {
        let s1 = next_status(None, Some(1), &upd(true, "A"), "T1").unwrap();
        let s2 = next_status(Some(&s1), Some(2), &upd(true, "B"), "T2").unwrap();
        assert_eq!(s2["conditions"][0]["lastTransitionTime"], "T1");
        assert_eq!(s2["conditions"][0]["observedGeneration"], 2);
        assert_eq!(s2["conditions"][0]["reason"], "B");
        let s3 = next_status(Some(&s2), Some(2), &upd(false, "B"), "T3").unwrap();
        assert_eq!(s3["conditions"][0]["lastTransitionTime"], "T3");
    }

    #[test]
    fn plugin_status_is_merged_but_cannot_touch_host_fields() {
        let cur = json!({"phase": "Old", "keep": 1});
        let u = StatusUpdate {
            conditions: vec![DesiredCondition::ready(true, "R", "")],
            replace_conditions: true,
            plugin_status: Some(
                json!({"phase": "New", "observedGeneration": 99, "conditions": []}),
            ),
        };
        let s = next_status(Some(&cur), Some(4), &u, "T").unwrap();
        assert_eq!(s["phase"], "New");
        assert_eq!(s["keep"], 1);
        assert_eq!(s["observedGeneration"], 4);
        assert_eq!(s["conditions"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn plugin_conditions_are_kept_when_plugin_failed_and_dropped_when_it_answered() {
        let avail = DesiredCondition {
            type_: "Available".into(),
            status: "True",
            reason: "Up".into(),
            message: String::new(),
        };
        let u = StatusUpdate {
            conditions: vec![DesiredCondition::ready(true, "R", ""), avail],
            replace_conditions: true,
            plugin_status: None,
        };
        let s = next_status(None, Some(1), &u, "T").unwrap();
        let failed = StatusUpdate {
            conditions: vec![DesiredCondition::ready(false, "Boom", "")],
            replace_conditions: false,
            plugin_status: None,
        };
        let s2 = next_status(Some(&s), Some(1), &failed, "T").unwrap();
        assert_eq!(s2["conditions"].as_array().unwrap().len(), 2);
        assert_eq!(ready_status(Some(&s2)), Some("False"));
        let s3 = next_status(Some(&s2), Some(1), &upd(true, "R"), "T").unwrap();
        assert_eq!(s3["conditions"].as_array().unwrap().len(), 1);
    }
}

//! Conditions set the way the workload controllers set theirs
//! (`SetDeploymentCondition` and friends): an unchanged status and reason
//! leaves the condition alone; a changed reason keeps `lastTransitionTime`
//! when the status is the same; a changed condition moves to the end.

use serde_json::{Value, json};

pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A condition in the shape of the Deployment's (with `lastUpdateTime`).
pub fn deployment(ty: &str, status: &str, reason: &str, message: &str) -> Value {
    let t = now();
    json!({"type": ty, "status": status, "lastUpdateTime": t, "lastTransitionTime": t,
           "reason": reason, "message": message})
}

/// A condition in the shape of the Job's (with `lastProbeTime`).
pub fn job(ty: &str, status: &str, reason: &str, message: &str) -> Value {
    let t = now();
    json!({"type": ty, "status": status, "lastProbeTime": t, "lastTransitionTime": t,
           "reason": reason, "message": message})
}

/// Set `cond` in `conditions` (see the module doc).
pub fn set(conditions: &mut Vec<Value>, mut cond: Value) {
    let ty = cond["type"].clone();
    if let Some(cur) = conditions.iter().find(|c| c["type"] == ty) {
        if cur["status"] == cond["status"] && cur["reason"] == cond["reason"] {
            return;
        }
        if cur["status"] == cond["status"] {
            cond["lastTransitionTime"] = cur["lastTransitionTime"].clone();
        }
    }
    conditions.retain(|c| c["type"] != ty);
    conditions.push(cond);
}

/// The `status.conditions` of an object, owned.
pub fn of(obj: &Value) -> Vec<Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_status_and_reason_is_kept_a_new_reason_keeps_the_transition_time() {
        let mut cs =
            vec![json!({"type": "A", "status": "True", "reason": "R", "lastTransitionTime": "t0"})];
        set(
            &mut cs,
            json!({"type": "A", "status": "True", "reason": "R", "lastTransitionTime": "t1"}),
        );
        assert_eq!(cs[0]["lastTransitionTime"], "t0");
        set(
            &mut cs,
            json!({"type": "B", "status": "True", "reason": "X", "lastTransitionTime": "t1"}),
        );
        set(
            &mut cs,
            json!({"type": "A", "status": "True", "reason": "S", "lastTransitionTime": "t2"}),
        );
        assert_eq!(cs[1]["reason"], "S");
        assert_eq!(cs[1]["lastTransitionTime"], "t0");
        set(
            &mut cs,
            json!({"type": "A", "status": "False", "reason": "S", "lastTransitionTime": "t3"}),
        );
        assert_eq!(cs[1]["lastTransitionTime"], "t3");
    }
}

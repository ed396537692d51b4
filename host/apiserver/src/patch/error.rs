//! Errors of the patch/apply layer, worded like kube-apiserver so clients
//! (`kubectl`, `kube::Client`) show the same messages as against a real cluster.

use serde_json::{Value, json};

/// One field another manager owns that an apply would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldConflict {
    /// The other manager's name, e.g. `kubectl-client-side-apply`.
    pub manager: String,
    /// The field path in structured-merge-diff notation, e.g. `.spec.replicas`
    /// or `.spec.template.spec.containers[name="web"].image`.
    pub field: String,
    /// The other manager's operation (`Apply` or `Update`); kube-apiserver
    /// prints `using <apiVersion>` for updaters only.
    pub operation: String,
    /// The apiVersion the other manager wrote with.
    pub api_version: String,
    /// The subresource the other manager wrote through, if any.
    pub subresource: Option<String>,
}

impl FieldConflict {
    /// The manager as kube-apiserver prints it (`printManager`):
    /// `"name"`, `"name" with subresource "status"`, `"name" using apps/v1`.
    pub fn describe_manager(&self) -> String {
        let mut s = go_quote(&self.manager);
        if let Some(sub) = &self.subresource {
            s = format!("{s} with subresource {}", go_quote(sub));
        }
        if self.operation == "Update" {
            s = format!("{s} using {}", self.api_version);
        }
        s
    }
}

/// Why a patch or apply was refused.
///
/// Map to HTTP with [`PatchError::http_status`] and [`PatchError::reason`] rather
/// than matching variants, so new variants do not break the server.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PatchError {
    /// The patch applies but the result is unacceptable, or a JSON-patch
    /// operation failed (`test` mismatch, missing path): 422 `Invalid`.
    #[error("{0}")]
    Invalid(String),
    /// The patch document itself is malformed (not a list of operations,
    /// unknown directive value): 400 `BadRequest`.
    #[error("{0}")]
    BadRequest(String),
    /// Server-side apply would change fields owned by other managers and
    /// `force` was not set: 409 `Conflict`.
    #[error("{}", conflict_message(.conflicts))]
    Conflict {
        /// Each conflicting field with its owner, sorted by manager then path.
        conflicts: Vec<FieldConflict>,
    },
}

impl PatchError {
    /// The `Status.message` kube-apiserver sends for this error.
    pub fn status_message(&self) -> String {
        self.to_string()
    }

    /// HTTP status code of the `Status` response.
    pub fn http_status(&self) -> u16 {
        match self {
            PatchError::Invalid(_) => 422,
            PatchError::BadRequest(_) => 400,
            PatchError::Conflict { .. } => 409,
        }
    }

    /// `Status.reason` of the response.
    pub fn reason(&self) -> &'static str {
        match self {
            PatchError::Invalid(_) => "Invalid",
            PatchError::BadRequest(_) => "BadRequest",
            PatchError::Conflict { .. } => "Conflict",
        }
    }

    /// `Status.details.causes`: one `FieldManagerConflict` cause per conflicting
    /// field (as `errors.NewApplyConflict` builds them), empty for other errors.
    pub fn status_causes(&self) -> Value {
        match self {
            PatchError::Conflict { conflicts } => Value::Array(
                conflicts
                    .iter()
                    .map(|c| {
                        json!({
                            "reason": "FieldManagerConflict",
                            "message": format!("conflict with {}", c.describe_manager()),
                            "field": c.field,
                        })
                    })
                    .collect(),
            ),
            _ => Value::Array(Vec::new()),
        }
    }
}

/// kube-apiserver's `getConflictMessage`.
fn conflict_message(conflicts: &[FieldConflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.describe_manager(),
            only.field
        );
    }
    let mut lines: Vec<String> = Vec::new();
    let mut last: Option<String> = None;
    // `conflicts` is sorted by manager, so grouping is a linear scan.
    for c in conflicts {
        let who = c.describe_manager();
        if last.as_deref() != Some(who.as_str()) {
            lines.push(format!("conflicts with {who}:"));
            last = Some(who);
        }
        lines.push(format!("- {}", c.field));
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// Go's `%q` for the plain names managers have; JSON string quoting agrees
/// with it for printable text.
pub(crate) fn go_quote(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conflict(manager: &str, op: &str, field: &str) -> FieldConflict {
        FieldConflict {
            manager: manager.into(),
            field: field.into(),
            operation: op.into(),
            api_version: "apps/v1".into(),
            subresource: None,
        }
    }

    #[test]
    fn single_conflict_message_matches_kube_apiserver_wording() {
        let e = PatchError::Conflict {
            conflicts: vec![conflict(
                "kubectl-client-side-apply",
                "Update",
                ".spec.replicas",
            )],
        };
        assert_eq!(
            e.status_message(),
            "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas"
        );
        assert_eq!(e.http_status(), 409);
        assert_eq!(e.reason(), "Conflict");
        assert_eq!(e.status_causes()[0]["reason"], "FieldManagerConflict");
        assert_eq!(e.status_causes()[0]["field"], ".spec.replicas");
    }

    #[test]
    fn multiple_conflicts_are_grouped_by_manager() {
        let e = PatchError::Conflict {
            conflicts: vec![
                conflict("a", "Apply", ".spec.replicas"),
                conflict("a", "Apply", ".spec.paused"),
                conflict("b", "Apply", ".metadata.labels.x"),
            ],
        };
        assert_eq!(
            e.status_message(),
            "Apply failed with 3 conflicts: conflicts with \"a\":\n- .spec.replicas\n- .spec.paused\nconflicts with \"b\":\n- .metadata.labels.x"
        );
    }

    #[test]
    fn subresource_managers_are_named_with_their_subresource() {
        let mut c = conflict("ctl", "Apply", ".status.phase");
        c.subresource = Some("status".into());
        assert_eq!(c.describe_manager(), "\"ctl\" with subresource \"status\"");
    }
}

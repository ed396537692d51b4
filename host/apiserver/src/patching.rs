//! The seam between request handling and the patch/apply engine
//! ([`crate::patch`]): maps patch content types, picks the structural
//! schema of a resource, and turns patch errors into API errors.

use serde_json::Value;

use crate::errors::ApiError;
use crate::patch as engine;
use crate::resources::ResourceDef;

/// Patch flavour, from the request's `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchKind {
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Some(PatchKind::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchKind::Apply)
            }
            _ => None,
        }
    }

    /// Name in the request log.
    pub fn name(self) -> &'static str {
        match self {
            PatchKind::Json => "json",
            PatchKind::Merge => "merge",
            PatchKind::Strategic => "strategic",
            PatchKind::Apply => "apply",
        }
    }
}

fn schema_for(def: &ResourceDef, version: &str) -> engine::Schema {
    let schema = if def.custom {
        match def.schemas.get(version) {
            Some(s) => engine::Schema::from_openapi_v3(s),
            None => engine::Schema::unknown(),
        }
    } else {
        engine::Schema::for_builtin(&def.group, &def.kind)
    };
    // With a /status subresource, an apply to the main resource must not
    // record ownership of `status` (the server discards that part).
    schema.with_status_subresource(def.status_subresource)
}

fn map_err(e: engine::PatchError) -> ApiError {
    let reason = e.reason();
    let mut err = ApiError::new(e.http_status(), reason, e.status_message());
    if let Some(causes) = e.status_causes().as_array() {
        err.causes = causes
            .iter()
            .map(|c| crate::errors::Cause {
                reason: "FieldManagerConflict",
                message: c["message"].as_str().unwrap_or_default().to_string(),
                field: c["field"].as_str().unwrap_or_default().to_string(),
            })
            .collect();
    }
    err
}

/// Apply a non-apply patch to `current`.
pub fn patch(
    kind: PatchKind,
    current: &Value,
    body: &Value,
    def: &ResourceDef,
    version: &str,
) -> Result<Value, ApiError> {
    let r = match kind {
        // An operation that does not apply is kube-apiserver's generic 422
        // ("the server rejected our request..."): its text is not returned.
        PatchKind::Json => {
            return engine::apply_json_patch(current, body).map_err(|e| match e {
                engine::PatchError::Invalid(_) => ApiError::new(
                    422,
                    "Invalid",
                    "the server rejected our request due to an error in our request",
                )
                .generic(),
                other => map_err(other),
            });
        }
        PatchKind::Merge => engine::apply_merge_patch(current, body),
        PatchKind::Strategic => {
            engine::apply_strategic_merge_patch(current, body, &schema_for(def, version))
        }
        PatchKind::Apply => return Err(ApiError::internal("apply is not a plain patch")),
    };
    r.map_err(map_err)
}

/// Server-side apply. Returns the object with updated managedFields.
#[allow(clippy::too_many_arguments)]
pub fn apply(
    current: Option<&Value>,
    applied: &Value,
    def: &ResourceDef,
    version: &str,
    manager: &str,
    force: bool,
    subresource: Option<&str>,
    now: &str,
) -> Result<Value, ApiError> {
    let opts = engine::ApplyOptions {
        manager,
        force,
        subresource,
        now,
    };
    engine::server_side_apply(current, applied, &schema_for(def, version), &opts).map_err(map_err)
}

/// managedFields after a non-apply write by `manager`.
pub fn track(
    old: Option<&Value>,
    new: &Value,
    def: &ResourceDef,
    version: &str,
    manager: &str,
    subresource: Option<&str>,
    now: &str,
) -> Value {
    // A create is compared with the kind's zero object, as kube-apiserver
    // compares it with `scope.Creater.New(kind)`.
    let zero = match old {
        None => crate::validation::zero_object(def, version),
        Some(_) => None,
    };
    engine::track_update(
        old.or(zero.as_ref()),
        new,
        &schema_for(def, version),
        manager,
        subresource,
        now,
    )
}

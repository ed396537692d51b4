//! The write verbs: create, update and patch (every patch type, server-side
//! apply included), with `fieldValidation` warnings on the response.

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use super::{Call, decode, json_response, parse_dry_run, present};
use crate::errors::{ApiError, Cause};
use crate::ops::{self, Target};
use crate::patching::PatchKind;
use crate::validation::Decoding;

/// POST (create), PUT (update) or PATCH of one object.
pub(super) async fn write(c: &Call<'_>, body: Body) -> Result<Response, ApiError> {
    let (app, route, query) = (c.app, c.route, c.query);
    let def = &route.def;
    let bytes = axum::body::to_bytes(body, app.opts.max_body_bytes)
        .await
        .map_err(|_| ApiError::too_large(app.opts.max_body_bytes))?;
    let dry_run = parse_dry_run(query, None)?;
    let options = match c.verb {
        "create" => "CreateOptions",
        "update" => "UpdateOptions",
        _ => "PatchOptions",
    };
    let mut decoding =
        Decoding::from_query(query.get("fieldValidation").map(String::as_str), options)?;
    if let Some(k) = c.patch_kind.filter(|k| *k != PatchKind::Apply)
        && let Ok(b) = serde_json::from_slice::<Value>(&bytes)
    {
        decoding = decoding.for_patch(k == PatchKind::Strategic, &b);
    }
    let t = Target {
        def,
        version: &route.version,
        namespace: c.ns(),
        subresource: route.subresource.as_deref(),
        dry_run,
        manager: c.manager,
        decoding: &decoding,
    };
    let written = match c.verb {
        "create" => {
            let obj = decode(c.headers, &bytes)?;
            let out = ops::create(app, &t, obj, false)?;
            Ok(json_response(
                StatusCode::CREATED,
                &present(def, &route.version, &out),
            ))
        }
        "update" => {
            let obj = decode(c.headers, &bytes)?;
            let out = ops::update(app, &t, c.name(), obj)?;
            Ok(json_response(
                StatusCode::OK,
                &present(def, &route.version, &out),
            ))
        }
        _ => patch(c, &t, &bytes),
    };
    written.map(|r| crate::validation::with_warnings(r, &decoding))
}

/// A PATCH: the body in its patch type, PatchOptions checked, then applied.
fn patch(c: &Call<'_>, t: &Target<'_>, bytes: &[u8]) -> Result<Response, ApiError> {
    let query = c.query;
    // kube-apiserver's patch handler: a generic 415 naming no types.
    let kind = c
        .patch_kind
        .ok_or_else(|| ApiError::unsupported_media("415: Unsupported Media Type").generic())?;
    let body = match kind {
        PatchKind::Apply => serde_yaml::from_slice::<Value>(bytes)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?,
        _ => serde_json::from_slice::<Value>(bytes)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?,
    };
    let patch_option = |reason: &'static str, message: &str, field: &str| {
        ApiError::invalid(
            "meta.k8s.io",
            "PatchOptions",
            "",
            vec![Cause {
                reason,
                message: message.into(),
                field: field.into(),
            }],
        )
    };
    if kind == PatchKind::Apply && query.get("fieldManager").is_none_or(|s| s.is_empty()) {
        return Err(patch_option(
            "FieldValueRequired",
            "Required value: is required for apply patch",
            "fieldManager",
        ));
    }
    if kind != PatchKind::Apply && query.get("force").is_some() {
        return Err(patch_option(
            "FieldValueForbidden",
            "Forbidden: may not be specified for non-apply patch",
            "force",
        ));
    }
    let force = query.get("force").map(String::as_str) == Some("true");
    let (out, created) = ops::patch(c.app, t, c.name(), kind, &body, force)?;
    let code = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(json_response(
        code,
        &present(&c.route.def, &c.route.version, &out),
    ))
}

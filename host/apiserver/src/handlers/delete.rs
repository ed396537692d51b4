//! The delete verbs: delete (a `Success` Status, or the object while
//! finalizers hold it) and deletecollection (the deleted items).

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::{Call, Q, decode, deleted_details, json_response, parse_dry_run, present};
use crate::errors::ApiError;
use crate::ops::{self, DeleteOpts, Deleted, Target};
use crate::selectors::{FieldSelector, LabelSelector, extra_fields};

/// DeleteOptions as the request gives them.
struct Options {
    opts: DeleteOpts,
    dry_run: bool,
    /// The deprecated `orphanDependents: false` (a pending delete is then 202).
    not_orphan: bool,
}

/// DeleteOptions come from the body when there is one, else from the query
/// (kube-apiserver's delete handlers): never both.
fn options(c: &Call<'_>, bytes: &[u8]) -> Result<Options, ApiError> {
    let body: Option<Value> = if bytes.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        Some(decode(c.headers, bytes)?)
    };
    let empty = Q::default();
    let query = if body.is_some() { &empty } else { c.query };
    let dry_run = parse_dry_run(query, body.as_ref())?;
    let mut opts = DeleteOpts {
        propagation: query.get("propagationPolicy").cloned(),
        ..Default::default()
    };
    if let Some(b) = &body {
        if let Some(p) = b.get("propagationPolicy").and_then(Value::as_str) {
            opts.propagation = Some(p.to_string());
        }
        if b.get("orphanDependents").and_then(Value::as_bool) == Some(true) {
            opts.propagation = Some("Orphan".into());
        }
        let text = |p: &str| b.pointer(p).and_then(Value::as_str).map(str::to_string);
        opts.uid = text("/preconditions/uid");
        opts.resource_version = text("/preconditions/resourceVersion");
    }
    let not_orphan = body.as_ref().and_then(|b| b.get("orphanDependents"))
        == Some(&Value::Bool(false))
        || query.get("orphanDependents").map(String::as_str) == Some("false");
    Ok(Options {
        opts,
        dry_run,
        not_orphan,
    })
}

/// DELETE of one object or of a collection.
pub(super) async fn delete(c: &Call<'_>, body: Body) -> Result<Response, ApiError> {
    let app = c.app;
    let bytes = axum::body::to_bytes(body, app.opts.max_body_bytes)
        .await
        .map_err(|_| ApiError::too_large(app.opts.max_body_bytes))?;
    let o = options(c, &bytes)?;
    let t = Target {
        def: &c.route.def,
        version: &c.route.version,
        namespace: c.ns(),
        subresource: None,
        dry_run: o.dry_run,
        manager: c.manager,
        decoding: &crate::validation::SYSTEM,
    };
    if c.verb == "delete" {
        one(c, &t, &o)
    } else {
        collection(c, &t, &o.opts)
    }
}

fn one(c: &Call<'_>, t: &Target<'_>, o: &Options) -> Result<Response, ApiError> {
    let (def, version, name) = (&c.route.def, &c.route.version, c.name());
    Ok(match ops::delete(c.app, t, name, &o.opts)? {
        Deleted::Gone(obj) => {
            if def.custom {
                json_response(StatusCode::OK, &present(def, version, &obj))
            } else {
                json_response(
                    StatusCode::OK,
                    &json!({
                        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                        "details": deleted_details(def, name, &obj)
                    }),
                )
            }
        }
        // 202 only when the client asked for the deprecated
        // `orphanDependents: false` (kube-apiserver's delete handler);
        // an object still being deleted is otherwise a 200.
        Deleted::Pending(obj) => {
            let code = if o.not_orphan {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            json_response(code, &present(def, version, &obj))
        }
    })
}

fn collection(c: &Call<'_>, t: &Target<'_>, opts: &DeleteOpts) -> Result<Response, ApiError> {
    let (app, query, def, version) = (c.app, c.query, &c.route.def, &c.route.version);
    let ns = c.ns();
    let labels = LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))
        .map_err(ApiError::bad_request)?;
    let fields = FieldSelector::parse(
        query.get("fieldSelector").map_or("", String::as_str),
        extra_fields(&def.key()),
    )
    .map_err(ApiError::bad_request)?;
    let prefix = if def.namespaced && !ns.is_empty() {
        format!("{ns}/")
    } else {
        String::new()
    };
    let keep = |o: &Value| labels.matches(o) && fields.matches(o);
    let page = app
        .store
        .page(&def.key(), &prefix, None, None, 0, &keep)
        .map_err(|g| ApiError::too_old(g.requested, g.oldest))?;
    let mut items = Vec::new();
    for o in &page.items {
        let n = crate::meta::name(o).unwrap_or_default().to_string();
        let ons = crate::meta::str_field(o, "namespace")
            .unwrap_or("")
            .to_string();
        let t = Target {
            namespace: &ons,
            ..t.clone()
        };
        match ops::delete(app, &t, &n, opts) {
            // Items of a typed list carry no kind/apiVersion (as
            // kube-apiserver writes built-in lists; custom ones keep them).
            Ok(Deleted::Gone(o) | Deleted::Pending(o)) => {
                let mut item = present(def, version, &o);
                if !def.custom
                    && let Some(m) = item.as_object_mut()
                {
                    m.remove("kind");
                    m.remove("apiVersion");
                }
                items.push(item)
            }
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "kind": def.list_kind, "apiVersion": def.group_version(version),
            "metadata": {"resourceVersion": app.store.current_rv().to_string()}, "items": items
        }),
    ))
}

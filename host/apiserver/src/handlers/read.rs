//! The read verbs: get (JSON or Table) and watch.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::json;

use super::{Call, json_response, present};
use crate::errors::ApiError;
use crate::selectors::{FieldSelector, LabelSelector, extra_fields};
use crate::watch::{self, Start, WatchParams};

/// GET of one object.
pub(super) fn get(c: &Call<'_>) -> Result<Response, ApiError> {
    let (app, route) = (c.app, c.route);
    let def = &route.def;
    let (ns, name, as_table, include_object) = (c.ns(), c.name(), c.as_table, &c.include_object);
    let obj = app
        .store
        .get(&def.key(), &crate::store::obj_key(ns, name))
        .ok_or_else(|| ApiError::not_found(def.qualified(), name))?;
    let obj = present(def, &route.version, &obj);
    if as_table {
        let rv = obj
            .pointer("/metadata/resourceVersion")
            .cloned()
            .unwrap_or(json!(""));
        let t = crate::table::table(
            def,
            &route.version,
            &[&obj],
            json!({"resourceVersion": rv}),
            include_object,
            true,
        );
        return Ok(json_response(StatusCode::OK, &t));
    }
    Ok(json_response(StatusCode::OK, &obj))
}

/// A watch: the response body streams the events.
pub(super) fn watch(c: &Call<'_>) -> Result<Response, ApiError> {
    let (app, route, query) = (c.app, c.route, c.query);
    let def = &route.def;
    let ns = c.ns();
    let (as_table, include_object) = (c.as_table, c.include_object.clone());
    let labels = LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))
        .map_err(ApiError::bad_request)?;
    let fields = FieldSelector::parse(
        query.get("fieldSelector").map_or("", String::as_str),
        extra_fields(&def.key()),
    )
    .map_err(ApiError::bad_request)?;
    let send_initial = query.get("sendInitialEvents").map(String::as_str) == Some("true");
    let rv = query
        .get("resourceVersion")
        .map(String::as_str)
        .unwrap_or("");
    let start = match rv {
        "" | "0" => Start::CurrentState,
        _ if send_initial => Start::CurrentState,
        n => Start::After(
            n.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {n}")))?,
        ),
    };
    let start = if query.get("sendInitialEvents").map(String::as_str) == Some("false")
        && start == Start::CurrentState
    {
        Start::After(app.store.current_rv())
    } else {
        start
    };
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    let params = WatchParams {
        start,
        bookmarks: query.get("allowWatchBookmarks").map(String::as_str) == Some("true"),
        send_initial_events: send_initial,
        timeout,
        prefix: if def.namespaced && !ns.is_empty() {
            format!("{ns}/")
        } else {
            String::new()
        },
        labels,
        fields,
        as_table,
        include_object,
    };
    let body = watch::watch(app.clone(), def.clone(), route.version.clone(), params);
    let mut r = Response::new(body);
    r.extensions_mut().insert(crate::protobuf::WatchStream {
        protobuf: !def.custom,
    });
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r.headers_mut().insert(
        header::TRANSFER_ENCODING,
        HeaderValue::from_static("chunked"),
    );
    Ok(r)
}

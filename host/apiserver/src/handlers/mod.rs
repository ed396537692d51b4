//! HTTP routing and request handling: discovery, the resource verbs, the
//! admin path, fault injection and the request log. Paths are parsed by hand
//! because resources appear at run time (CRDs), which static routes cannot express.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};

use crate::app::App;
use crate::discovery;
use crate::errors::ApiError;
use crate::faults::{FaultAction, FaultSpec};
use crate::ops::Target;
use crate::patching::PatchKind;
use crate::requests::RequestRecord;
use crate::resources::ResourceDef;
use crate::selectors::{FieldSelector, LabelSelector, extra_fields};

mod delete;
mod read;
mod write;

/// Marker extension: close the connection instead of sending this response.
#[derive(Debug, Clone, Copy)]
pub struct DropConnection;

type Q = HashMap<String, String>;

pub(crate) fn json_response(code: StatusCode, v: &Value) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_default();
    bytes_response(code, body)
}

fn bytes_response(code: StatusCode, body: Vec<u8>) -> Response {
    let mut r = (code, body).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn dropped() -> Response {
    let mut r = StatusCode::BAD_GATEWAY.into_response();
    r.extensions_mut().insert(DropConnection);
    r
}

/// Entry point for every request. Handlers answer in JSON; a client that
/// prefers protobuf gets the answer re-encoded (`crate::protobuf::respond`).
pub async fn handle(State(app): State<Arc<App>>, req: Request) -> Response {
    let accept = crate::protobuf::Accept::from_headers(req.headers());
    let resp = handle_json(app, req).await;
    crate::protobuf::respond(accept, resp).await
}

async fn handle_json(app: Arc<App>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let query: Q = Query::<Q>::try_from_uri(&parts.uri)
        .map(|q| q.0)
        .unwrap_or_default();
    let user = match app
        .auth
        .authenticate(&app.store, &parts.headers)
        .and_then(|u| app.auth.impersonate(&app.store, u, &parts.headers))
    {
        Ok(u) => u,
        Err(e) => return e.into_response(),
    };
    // The admin path (tests' faults and request log, off unless enabled)
    // needs authentication only.
    if let Some(rest) = path.strip_prefix("/_wr/admin/") {
        if !app.opts.fault_admin {
            return ApiError::no_route().into_response();
        }
        let bytes = axum::body::to_bytes(body, app.opts.max_body_bytes)
            .await
            .unwrap_or_default();
        return admin(&app, &parts.method, rest, &bytes);
    }
    let attrs = crate::auth::request::attributes(parts.method.as_str(), &path, &query);
    let denied =
        crate::auth::endpoints::authorize_request(&app, &user, &attrs, &parts.headers).err();
    if let Some(e) = &denied
        && !attrs.resource_request
    {
        return e.clone().into_response();
    }
    if let Some(ep) = crate::auth::endpoints::route(&path) {
        return match denied {
            Some(e) => e.into_response(),
            None => {
                crate::auth::endpoints::serve(app, user, ep, &parts.method, &parts.headers, body)
                    .await
            }
        };
    }
    if parts.method == Method::GET
        && let Some(r) = crate::openapi::route(&app.registry, &path, &parts.headers)
    {
        return r;
    }
    if parts.method == Method::GET
        && let Some(r) = discovery_route(&app, &path)
    {
        return r;
    }
    let route = match parse_path(&app, &path) {
        Ok(r) => r,
        Err(e) => return denied.unwrap_or(e).into_response(),
    };
    resource_request(app, parts.method, parts.headers, query, route, body, denied).await
}

/// `details` of the `Success` Status of a delete: Go omits an empty group.
fn deleted_details(def: &ResourceDef, name: &str, obj: &Value) -> Value {
    let mut d = json!({"name": name, "kind": def.resource,
        "uid": obj.pointer("/metadata/uid").cloned().unwrap_or(Value::Null)});
    if !def.group.is_empty() {
        d["group"] = json!(def.group);
    }
    d
}

fn discovery_route(app: &App, path: &str) -> Option<Response> {
    let p = path.trim_end_matches('/');
    let ok = |v: Value| Some(json_response(StatusCode::OK, &v));
    match p {
        "/version" => return ok(discovery::version()),
        "/healthz" | "/livez" | "/readyz" => return Some((StatusCode::OK, "ok").into_response()),
        "/api" => return ok(discovery::api_versions(&app.addr.to_string())),
        "/apis" => return ok(discovery::api_group_list(&app.registry)),
        _ => {}
    }
    let segs: Vec<&str> = p.trim_start_matches('/').split('/').collect();
    match segs.as_slice() {
        ["api", v] => Some(match discovery::resource_list(&app.registry, "", v) {
            Some(d) => json_response(StatusCode::OK, &d),
            None => ApiError::page_not_found().into_response(),
        }),
        ["apis", g] => Some(match discovery::api_group(&app.registry, g) {
            Some(d) => json_response(StatusCode::OK, &d),
            None => ApiError::page_not_found().into_response(),
        }),
        ["apis", g, v] => Some(match discovery::resource_list(&app.registry, g, v) {
            Some(d) => json_response(StatusCode::OK, &d),
            None => ApiError::page_not_found().into_response(),
        }),
        _ => None,
    }
}

/// A parsed resource URL.
#[derive(Debug, Clone)]
pub struct Route {
    pub def: Arc<ResourceDef>,
    pub version: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

fn parse_path(app: &App, path: &str) -> Result<Route, ApiError> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] if !rest.is_empty() => ("", *v, rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
        _ => return Err(ApiError::no_route()),
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, tail @ ..]
            if !(tail.is_empty()
                || tail.len() == 1 && matches!(tail[0], "status" | "finalize")) =>
        {
            (Some(ns.to_string()), tail)
        }
        other => (None, other),
    };
    let (resource, name, sub) = match rest {
        [r] => (*r, None, None),
        [r, n] => (*r, Some(n.to_string()), None),
        [r, n, s] => (*r, Some(n.to_string()), Some(s.to_string())),
        _ => return Err(ApiError::no_route()),
    };
    let def = app
        .registry
        .lookup(group, version, resource)
        .ok_or_else(|| {
            // Outside every served group version the mux answers, not the API.
            if discovery::resource_list(&app.registry, group, version).is_some() {
                ApiError::no_route()
            } else {
                ApiError::page_not_found()
            }
        })?;
    if namespace.is_some() && !def.namespaced {
        return Err(ApiError::no_route());
    }
    if def.namespaced && namespace.is_none() && name.is_some() {
        return Err(ApiError::no_route());
    }
    if let Some(s) = &sub {
        let ok = (s == "status" && def.status_subresource)
            || (s == "scale" && def.scale.is_some())
            || def.extra_subresources.iter().any(|x| x == s);
        if !ok {
            return Err(ApiError::no_route());
        }
    }
    Ok(Route {
        def,
        version: version.to_string(),
        namespace,
        name: name.filter(|n| !n.is_empty()),
        subresource: sub,
    })
}

fn verb_of(method: &Method, route: &Route, query: &Q) -> Result<&'static str, ApiError> {
    let watch = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
    Ok(match (method.as_str(), route.name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("POST", false) => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => {
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            ));
        }
    })
}

fn default_manager(headers: &HeaderMap) -> String {
    let ua = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let prefix = ua.split('/').next().unwrap_or("").trim();
    if prefix.is_empty() {
        "unknown".into()
    } else {
        prefix.chars().take(128).collect()
    }
}

fn parse_dry_run(query: &Q, body: Option<&Value>) -> Result<bool, ApiError> {
    let mut vals: Vec<String> = query.get("dryRun").into_iter().cloned().collect();
    if let Some(a) = body.and_then(|b| b.get("dryRun")).and_then(Value::as_array) {
        vals.extend(a.iter().filter_map(|v| v.as_str().map(str::to_string)));
    }
    for v in &vals {
        if v != "All" && !v.is_empty() {
            return Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: \"{v}\": supported values: \"All\""
            )));
        }
    }
    Ok(vals.iter().any(|v| v == "All"))
}

/// Decode a JSON or YAML body into a JSON value.
pub(crate) fn decode(headers: &HeaderMap, bytes: &[u8]) -> Result<Value, ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    if ct.contains("protobuf") {
        // Custom resources included: the real server decodes their protobuf
        // bodies and fails with 400 (protobuf cannot carry unstructured data).
        return crate::protobuf::decode(bytes).map_err(|e| ApiError::bad_request(e.to_string()));
    }
    if ct.contains("cbor") {
        return Err(ApiError::unsupported_media(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {ct})"
        )));
    }
    let media = ct.split(';').next().unwrap_or("").trim();
    if !matches!(media, "application/json" | "application/yaml" | "") {
        return Err(ApiError::unsupported_media(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf",
        ));
    }
    if ct.contains("yaml") {
        serde_yaml::from_slice::<Value>(bytes)
            .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))
    } else {
        serde_json::from_slice::<Value>(bytes).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })
    }
}

/// One resource request after routing: the request log, the authoriser's
/// refusal, injected faults, then the verb.
async fn resource_request(
    app: Arc<App>,
    method: Method,
    headers: HeaderMap,
    query: Q,
    route: Route,
    body: Body,
    denied: Option<ApiError>,
) -> Response {
    let verb = match served_verb(&method, &route, &query) {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    let patch_kind = (verb == "patch").then(|| {
        headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(PatchKind::from_content_type)
    });
    let manager = query
        .get("fieldManager")
        .filter(|s| !s.is_empty())
        .cloned()
        .unwrap_or_else(|| default_manager(&headers));
    let mut record = request_record(verb, &route, &query, &headers, patch_kind);
    // Refused by the authoriser: logged like any request, before faults.
    if let Some(e) = denied {
        record.code = e.code;
        app.requests.push(record);
        return e.into_response();
    }
    let decision = app.faults.decide(verb, &route.def.resource);
    let drop_after = match inject_fault(&decision, &route, &mut record).await {
        Ok(drop_after) => drop_after,
        Err(early) => {
            app.requests.push(record);
            return early;
        }
    };
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let call = Call {
        app: &app,
        verb,
        headers: &headers,
        query: &query,
        route: &route,
        manager: &manager,
        patch_kind: patch_kind.flatten(),
        stale_by: decision.stale_by,
        as_table: crate::table::wants_table(accept),
        include_object: query
            .get("includeObject")
            .cloned()
            .unwrap_or_else(|| "Metadata".into()),
    };
    let mut resp = match execute(call, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    };
    if let Some(w) = deprecation(&route.def, &route.version) {
        resp.headers_mut().append(header::WARNING, w);
    }
    if drop_after {
        record.code = 0;
        app.requests.push(record);
        return dropped();
    }
    record.code = resp.status().as_u16();
    app.requests.push(record);
    resp
}

/// Serves the injected fault the request drew, if any: its latency first,
/// then its answer instead of the request's (`Err`, with the code logged:
/// 0 for a dropped connection). `Ok(true)`: run the request, then drop its
/// answer (`CommitThenDrop`).
async fn inject_fault(
    decision: &crate::faults::Decision,
    route: &Route,
    record: &mut RequestRecord,
) -> Result<bool, Response> {
    if decision.latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(decision.latency_ms)).await;
    }
    let Some(action) = &decision.action else {
        return Ok(false);
    };
    record.fault = Some(action.name().to_string());
    match fault_response(action, route).await {
        Some(r) => {
            record.code = if r.extensions().get::<DropConnection>().is_some() {
                0
            } else {
                r.status().as_u16()
            };
            Err(r)
        }
        None => Ok(matches!(action, FaultAction::CommitThenDrop)),
    }
}

/// The request's verb, if the resource serves it (subresources check their own).
fn served_verb(method: &Method, route: &Route, query: &Q) -> Result<&'static str, ApiError> {
    match verb_of(method, route, query)? {
        v if route.subresource.is_some() || route.def.verbs.contains(&v) => Ok(v),
        _ => Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        )),
    }
}

/// The request log's record of a resource request (its code is set at the end).
fn request_record(
    verb: &str,
    route: &Route,
    query: &Q,
    headers: &HeaderMap,
    patch_kind: Option<Option<PatchKind>>,
) -> RequestRecord {
    RequestRecord {
        verb: verb.to_string(),
        group: route.def.group.clone(),
        version: route.version.clone(),
        resource: route.def.resource.clone(),
        subresource: route.subresource.clone(),
        namespace: route.namespace.clone(),
        name: route.name.clone(),
        code: 0,
        field_manager: query.get("fieldManager").cloned(),
        patch_type: patch_kind.flatten().map(|k| k.name().to_string()),
        dry_run: query.get("dryRun").is_some_and(|v| v == "All"),
        user_agent: headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        fault: None,
    }
}

/// The answer an injected fault gives instead of the request's, if any
/// (`CommitThenDrop` lets the request run and drops its answer).
async fn fault_response(action: &FaultAction, route: &Route) -> Option<Response> {
    match action {
        FaultAction::Conflict => Some(
            ApiError::stale(route.def.qualified(), route.name.as_deref().unwrap_or(""))
                .into_response(),
        ),
        FaultAction::TooManyRequests {
            retry_after_seconds,
        } => Some(ApiError::too_many_requests(*retry_after_seconds).into_response()),
        FaultAction::InternalError => Some(ApiError::internal("injected fault").into_response()),
        FaultAction::Forbidden => Some(
            ApiError::forbidden(format!(
                "{} is forbidden: injected fault",
                route.def.qualified()
            ))
            .into_response(),
        ),
        FaultAction::Unavailable => Some(
            ApiError::unavailable(
                "the server is currently unable to handle the request (injected fault)",
            )
            .into_response(),
        ),
        FaultAction::Timeout {
            hold_ms,
            drop_connection,
        } => {
            tokio::time::sleep(Duration::from_millis(*hold_ms)).await;
            Some(if *drop_connection {
                dropped()
            } else {
                ApiError::timeout(
                    "the server was unable to return a response in the time allotted, but may still be processing the request",
                )
                .into_response()
            })
        }
        FaultAction::CommitThenDrop => None,
        FaultAction::Latency { .. } | FaultAction::StaleList { .. } => None,
    }
}

/// The `Warning` kube-apiserver adds to every request of a deprecated
/// resource version.
fn deprecation(def: &ResourceDef, version: &str) -> Option<HeaderValue> {
    let text = match (def.group.as_str(), version, def.resource.as_str()) {
        ("", "v1", "endpoints") => {
            "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"
        }
        ("", "v1", "componentstatuses") => "v1 ComponentStatus is deprecated in v1.19+",
        _ => return None,
    };
    HeaderValue::from_str(&format!("299 - \"{text}\"")).ok()
}

/// One resource request after routing, authorisation and faults: what the
/// verb handlers (`read`, `write`, `delete`) need.
pub(crate) struct Call<'a> {
    pub(crate) app: &'a Arc<App>,
    pub(crate) verb: &'a str,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) query: &'a Q,
    pub(crate) route: &'a Route,
    pub(crate) manager: &'a str,
    pub(crate) patch_kind: Option<PatchKind>,
    pub(crate) stale_by: Option<u64>,
    /// `Accept` asks for a Table.
    pub(crate) as_table: bool,
    /// `includeObject` of Table rows.
    pub(crate) include_object: String,
}

impl Call<'_> {
    pub(crate) fn ns(&self) -> &str {
        self.route.namespace.as_deref().unwrap_or("")
    }

    pub(crate) fn name(&self) -> &str {
        self.route.name.as_deref().unwrap_or("")
    }
}

/// Dispatches a verb to its handler.
async fn execute(c: Call<'_>, body: Body) -> Result<Response, ApiError> {
    if c.route.subresource.as_deref() == Some("scale") {
        return scale(&c, body).await;
    }
    match c.verb {
        "get" => read::get(&c),
        "list" => list(
            c.app,
            c.route,
            c.query,
            c.as_table,
            &c.include_object,
            c.stale_by,
        ),
        "watch" => read::watch(&c),
        "create" | "update" | "patch" => write::write(&c, body).await,
        "delete" | "deletecollection" => delete::delete(&c, body).await,
        _ => Err(ApiError::method_not_allowed("unsupported verb")),
    }
}

/// The `/scale` subresource (see [`crate::scale`]).
async fn scale(c: &Call<'_>, body: Body) -> Result<Response, ApiError> {
    let (app, verb, headers, query, route, manager, patch_kind) = (
        c.app,
        c.verb,
        c.headers,
        c.query,
        c.route,
        c.manager,
        c.patch_kind,
    );
    let bytes = axum::body::to_bytes(body, app.opts.max_body_bytes)
        .await
        .map_err(|_| ApiError::too_large(app.opts.max_body_bytes))?;
    let t = Target {
        def: &route.def,
        version: &route.version,
        namespace: route.namespace.as_deref().unwrap_or(""),
        subresource: Some("scale"),
        dry_run: parse_dry_run(query, None)?,
        manager,
        // Scale carries only replicas: nothing to decode strictly or warn about.
        decoding: &crate::validation::SYSTEM,
    };
    let name = route.name.as_deref().unwrap_or("");
    let out = match verb {
        "get" => crate::scale::get(app, &t, name)?,
        "update" => crate::scale::update(app, &t, name, &decode(headers, &bytes)?)?,
        "patch" => {
            let kind = patch_kind.ok_or_else(|| {
                ApiError::unsupported_media(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json",
                )
            })?;
            let body = match kind {
                PatchKind::Apply => serde_yaml::from_slice::<Value>(&bytes)
                    .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?,
                _ => serde_json::from_slice::<Value>(&bytes)
                    .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?,
            };
            crate::scale::patch(app, &t, name, kind, &body)?
        }
        _ => {
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            ));
        }
    };
    Ok(json_response(StatusCode::OK, &out))
}

/// The object as seen through `version` (CRD versions share storage; no conversion webhooks).
fn present(def: &ResourceDef, version: &str, obj: &Arc<Value>) -> Value {
    let gv = def.group_version(version);
    let mut v = (**obj).clone();
    if v.get("apiVersion").and_then(Value::as_str) != Some(gv.as_str())
        && let Some(m) = v.as_object_mut()
    {
        m.insert("apiVersion".into(), json!(gv));
    }
    if crate::validation::defaults_on_read(def, version) {
        crate::validation::default_on_read(def, version, &mut v);
    }
    v
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    v: String,
    rv: u64,
    start: String,
}

fn list(
    app: &App,
    route: &Route,
    query: &Q,
    as_table: bool,
    include_object: &str,
    stale_by: Option<u64>,
) -> Result<Response, ApiError> {
    let def = &route.def;
    let labels = LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))
        .map_err(ApiError::bad_request)?;
    let fields = FieldSelector::parse(
        query.get("fieldSelector").map_or("", String::as_str),
        extra_fields(&def.key()),
    )
    .map_err(ApiError::bad_request)?;
    // resourceVersion=0 without continue is served from kube-apiserver's
    // watch cache, which ignores `limit` (informers' first list relies on it).
    let from_cache = query.get("resourceVersion").map(String::as_str) == Some("0")
        && query.get("continue").is_none_or(|c| c.is_empty());
    let limit = query
        .get("limit")
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|_| !from_cache)
        .unwrap_or(0);
    let ns = route.namespace.as_deref().unwrap_or("");
    let prefix = if def.namespaced && !ns.is_empty() {
        format!("{ns}/")
    } else {
        String::new()
    };
    let (at_rv, after) = list_start(app, query, stale_by)?;
    let keep = |o: &Value| labels.matches(o) && fields.matches(o);
    let page = app
        .store
        .page(&def.key(), &prefix, after.as_deref(), at_rv, limit, &keep)
        .map_err(|g| ApiError::too_old(g.requested, g.oldest))?;
    let list_meta = list_meta(&page, query)?;
    if as_table {
        let items: Vec<Value> = page
            .items
            .iter()
            .map(|o| present(def, &route.version, o))
            .collect();
        let refs: Vec<&Value> = items.iter().collect();
        let t = crate::table::table(def, &route.version, &refs, list_meta, include_object, true);
        return Ok(json_response(StatusCode::OK, &t));
    }
    let out = list_body(def, &route.version, &page, &list_meta)?;
    Ok(bytes_response(StatusCode::OK, out))
}

/// Where a list starts: at which resourceVersion (a continue token's, an
/// exact one, or a stale one under fault injection) and after which key.
fn list_start(
    app: &App,
    query: &Q,
    stale_by: Option<u64>,
) -> Result<(Option<u64>, Option<String>), ApiError> {
    let mut at_rv = None;
    let mut after = None;
    if let Some(tok) = query.get("continue").filter(|s| !s.is_empty()) {
        if query
            .get("resourceVersion")
            .is_some_and(|rv| !rv.is_empty() && rv != "0")
        {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let bad = || {
            ApiError::bad_request(
                "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            )
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(tok)
            .map_err(|_| bad())?;
        let t: ContinueToken = serde_json::from_slice(&raw).map_err(|_| bad())?;
        if app.faults.take_gone() || t.rv < app.store.compacted_rv() {
            return Err(ApiError::gone(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
            ));
        }
        at_rv = Some(t.rv);
        after = Some(t.start);
    } else if query.get("resourceVersionMatch").map(String::as_str) == Some("Exact") {
        let rv = query
            .get("resourceVersion")
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| ApiError::bad_request("resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"\""))?;
        at_rv = Some(rv);
    } else if let Some(behind) = stale_by {
        let now = app.store.current_rv();
        at_rv = Some(now.saturating_sub(behind).max(app.store.compacted_rv()));
    }
    Ok((at_rv, after))
}

/// The list's metadata: its resourceVersion and, when more follows, the
/// continue token and (unfiltered lists only) how many items remain.
fn list_meta(page: &crate::store::Page, query: &Q) -> Result<Value, ApiError> {
    let mut list_meta = json!({"resourceVersion": page.rv.to_string()});
    if let Some(last) = &page.more_after {
        let tok = ContinueToken {
            v: "meta.k8s.io/v1".into(),
            rv: page.rv,
            start: last.clone(),
        };
        let raw = serde_json::to_vec(&tok).map_err(|e| ApiError::internal(e.to_string()))?;
        list_meta["continue"] = json!(base64::engine::general_purpose::STANDARD.encode(raw));
        // Only an unfiltered list knows how many items follow (as with etcd).
        let unfiltered = ["labelSelector", "fieldSelector"]
            .iter()
            .all(|k| query.get(*k).is_none_or(String::is_empty));
        if unfiltered {
            list_meta["remainingItemCount"] = json!(page.remaining);
        }
    }
    Ok(list_meta)
}

/// The list as JSON, written item by item.
fn list_body(
    def: &ResourceDef,
    version: &str,
    page: &crate::store::Page,
    list_meta: &Value,
) -> Result<Vec<u8>, ApiError> {
    let gv = def.group_version(version);
    // Streamed by hand so a 100k-item list is not copied into one big Value.
    let mut out = Vec::with_capacity(64 + page.items.len() * 512);
    out.extend_from_slice(b"{\"kind\":");
    serde_json::to_writer(&mut out, &def.list_kind)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    out.extend_from_slice(b",\"apiVersion\":");
    serde_json::to_writer(&mut out, &gv).map_err(|e| ApiError::internal(e.to_string()))?;
    out.extend_from_slice(b",\"metadata\":");
    serde_json::to_writer(&mut out, list_meta).map_err(|e| ApiError::internal(e.to_string()))?;
    out.extend_from_slice(b",\"items\":[");
    let read_defaults = crate::validation::defaults_on_read(def, version);
    for (i, o) in page.items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let same =
            !read_defaults && o.get("apiVersion").and_then(Value::as_str) == Some(gv.as_str());
        let r = if same {
            serde_json::to_writer(&mut out, &**o)
        } else {
            serde_json::to_writer(&mut out, &present(def, version, o))
        };
        r.map_err(|e| ApiError::internal(e.to_string()))?;
    }
    out.extend_from_slice(b"]}");
    Ok(out)
}

fn admin(app: &App, method: &Method, rest: &str, body: &Bytes) -> Response {
    let ok = |v: Value| json_response(StatusCode::OK, &v);
    match (method.as_str(), rest.trim_end_matches('/')) {
        ("GET", "faults") => ok(json!({
            "spec": serde_json::to_value(app.faults.spec()).unwrap_or(Value::Null),
            "injected": serde_json::to_value(app.faults.injected()).unwrap_or(Value::Null),
        })),
        ("PUT" | "POST", "faults") => match serde_json::from_slice::<FaultSpec>(body) {
            Ok(spec) => {
                app.faults.set(spec);
                ok(json!({"status": "ok"}))
            }
            Err(e) => ApiError::bad_request(format!("invalid fault spec: {e}")).into_response(),
        },
        ("DELETE", "faults") => {
            app.faults.clear();
            ok(json!({"status": "ok"}))
        }
        ("GET", "requests") => {
            ok(serde_json::to_value(app.requests.snapshot()).unwrap_or(Value::Null))
        }
        ("DELETE", "requests") => {
            app.requests.clear();
            ok(json!({"status": "ok"}))
        }
        ("POST", "compact") => {
            app.store.compact_all();
            ok(json!({"status": "ok", "compactedTo": app.store.compacted_rv()}))
        }
        _ => ApiError::no_route().into_response(),
    }
}

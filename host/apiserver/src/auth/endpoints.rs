//! The review APIs and the TokenRequest subresource, and the request-level
//! authorisation hook the router calls:
//!
//! - `authorization.k8s.io/v1` SelfSubjectAccessReview (`kubectl auth can-i`),
//!   SubjectAccessReview, LocalSubjectAccessReview, SelfSubjectRulesReview
//!   (`can-i --list`);
//! - `authentication.k8s.io/v1` SelfSubjectReview (`kubectl auth whoami`),
//!   TokenReview;
//! - `POST /api/v1/namespaces/NS/serviceaccounts/NAME/token` (`kubectl create token`).
//!
//! They are answered here rather than stored: a review is computed, never kept.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::app::App;
use crate::errors::{ApiError, Cause};
use crate::resources::{Registry, ResourceDef};

use super::token::{ISSUER, SaClaims};
use super::{Attributes, AuthorizationMode, UserInfo};

const AUTHZ: &str = "authorization.k8s.io";
const AUTHN: &str = "authentication.k8s.io";

/// One of the endpoints served here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    SelfSubjectAccessReview,
    SubjectAccessReview,
    LocalSubjectAccessReview(String),
    SelfSubjectRulesReview,
    SelfSubjectReview,
    TokenReview,
    TokenRequest { namespace: String, name: String },
}

/// The endpoint a path names, if it is one of ours.
pub fn route(path: &str) -> Option<Endpoint> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    Some(match segs.as_slice() {
        ["apis", AUTHZ, "v1", "selfsubjectaccessreviews"] => Endpoint::SelfSubjectAccessReview,
        ["apis", AUTHZ, "v1", "subjectaccessreviews"] => Endpoint::SubjectAccessReview,
        [
            "apis",
            AUTHZ,
            "v1",
            "namespaces",
            ns,
            "localsubjectaccessreviews",
        ] => Endpoint::LocalSubjectAccessReview(ns.to_string()),
        ["apis", AUTHZ, "v1", "selfsubjectrulesreviews"] => Endpoint::SelfSubjectRulesReview,
        ["apis", AUTHN, "v1", "selfsubjectreviews"] => Endpoint::SelfSubjectReview,
        ["apis", AUTHN, "v1", "tokenreviews"] => Endpoint::TokenReview,
        [
            "api",
            "v1",
            "namespaces",
            ns,
            "serviceaccounts",
            name,
            "token",
        ] => Endpoint::TokenRequest {
            namespace: ns.to_string(),
            name: name.to_string(),
        },
        _ => return None,
    })
}

fn def(group: &str, resource: &str, kind: &str, namespaced: bool) -> ResourceDef {
    ResourceDef {
        group: group.into(),
        versions: vec!["v1".into()],
        resource: resource.into(),
        singular: kind.to_lowercase(),
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        namespaced,
        short_names: Vec::new(),
        categories: Vec::new(),
        status_subresource: false,
        scale: None,
        has_generation: false,
        // Reviews are create-only, as in kube-apiserver.
        verbs: vec!["create"],
        // No OpenAPI schema yet: the review kinds are not in the catalog's table.
        type_schemas: BTreeMap::new(),
        custom: false,
        schemas: BTreeMap::new(),
        printer_columns: BTreeMap::new(),
        extra_subresources: Vec::new(),
    }
}

/// Put the review resources and `serviceaccounts/token` into discovery
/// (requests to them never reach the generic handlers: [`route`] takes them first).
pub fn register(registry: &Registry) {
    for d in [
        def(
            AUTHZ,
            "localsubjectaccessreviews",
            "LocalSubjectAccessReview",
            true,
        ),
        def(
            AUTHZ,
            "selfsubjectaccessreviews",
            "SelfSubjectAccessReview",
            false,
        ),
        def(
            AUTHZ,
            "selfsubjectrulesreviews",
            "SelfSubjectRulesReview",
            false,
        ),
        def(AUTHZ, "subjectaccessreviews", "SubjectAccessReview", false),
        def(AUTHN, "selfsubjectreviews", "SelfSubjectReview", false),
        def(AUTHN, "tokenreviews", "TokenReview", false),
    ] {
        if registry.by_key(&d.key()).is_none() {
            registry.upsert(d);
        }
    }
    if let Some(sa) = registry.by_key("/serviceaccounts")
        && !sa.extra_subresources.contains(&"token")
    {
        let mut sa = (*sa).clone();
        sa.extra_subresources.push("token");
        registry.upsert(sa);
    }
}

fn is_apply(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/apply-patch"))
}

/// Authorise one request (before routing, as kube-apiserver does). A
/// server-side apply that would create its object needs `create` as well,
/// checked like kube's patch handler (`"NAME" is forbidden: REASON`).
pub fn authorize_request(
    app: &App,
    user: &UserInfo,
    a: &Attributes,
    headers: &HeaderMap,
) -> Result<(), ApiError> {
    app.auth.check(&app.store, user, a)?;
    if a.resource_request && a.verb == "patch" && !a.name.is_empty() && is_apply(headers) {
        let exists = app
            .registry
            .lookup(&a.api_group, &a.api_version, &a.resource)
            .is_some_and(|d| {
                app.store
                    .get(&d.key(), &crate::store::obj_key(&a.namespace, &a.name))
                    .is_some()
            });
        if !exists {
            let create = Attributes {
                verb: "create".into(),
                ..a.clone()
            };
            if let (false, reason) = app.auth.authorize(&app.store, user, &create) {
                return Err(super::forbidden_status(
                    &a.api_group,
                    &a.resource,
                    &a.name,
                    &reason,
                ));
            }
        }
    }
    Ok(())
}

fn created(v: Value) -> Response {
    let body = serde_json::to_vec(&v).unwrap_or_default();
    let mut r = (StatusCode::CREATED, body).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    r
}

/// Serve one of our endpoints (already authorised).
pub async fn serve(
    app: Arc<App>,
    user: UserInfo,
    ep: Endpoint,
    method: &Method,
    headers: &HeaderMap,
    body: Body,
) -> Response {
    if method != Method::POST {
        return ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        )
        .into_response();
    }
    let bytes = match axum::body::to_bytes(body, app.opts.max_body_bytes).await {
        Ok(b) => b,
        Err(_) => return ApiError::too_large(app.opts.max_body_bytes).into_response(),
    };
    let result = crate::handlers::decode(headers, &bytes).and_then(|obj| match ep {
        Endpoint::SelfSubjectAccessReview => access_review(&app, &user, obj, None),
        Endpoint::SubjectAccessReview => {
            let subject = subject_of(&obj)?;
            access_review(&app, &subject, obj, None)
        }
        Endpoint::LocalSubjectAccessReview(ns) => {
            let subject = subject_of(&obj)?;
            access_review(&app, &subject, obj, Some(&ns))
        }
        Endpoint::SelfSubjectRulesReview => Ok(rules_review(&app, &user, obj)),
        Endpoint::SelfSubjectReview => Ok(json!({
            "kind": "SelfSubjectReview", "apiVersion": format!("{AUTHN}/v1"),
            "metadata": {"creationTimestamp": null},
            "status": {"userInfo": user.to_json()},
        })),
        Endpoint::TokenReview => Ok(token_review(&app, obj)),
        Endpoint::TokenRequest { namespace, name } => token_request(&app, &namespace, &name, obj),
    });
    match result {
        Ok(v) => created(v),
        Err(e) => e.into_response(),
    }
}

fn field_invalid(kind: &str, group: &str, field: &str, message: String) -> ApiError {
    ApiError::invalid(
        group,
        kind,
        "",
        vec![Cause {
            reason: "FieldValueInvalid",
            message,
            field: field.into(),
        }],
    )
}

/// The subject of a (Local)SubjectAccessReview.
fn subject_of(obj: &Value) -> Result<UserInfo, ApiError> {
    let spec = &obj["spec"];
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let user = UserInfo {
        name: spec["user"].as_str().unwrap_or("").to_string(),
        uid: spec["uid"].as_str().unwrap_or("").to_string(),
        groups: strs(&spec["groups"]),
        extra: spec["extra"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), strs(v))).collect())
            .unwrap_or_default(),
    };
    if user.name.is_empty() && user.groups.is_empty() {
        return Err(field_invalid(
            "SubjectAccessReview",
            AUTHZ,
            "spec.user",
            "Invalid value: \"\": at least one of user or group must be specified".into(),
        ));
    }
    Ok(user)
}

/// The attributes a review asks about.
fn review_attributes(kind: &str, spec: &Value) -> Result<Attributes, ApiError> {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    match (spec.get("resourceAttributes"), spec.get("nonResourceAttributes")) {
        (Some(r), None) if r.is_object() => Ok(Attributes {
            verb: s(r, "verb"),
            resource_request: true,
            namespace: s(r, "namespace"),
            api_group: s(r, "group"),
            api_version: s(r, "version"),
            resource: s(r, "resource"),
            subresource: s(r, "subresource"),
            name: s(r, "name"),
            path: String::new(),
        }),
        (None, Some(n)) if n.is_object() => Ok(Attributes {
            verb: s(n, "verb"),
            path: s(n, "path"),
            ..Default::default()
        }),
        _ => Err(field_invalid(
            kind,
            AUTHZ,
            "spec.resourceAttributes",
            "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified".into(),
        )),
    }
}

fn access_review(
    app: &App,
    subject: &UserInfo,
    mut obj: Value,
    local_ns: Option<&str>,
) -> Result<Value, ApiError> {
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("SelfSubjectAccessReview")
        .to_string();
    let a = review_attributes(&kind, &obj["spec"])?;
    if let Some(ns) = local_ns
        && a.namespace != ns
    {
        return Err(field_invalid(
            &kind,
            AUTHZ,
            "spec.resourceAttributes.namespace",
            format!(
                "Invalid value: {:?}: must match metadata.namespace",
                a.namespace
            ),
        ));
    }
    let (allowed, reason) = app.auth.authorize(&app.store, subject, &a);
    let mut status = json!({"allowed": allowed});
    if !reason.is_empty() {
        status["reason"] = json!(reason);
    }
    obj["status"] = status;
    obj["apiVersion"] = json!(format!("{AUTHZ}/v1"));
    if obj.get("metadata").is_none() {
        obj["metadata"] = json!({"creationTimestamp": null});
    }
    Ok(obj)
}

fn rules_review(app: &App, user: &UserInfo, mut obj: Value) -> Value {
    let ns = obj
        .pointer("/spec/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    let mut errors = Vec::new();
    if app.auth.mode == AuthorizationMode::AlwaysAllow {
        resource_rules.push(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
        non_resource_rules.push(json!({"verbs": ["*"], "nonResourceURLs": ["*"]}));
    } else {
        let (granted, errs) = super::rbac::rules_for(&app.store, user, &ns);
        errors = errs;
        for g in granted {
            let r = g.rule;
            if !r.resources.is_empty() {
                let mut v =
                    json!({"verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources});
                if !r.resource_names.is_empty() {
                    v["resourceNames"] = json!(r.resource_names);
                }
                resource_rules.push(v);
            }
            if !r.non_resource_urls.is_empty() {
                non_resource_rules
                    .push(json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}));
            }
        }
    }
    let mut status = json!({
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": !errors.is_empty(),
    });
    if !errors.is_empty() {
        status["evaluationError"] = json!(errors.join(", "));
    }
    obj["status"] = status;
    obj["apiVersion"] = json!(format!("{AUTHZ}/v1"));
    obj
}

fn token_review(app: &App, mut obj: Value) -> Value {
    let token = obj
        .pointer("/spec/token")
        .and_then(Value::as_str)
        .unwrap_or("");
    obj["status"] = match app.auth.authenticate_token(&app.store, token) {
        Some(u) => json!({"authenticated": true, "user": u.to_json(), "audiences": [ISSUER]}),
        None => json!({"user": {}, "error": "invalid bearer token"}),
    };
    obj["apiVersion"] = json!(format!("{AUTHN}/v1"));
    obj
}

/// Shortest and longest token lifetimes kube-apiserver accepts (10 minutes, 2^32 s).
const MIN_EXPIRATION: i64 = 600;
const MAX_EXPIRATION: i64 = 1 << 32;
const DEFAULT_EXPIRATION: i64 = 3600;

fn token_request(app: &App, ns: &str, name: &str, mut obj: Value) -> Result<Value, ApiError> {
    let sa = app
        .store
        .get("/serviceaccounts", &crate::store::obj_key(ns, name))
        .ok_or_else(|| {
            ApiError::not_found(
                crate::errors::Qualified {
                    group: "",
                    resource: "serviceaccounts",
                },
                name,
            )
        })?;
    let uid = sa
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let secs = obj
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(DEFAULT_EXPIRATION);
    let invalid = |msg: String| {
        ApiError::invalid(
            AUTHN,
            "TokenRequest",
            name,
            vec![Cause {
                reason: "FieldValueInvalid",
                message: format!("Invalid value: {secs}: {msg}"),
                field: "spec.expirationSeconds".into(),
            }],
        )
    };
    if secs < MIN_EXPIRATION {
        return Err(invalid(
            "may not specify a duration less than 10 minutes".into(),
        ));
    }
    if secs > MAX_EXPIRATION {
        return Err(invalid(
            "may not specify a duration larger than 2^32 seconds".into(),
        ));
    }
    let mut audiences: Vec<String> = obj
        .pointer("/spec/audiences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if audiences.is_empty() {
        audiences.push(ISSUER.into());
    }
    let now = chrono::Utc::now();
    let claims = SaClaims {
        namespace: ns.into(),
        name: name.into(),
        uid,
        audiences: audiences.clone(),
        issued_at: now.timestamp(),
        expires_at: now.timestamp() + secs,
        jti: uuid::Uuid::new_v4().to_string(),
    };
    let token = app.auth.signer.sign(&claims.to_json());
    let expires =
        (now + chrono::Duration::seconds(secs)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    obj["kind"] = json!("TokenRequest");
    obj["apiVersion"] = json!(format!("{AUTHN}/v1"));
    obj["metadata"] = json!({"name": name, "namespace": ns, "creationTimestamp": null});
    obj["spec"]["audiences"] = json!(audiences);
    obj["spec"]["expirationSeconds"] = json!(secs);
    if obj["spec"].get("boundObjectRef").is_none() {
        obj["spec"]["boundObjectRef"] = Value::Null;
    }
    obj["status"] = json!({"token": token, "expirationTimestamp": expires});
    Ok(obj)
}

/// Mint a token for ServiceAccount `ns/name` without a request (tests, `dev`).
pub fn mint(app: &App, ns: &str, name: &str, secs: i64) -> Result<String, ApiError> {
    let out = token_request(app, ns, name, json!({"spec": {"expirationSeconds": secs}}))?;
    Ok(out["status"]["token"].as_str().unwrap_or("").to_string())
}

//! Kubernetes `Status` error objects. Clients (kube-rs, kubectl) branch on
//! `reason` and `code`, and users read `message`, so both follow
//! kube-apiserver's wording.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One `details.causes` entry (a field-level problem).
#[derive(Debug, Clone)]
pub struct Cause {
    pub reason: &'static str,
    pub message: String,
    pub field: String,
}

/// An API error, rendered as a `v1 Status` with the HTTP code of kube-apiserver.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub name: Option<String>,
    pub group: Option<String>,
    pub kind: Option<String>,
    pub causes: Vec<Cause>,
    pub retry_after: Option<u64>,
    /// Made like kube-apiserver's `NewGenericServerResponse`: `details` is
    /// written even when empty (`"details": {}`).
    pub generic: bool,
    /// The mux's plain-text `404 page not found` (a path outside every
    /// served group version), not a `Status`.
    pub page_not_found: bool,
}

/// A resource as named in error messages: `configmaps` or `widgets.example.com`.
#[derive(Debug, Clone, Copy)]
pub struct Qualified<'a> {
    pub group: &'a str,
    pub resource: &'a str,
}

impl std::fmt::Display for Qualified<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            name: None,
            group: None,
            kind: None,
            causes: Vec::new(),
            retry_after: None,
            generic: false,
            page_not_found: false,
        }
    }

    /// A `NewGenericServerResponse` error: empty `details` are written.
    pub fn generic(mut self) -> Self {
        self.generic = true;
        self
    }

    /// The plain-text 404 of a path no group version serves.
    pub fn page_not_found() -> Self {
        let mut e = Self::new(404, "NotFound", "404 page not found");
        e.page_not_found = true;
        e
    }

    fn about(mut self, q: Qualified<'_>, name: &str) -> Self {
        self.name = Some(name.to_string());
        self.group = Some(q.group.to_string());
        self.kind = Some(q.resource.to_string());
        self
    }

    pub fn not_found(q: Qualified<'_>, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{q} \"{name}\" not found")).about(q, name)
    }

    pub fn already_exists(q: Qualified<'_>, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{q} \"{name}\" already exists"),
        )
        .about(q, name)
    }

    pub fn conflict(q: Qualified<'_>, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {q} \"{name}\": {why}"),
        )
        .about(q, name)
    }

    pub fn stale(q: Qualified<'_>, name: &str) -> Self {
        Self::conflict(
            q,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 with field causes. `kind` is the qualified kind (`Widget.example.com`).
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let qualified_kind = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let list = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect::<Vec<_>>();
        let joined = if list.len() == 1 {
            list[0].clone()
        } else {
            format!("[{}]", list.join(", "))
        };
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{qualified_kind} \"{name}\" is invalid: {joined}"),
        );
        e.name = Some(name.to_string());
        e.group = Some(group.to_string());
        e.kind = Some(kind.to_string());
        e.causes = causes;
        e
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// The generic 404 for an unknown path or resource type.
    pub fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .generic()
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message).generic()
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn too_old(requested: u64, oldest: u64) -> Self {
        Self::gone(format!("too old resource version: {requested} ({oldest})"))
    }

    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    pub fn unsupported_media(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    pub fn too_many_requests(retry_after: u64) -> Self {
        let mut e = Self::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
        );
        e.retry_after = Some(retry_after);
        e
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, "Timeout", message)
    }

    /// The `Status` object, also used as the object of a watch `ERROR` event.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty() {
            // Errors relayed from storage carry no reason.
            if let Some(m) = status.as_object_mut() {
                m.remove("reason");
            }
        }
        let mut details = serde_json::Map::new();
        if let Some(n) = self.name.as_ref().filter(|n| !n.is_empty()) {
            details.insert("name".into(), json!(n));
        }
        if let Some(g) = &self.group
            && !g.is_empty()
        {
            details.insert("group".into(), json!(g));
        }
        if let Some(k) = &self.kind {
            details.insert("kind".into(), json!(k));
        }
        if !self.causes.is_empty() {
            let causes: Vec<Value> = self
                .causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        if let Some(r) = self.retry_after {
            details.insert("retryAfterSeconds".into(), json!(r));
        }
        if !details.is_empty() || self.generic {
            status["details"] = Value::Object(details);
        }
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if self.page_not_found {
            let mut resp = (code, "404 page not found\n").into_response();
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            return resp;
        }
        let body = serde_json::to_vec(&self.to_status()).unwrap_or_default();
        let mut resp = (code, body).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(r) = self.retry_after
            && let Ok(v) = HeaderValue::from_str(&r.to_string())
        {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_names_group_qualified_resource() {
        let e = ApiError::not_found(
            Qualified {
                group: "example.com",
                resource: "widgets",
            },
            "w",
        );
        let s = e.to_status();
        assert_eq!(s["message"], "widgets.example.com \"w\" not found");
        assert_eq!(s["details"]["group"], "example.com");
        assert_eq!(s["code"], 404);
    }

    #[test]
    fn invalid_lists_every_cause() {
        let causes = vec![
            Cause {
                reason: "FieldValueRequired",
                message: "Required value".into(),
                field: "spec.a".into(),
            },
            Cause {
                reason: "FieldValueInvalid",
                message: "Invalid value: 1".into(),
                field: "spec.b".into(),
            },
        ];
        let e = ApiError::invalid("example.com", "Widget", "w", causes);
        assert_eq!(
            e.message,
            "Widget.example.com \"w\" is invalid: [spec.a: Required value, spec.b: Invalid value: 1]"
        );
        assert_eq!(e.to_status()["details"]["causes"][1]["field"], "spec.b");
    }
}

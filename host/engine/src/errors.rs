//! Classification of API errors into the reaction the rulebook prescribes:
//! transient → per-key backoff, 409 → fresh read and retry, 429 → wait at least
//! Retry-After, 422 → a condition naming the object and field.

use std::time::Duration;

/// How the engine reacts to a failed API call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiErrorClass {
    /// 404: the object is gone; usually fine (level-triggered).
    NotFound,
    /// 409 AlreadyExists on create.
    AlreadyExists,
    /// 409 Conflict (stale resourceVersion, failed precondition): read fresh and retry.
    Conflict,
    /// 429: wait at least this long.
    TooManyRequests(Duration),
    /// 422 (or 400 BadRequest on a body): the request is invalid; retrying the same
    /// input cannot help. The message names the field.
    Invalid(String),
    /// 5xx, timeouts, connection errors and everything else: backoff.
    Transient,
}

/// Default wait for a 429 without a usable Retry-After hint.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Classifies a kube client error.
pub fn classify(err: &kube::Error) -> ApiErrorClass {
    match err {
        kube::Error::Api(status) => classify_status(status),
        _ => ApiErrorClass::Transient,
    }
}

fn classify_status(status: &kube::core::Status) -> ApiErrorClass {
    match status.code {
        404 => ApiErrorClass::NotFound,
        409 if status.reason == "AlreadyExists" => ApiErrorClass::AlreadyExists,
        409 => ApiErrorClass::Conflict,
        429 => {
            let secs = status
                .details
                .as_ref()
                .map(|d| d.retry_after_seconds)
                .filter(|s| *s > 0);
            ApiErrorClass::TooManyRequests(
                secs.map(|s| Duration::from_secs(u64::from(s)))
                    .unwrap_or(DEFAULT_RETRY_AFTER),
            )
        }
        422 | 400 => ApiErrorClass::Invalid(invalid_message(status)),
        500 if status.message.starts_with(TYPED_PATCH_ERROR) => {
            ApiErrorClass::Invalid(status.message.clone())
        }
        _ => ApiErrorClass::Transient,
    }
}

/// How kube-apiserver answers a server-side apply whose object does not fit
/// the type (a field the type lacks, a number where a string goes): a 500,
/// not a 4xx (kubernetes/kubernetes#139253, open as of v1.37). The same bytes
/// fail every time, so retrying them with backoff forever — what a 500
/// otherwise gets — would hide the plugin's mistake; it is treated as the
/// 422 it should be (`ChildInvalid`). The *live* object failing the same
/// conversion ("typed live object") is the server's problem and stays transient.
const TYPED_PATCH_ERROR: &str = "failed to create typed patch object";

/// A message for a 422 that names the field(s) the server complained about.
fn invalid_message(status: &kube::core::Status) -> String {
    let causes: Vec<String> = status
        .details
        .as_ref()
        .map(|d| {
            d.causes
                .iter()
                .filter(|c| !c.field.is_empty())
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect()
        })
        .unwrap_or_default();
    if causes.is_empty() {
        status.message.clone()
    } else {
        causes.join("; ")
    }
}

/// True when a JSON-patch `test` operation failed; API servers report this either
/// as 409 or as 422, and either way it means "read fresh and retry".
pub fn is_precondition_failure(err: &kube::Error) -> bool {
    matches!(
        classify(err),
        ApiErrorClass::Conflict | ApiErrorClass::Invalid(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;
    use serde_json::json;

    fn api(v: serde_json::Value) -> kube::Error {
        kube::Error::Api(Box::new(serde_json::from_value::<Status>(v).unwrap()))
    }

    fn code(code: u16, reason: &str) -> kube::Error {
        api(json!({"code": code, "reason": reason, "message": "m"}))
    }

    #[test]
    fn a_typed_patch_object_500_is_invalid_input() {
        // kube-apiserver v1.37.2's answer to a ConfigMap child with `data.message: 5`.
        let msg = "failed to create typed patch object (ns/w1-a; /v1, Kind=ConfigMap): .data.message: expected string, got &value.valueUnstructured{Value:5}";
        assert_eq!(
            classify(&api(
                json!({"code": 500, "status": "Failure", "message": msg})
            )),
            ApiErrorClass::Invalid(msg.into())
        );
        let live = "failed to create typed live object (ns/w1-a; /v1, Kind=ConfigMap): .data.x: expected string";
        assert_eq!(
            classify(&api(json!({"code": 500, "message": live}))),
            ApiErrorClass::Transient
        );
    }

    #[test]
    fn codes_map_to_reactions() {
        assert_eq!(classify(&code(404, "NotFound")), ApiErrorClass::NotFound);
        assert_eq!(
            classify(&code(409, "AlreadyExists")),
            ApiErrorClass::AlreadyExists
        );
        assert_eq!(classify(&code(409, "Conflict")), ApiErrorClass::Conflict);
        assert_eq!(
            classify(&code(500, "InternalError")),
            ApiErrorClass::Transient
        );
        assert_eq!(
            classify(&code(503, "ServiceUnavailable")),
            ApiErrorClass::Transient
        );
        assert_eq!(classify(&code(504, "Timeout")), ApiErrorClass::Transient);
        assert_eq!(
            classify(&code(429, "TooManyRequests")),
            ApiErrorClass::TooManyRequests(DEFAULT_RETRY_AFTER)
        );
    }

    #[test]
    fn retry_after_is_honoured() {
        let e = api(json!({"code": 429, "details": {"retryAfterSeconds": 7}}));
        assert_eq!(
            classify(&e),
            ApiErrorClass::TooManyRequests(Duration::from_secs(7))
        );
    }

    #[test]
    fn invalid_names_the_field() {
        let e = api(json!({
            "code": 422,
            "message": "Service \"web\" is invalid",
            "details": {"causes": [{"field": "spec.ports[0].port", "message": "Invalid value: 0"}]}
        }));
        match classify(&e) {
            ApiErrorClass::Invalid(m) => assert!(m.contains("spec.ports[0].port"), "{m}"),
            other => panic!("unexpected {other:?}"),
        }
    }
}

//! Content negotiation for responses: the handlers answer in JSON, and when a
//! client's `Accept` prefers protobuf (client-go and kubectl's typed clients
//! send `application/vnd.kubernetes.protobuf,*/*` or `…,application/json`)
//! the JSON body is re-encoded here — objects, lists and `Status` errors in
//! the envelope, watch streams as length-prefixed `WatchEvent` frames. Kinds
//! without a protobuf form (custom resources, discovery documents without a
//! message, `/version`) stay JSON when the client also accepts JSON and are
//! 406 (a protobuf `Status`) when it accepts only protobuf, as the real
//! server does.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};

use super::envelope;

/// The protobuf media type.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// Marker extension on watch responses: their body is an endless stream of
/// JSON events, one a line, which protobuf clients get as frames when the
/// watched kind has a protobuf form (`protobuf`: not a custom resource).
#[derive(Debug, Clone, Copy)]
pub struct WatchStream {
    pub protobuf: bool,
}

/// What the client accepts, reduced to the choice that matters here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accept {
    /// Protobuf is preferred over JSON.
    pub protobuf_first: bool,
    /// JSON (or anything) is acceptable as well.
    pub json_ok: bool,
}

impl Accept {
    /// From the request headers; no `Accept` means JSON.
    pub fn from_headers(headers: &HeaderMap) -> Accept {
        let accept = headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        Accept::parse(accept)
    }

    /// Media ranges in order of `q` (stable), the first we can serve wins.
    pub fn parse(accept: &str) -> Accept {
        let mut ranges: Vec<(f32, bool, bool)> = Vec::new(); // (q, protobuf, json-ish)
        for part in accept.split(',') {
            let mut params = part.split(';').map(str::trim);
            let media = params.next().unwrap_or("").to_ascii_lowercase();
            if media.is_empty() {
                continue;
            }
            let mut q = 1.0f32;
            let mut as_kind = false;
            for p in params {
                if let Some(v) = p.strip_prefix("q=") {
                    q = v.parse().unwrap_or(1.0);
                } else if p.starts_with("as=") {
                    as_kind = true;
                }
            }
            if q <= 0.0 {
                continue;
            }
            let protobuf = media == PROTOBUF && !as_kind;
            let json = matches!(
                media.as_str(),
                "application/json" | "application/yaml" | "*/*" | "application/*"
            ) || media.ends_with("+json");
            if protobuf || json || as_kind {
                ranges.push((q, protobuf, json || as_kind));
            }
        }
        if ranges.is_empty() {
            return Accept {
                protobuf_first: false,
                json_ok: true,
            };
        }
        ranges.sort_by(|a, b| b.0.total_cmp(&a.0));
        Accept {
            protobuf_first: ranges[0].1,
            json_ok: ranges.iter().any(|r| r.2),
        }
    }
}

fn is_json(resp: &Response) -> bool {
    resp.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json"))
}

/// 406, as a protobuf `Status` (the client accepts nothing else).
fn not_acceptable(message: &str) -> Response {
    let status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": "NotAcceptable", "code": 406
    });
    let (ct, body) = match envelope::encode(&status) {
        Ok(pb) => (PROTOBUF, pb),
        Err(_) => ("application/json", status.to_string().into_bytes()),
    };
    let mut r = (StatusCode::NOT_ACCEPTABLE, body).into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    r
}

/// The real server's answer for kinds it cannot encode as protobuf.
fn kind_not_acceptable() -> Response {
    not_acceptable(&format!(
        "only the following media types are accepted: application/json, application/yaml, {PROTOBUF}"
    ))
}

/// Re-encode a handler's JSON response as protobuf when the client prefers it.
pub async fn respond(accept: Accept, resp: Response) -> Response {
    if !accept.protobuf_first || !is_json(&resp) {
        return resp;
    }
    if let Some(w) = resp.extensions().get::<WatchStream>().copied() {
        return match (w.protobuf, accept.json_ok) {
            (true, _) => watch(resp),
            (false, true) => resp,
            (false, false) => kind_not_acceptable(),
        };
    }
    let (mut parts, body) = resp.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = %e, "could not read a response body to re-encode");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let obj: Option<Value> = serde_json::from_slice(&bytes).ok();
    // Documents that are no kind (`/version`) are JSON only.
    if obj.as_ref().is_none_or(|o| o.get("kind").is_none()) {
        if accept.json_ok {
            return Response::from_parts(parts, Body::from(bytes));
        }
        return not_acceptable(
            "406: Not Acceptable\n\nAvailable representations: application/json",
        );
    }
    let Some(obj) = obj.filter(envelope::supports) else {
        if accept.json_ok {
            return Response::from_parts(parts, Body::from(bytes));
        }
        return kind_not_acceptable();
    };
    match envelope::encode(&obj) {
        Ok(pb) => {
            parts
                .headers
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROTOBUF));
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(pb))
        }
        Err(e) => {
            // A stored object the schema cannot carry is a bug here, not the
            // client's: say so, and fall back to JSON where the client allows.
            let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
            tracing::warn!(error = %e, kind, "object not encodable as protobuf");
            if accept.json_ok {
                Response::from_parts(parts, Body::from(bytes))
            } else {
                (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
            }
        }
    }
}

/// A JSON-lines watch body as protobuf frames.
fn watch(resp: Response) -> Response {
    let (mut parts, body) = resp.into_parts();
    let mut pending: Vec<u8> = Vec::new();
    let frames = body.into_data_stream().map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        pending.extend_from_slice(&chunk);
        let mut out = Vec::new();
        while let Some(nl) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=nl).collect();
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let event: Value = serde_json::from_slice(&line).map_err(std::io::Error::other)?;
            match envelope::watch_frame(&event) {
                Ok(f) => out.extend_from_slice(&f),
                Err(e) => {
                    tracing::warn!(error = %e, "watch event not encodable as protobuf; ending the watch");
                    return Err(std::io::Error::other(e.to_string()));
                }
            }
        }
        Ok::<_, std::io::Error>(axum::body::Bytes::from(out))
    });
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(PROTOBUF_WATCH),
    );
    Response::from_parts(parts, Body::from_stream(frames))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_of_real_clients() {
        let pb = |s| Accept::parse(s);
        assert_eq!(
            pb("application/vnd.kubernetes.protobuf,*/*"),
            Accept {
                protobuf_first: true,
                json_ok: true
            }
        );
        assert_eq!(
            pb("application/vnd.kubernetes.protobuf, application/json"),
            Accept {
                protobuf_first: true,
                json_ok: true
            }
        );
        assert_eq!(
            pb("application/vnd.kubernetes.protobuf"),
            Accept {
                protobuf_first: true,
                json_ok: false
            }
        );
        // kubectl get: tables in JSON.
        assert!(!pb("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json").protobuf_first);
        assert!(
            !pb("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json")
                .protobuf_first
        );
        assert!(!pb("application/json, application/vnd.kubernetes.protobuf").protobuf_first);
        assert!(
            !pb("application/json;q=0.5, application/vnd.kubernetes.protobuf;q=0.4").protobuf_first
        );
        assert!(pb("application/json;q=0.5, application/vnd.kubernetes.protobuf").protobuf_first);
        assert!(!pb("").protobuf_first);
    }
}

//! A tower layer for the `kube::Client` that counts every API request by verb
//! and response code (`wasm_reconciler_api_requests_total`), so the engine's
//! calls are measured without touching each call site:
//!
//! ```ignore
//! let client = kube::client::ClientBuilder::try_from(config)?
//!     .with_layer(&ApiMetricsLayer::new(metrics.clone()))
//!     .build();
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::metrics::Metrics;

/// Wraps a client service with request counting.
#[derive(Clone, Debug)]
pub struct ApiMetricsLayer {
    metrics: Arc<Metrics>,
}

impl ApiMetricsLayer {
    /// Counts into `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        ApiMetricsLayer { metrics }
    }
}

impl<S> tower::Layer<S> for ApiMetricsLayer {
    type Service = ApiMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ApiMetrics {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// The service made by [`ApiMetricsLayer`].
#[derive(Clone, Debug)]
pub struct ApiMetrics<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S, B, RB> tower::Service<http::Request<B>> for ApiMetrics<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let verb = verb(req.method(), req.uri());
        let metrics = self.metrics.clone();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await;
            let code = res.as_ref().map(|r| r.status().as_u16()).unwrap_or(0);
            metrics.api_request(verb, code);
            res
        })
    }
}

/// The Kubernetes verb of a request, from method, path and `watch` query.
fn verb(method: &http::Method, uri: &http::Uri) -> &'static str {
    let segs: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
    // /api/v1/... or /apis/group/version/...
    let rest: &[&str] = match segs.first() {
        Some(&"api") if segs.len() >= 2 => &segs[2..],
        Some(&"apis") if segs.len() >= 3 => &segs[3..],
        _ => return "other",
    };
    let rest = match rest {
        ["namespaces", _, tail @ ..] if !tail.is_empty() => tail,
        r => r,
    };
    let named = rest.len() >= 2;
    let watch = uri
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    match *method {
        http::Method::GET if watch => "watch",
        http::Method::GET if named => "get",
        http::Method::GET => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if named => "delete",
        http::Method::DELETE => "deletecollection",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    fn v(m: Method, uri: &str) -> &'static str {
        verb(&m, &uri.parse().unwrap())
    }

    #[test]
    fn verbs_follow_the_kubernetes_request_info_rules() {
        assert_eq!(v(Method::GET, "/api/v1/namespaces/ns/configmaps/a"), "get");
        assert_eq!(v(Method::GET, "/api/v1/namespaces/ns/configmaps"), "list");
        assert_eq!(
            v(
                Method::GET,
                "/api/v1/configmaps?watch=true&resourceVersion=5"
            ),
            "watch"
        );
        assert_eq!(v(Method::GET, "/api/v1/namespaces/foo"), "get");
        assert_eq!(v(Method::GET, "/api/v1/namespaces"), "list");
        assert_eq!(
            v(
                Method::PATCH,
                "/apis/apps/v1/namespaces/ns/deployments/d/status"
            ),
            "patch"
        );
        assert_eq!(
            v(
                Method::POST,
                "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
            ),
            "create"
        );
        assert_eq!(
            v(
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l"
            ),
            "update"
        );
        assert_eq!(v(Method::DELETE, "/api/v1/namespaces/ns/pods/p"), "delete");
        assert_eq!(
            v(Method::DELETE, "/api/v1/namespaces/ns/pods"),
            "deletecollection"
        );
        assert_eq!(v(Method::GET, "/version"), "other");
    }
}

//! A tower layer on the controller's `kube::Client` that times every API
//! request by class (child create, child apply, status patch, read, event),
//! from sending to the response headers. Non-invasive: the engine is not
//! touched; it only sees a client with one more layer.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use futures::future::BoxFuture;

use crate::samples::Samples;

/// The class of a request from its method and path.
pub fn class(method: &http::Method, path: &str, query: Option<&str>) -> &'static str {
    let watch = query.is_some_and(|q| q.contains("watch=true") || q.contains("watch=1"));
    let events = path.contains("/events");
    let status = path.ends_with("/status");
    match *method {
        _ if watch => "api watch",
        http::Method::GET => "api read",
        http::Method::POST if events => "api event",
        http::Method::POST => "api create",
        http::Method::PATCH if status => "api status",
        http::Method::PATCH | http::Method::PUT => "api apply",
        http::Method::DELETE => "api delete",
        _ => "api other",
    }
}

/// The layer.
#[derive(Clone)]
pub struct ApiTiming(pub Arc<Samples>);

impl<S> tower::Layer<S> for ApiTiming {
    type Service = ApiTimingService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        ApiTimingService {
            inner,
            samples: self.0.clone(),
        }
    }
}

/// The service the layer wraps around the client's stack.
#[derive(Clone)]
pub struct ApiTimingService<S> {
    inner: S,
    samples: Arc<Samples>,
}

impl<S, B> tower::Service<http::Request<B>> for ApiTimingService<S>
where
    S: tower::Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let what = class(req.method(), req.uri().path(), req.uri().query());
        let samples = self.samples.clone();
        let started = Instant::now();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let r = fut.await;
            if what != "api watch" {
                samples.add(what, started.elapsed());
            }
            r
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn classes() {
        let p = "/apis/examples.wasm-reconciler.dev/v1alpha1/namespaces/b/staticsites/s/status";
        assert_eq!(class(&Method::PATCH, p, None), "api status");
        assert_eq!(
            class(
                &Method::PATCH,
                "/apis/apps/v1/namespaces/b/deployments/s",
                None
            ),
            "api apply"
        );
        assert_eq!(
            class(&Method::POST, "/api/v1/namespaces/b/events", None),
            "api event"
        );
        assert_eq!(
            class(&Method::POST, "/api/v1/namespaces/b/configmaps", None),
            "api create"
        );
        assert_eq!(
            class(&Method::GET, "/api/v1/configmaps", Some("watch=true&rv=1")),
            "api watch"
        );
        assert_eq!(class(&Method::GET, "/api/v1/configmaps", None), "api read");
    }
}

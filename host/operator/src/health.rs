//! The probe and metrics endpoint (`--metrics-bind`, default `0.0.0.0:8080`):
//!
//! - `GET /metrics` — Prometheus text exposition of the registry;
//! - `GET /healthz` — 200 while the process serves HTTP at all;
//! - `GET /readyz` — 200 once the caches have synced **and** the leader
//!   election state is known (leader or standby); a standby is ready (it is a
//!   healthy hot spare), a process that cannot reach the Lease is not;
//! - `GET /livez` — 200 unless the work queue is stalled (see
//!   [`crate::liveness`]); the Deployment's livenessProbe points here.
//!
//! Failures answer 503 with a one-line reason.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::leader::LeaderState;
use crate::liveness::Liveness;

/// Default listen address of the endpoint.
pub const DEFAULT_BIND: &str = "0.0.0.0:8080";

/// What the endpoints report on.
#[derive(Clone)]
pub struct HealthInputs {
    /// The metric registry (filled by [`crate::Metrics::new`]).
    pub registry: Arc<Registry>,
    /// True once every informer cache has done its initial list.
    pub caches_synced: watch::Receiver<bool>,
    /// The election state ([`crate::LeaderElection::state`]).
    pub leader: watch::Receiver<LeaderState>,
    /// The stall detector.
    pub liveness: Liveness,
}

/// The router; exposed for tests and for embedding in another server.
pub fn router(inputs: HealthInputs) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/livez", get(livez))
        .with_state(inputs)
}

/// Binds `addr` and serves until `shutdown` fires. Binding happens before
/// the future is returned so a port clash fails start-up, not later.
pub async fn serve(
    addr: SocketAddr,
    inputs: HealthInputs,
    shutdown: CancellationToken,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tracing::info!(addr = %local, "serving /metrics /healthz /readyz /livez");
    let app = router(inputs);
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
    });
    Ok((local, task))
}

async fn metrics(State(s): State<HealthInputs>) -> Response {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &s.registry) {
        Ok(()) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn readyz(State(s): State<HealthInputs>) -> Response {
    match readiness(*s.caches_synced.borrow(), &s.leader.borrow()) {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
    }
}

/// The readiness rule on plain values.
fn readiness(caches_synced: bool, leader: &LeaderState) -> Result<(), &'static str> {
    if !caches_synced {
        return Err("caches not synced");
    }
    if !leader.is_known() {
        return Err("leader election state unknown");
    }
    Ok(())
}

async fn livez(State(s): State<HealthInputs>) -> Response {
    match s.liveness.check() {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(stall) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "work queue stalled: {} item(s) queued, no progress for {}s",
                stall.queued,
                stall.since.as_secs()
            ),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use http_body_util::BodyExt;
    use std::time::Duration;
    use tower::ServiceExt;

    struct Fixture {
        synced: watch::Sender<bool>,
        leader: watch::Sender<LeaderState>,
        liveness: Liveness,
        router: Router,
    }

    fn fixture(stall_after: Duration) -> Fixture {
        let mut registry = Registry::default();
        let liveness = Liveness::new(stall_after);
        let metrics = crate::Metrics::new(&mut registry, liveness.clone());
        metrics.reconcile_finished(
            "web",
            crate::metrics::ReconcileResult::Success,
            Duration::from_millis(2),
        );
        let (synced, synced_rx) = watch::channel(false);
        let (leader, leader_rx) = watch::channel(LeaderState::Unknown);
        let router = router(HealthInputs {
            registry: Arc::new(registry),
            caches_synced: synced_rx,
            leader: leader_rx,
            liveness: liveness.clone(),
        });
        Fixture {
            synced,
            leader,
            liveness,
            router,
        }
    }

    async fn get(r: &Router, path: &str) -> (StatusCode, String) {
        let resp = r
            .clone()
            .oneshot(axum::http::Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn readyz_needs_synced_caches_and_a_known_election_state() {
        let f = fixture(Duration::from_secs(60));
        assert_eq!(
            get(&f.router, "/readyz").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        f.synced.send_replace(true);
        let (code, body) = get(&f.router, "/readyz").await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("leader"), "{body}");
        f.leader.send_replace(LeaderState::Standby {
            holder: "other".into(),
        });
        assert_eq!(get(&f.router, "/readyz").await.0, StatusCode::OK);
        f.leader.send_replace(LeaderState::Leader);
        assert_eq!(get(&f.router, "/readyz").await.0, StatusCode::OK);
        f.synced.send_replace(false);
        assert_eq!(
            get(&f.router, "/readyz").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
    }

    #[tokio::test]
    async fn healthz_is_ok_even_when_not_ready() {
        let f = fixture(Duration::from_secs(60));
        assert_eq!(get(&f.router, "/healthz").await.0, StatusCode::OK);
    }

    #[tokio::test]
    async fn livez_fails_on_a_stalled_queue() {
        let f = fixture(Duration::ZERO);
        assert_eq!(get(&f.router, "/livez").await.0, StatusCode::OK);
        f.liveness.queue_depth("web", 2);
        let (code, body) = get(&f.router, "/livez").await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("2 item(s)"), "{body}");
    }

    #[tokio::test]
    async fn metrics_serves_the_registry() {
        let f = fixture(Duration::from_secs(60));
        let (code, body) = get(&f.router, "/metrics").await;
        assert_eq!(code, StatusCode::OK);
        assert!(
            body.contains(
                r#"wasm_reconciler_reconciles_total{controller="web",result="success"} 1"#
            ),
            "{body}"
        );
        assert!(body.ends_with("# EOF\n"), "{body}");
    }
}

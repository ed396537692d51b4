//! Variant 3's hook server (own child process): an axum server on loopback
//! whose `POST /sync` runs the same static-site function on the request JSON
//! and answers the response JSON — Metacontroller's sync-hook model. A plugin
//! verdict is a 422 with [`crate::logic::LogicError`].

use std::time::Instant;

use anyhow::Result;
use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use wr_runtime::ReconcileRequest;

use crate::procs::{say, stdin_commands};

/// Response header: microseconds spent in the handler (parse, logic, encode).
pub const HANDLER_MICROS: &str = "x-handler-micros";

async fn sync(body: Bytes) -> Response {
    let started = Instant::now();
    let (code, out) = match serde_json::from_slice::<ReconcileRequest>(&body) {
        Err(e) => (
            StatusCode::BAD_REQUEST,
            serde_json::to_vec(&serde_json::json!({"error": e.to_string()})),
        ),
        Ok(req) => match crate::logic::reconcile(req) {
            Ok(resp) => (StatusCode::OK, serde_json::to_vec(&resp)),
            Err(e) => (StatusCode::UNPROCESSABLE_ENTITY, serde_json::to_vec(&e)),
        },
    };
    let out = out.unwrap_or_default();
    let micros = started.elapsed().as_micros().to_string();
    let mut r = (code, out).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Ok(v) = HeaderValue::from_str(&micros) {
        r.headers_mut().insert(HANDLER_MICROS, v);
    }
    r
}

/// Child entry point: prints the hook's URL, serves until stdin closes.
pub async fn run() -> Result<()> {
    let app = axum::Router::new().route("/sync", axum::routing::post(sync));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop_rx.await;
            })
            .await
    });
    say(&url)?;
    let mut commands = stdin_commands();
    while let Some(_cmd) = commands.recv().await {
        say("{}")?;
    }
    let _ = stop_tx.send(());
    server.await??;
    Ok(())
}

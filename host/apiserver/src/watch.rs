//! Watch streams: newline-delimited JSON events over a chunked response,
//! from a resourceVersion (or the current state), with bookmarks, timeouts,
//! label/field filtering (objects moving in/out of a selector become
//! ADDED/DELETED, as the watch cache does), `410 Gone` as an ERROR event,
//! and the watch faults (cut after N events / T, forced Gone).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::app::App;
use crate::errors::ApiError;
use crate::resources::ResourceDef;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{Event, EventKind, Subscription};

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Synthetic ADDED events for the current state first (`resourceVersion` unset or "0").
    CurrentState,
    /// Events after this version only.
    After(u64),
}

#[derive(Debug, Clone)]
pub struct WatchParams {
    pub start: Start,
    pub bookmarks: bool,
    pub send_initial_events: bool,
    pub timeout: Duration,
    /// `ns/` or empty for all namespaces.
    pub prefix: String,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub as_table: bool,
    pub include_object: String,
}

struct Ctx {
    def: Arc<ResourceDef>,
    version: String,
    api_version: String,
    p: WatchParams,
    tx: mpsc::Sender<Bytes>,
    sent: u64,
    cut_after_events: Option<u64>,
}

impl Ctx {
    fn matches(&self, o: &Value) -> bool {
        self.p.labels.matches(o) && self.p.fields.matches(o)
    }

    fn present(&self, o: &Arc<Value>) -> Value {
        let mut v = (**o).clone();
        if v.get("apiVersion").and_then(Value::as_str) != Some(self.api_version.as_str())
            && let Some(m) = v.as_object_mut()
        {
            m.insert("apiVersion".into(), json!(self.api_version));
        }
        if self.p.as_table {
            let rv = v
                .pointer("/metadata/resourceVersion")
                .cloned()
                .unwrap_or(json!(""));
            crate::table::table(
                &self.def,
                &self.version,
                &[&v],
                json!({"resourceVersion": rv}),
                &self.p.include_object,
                self.sent == 0,
            )
        } else {
            v
        }
    }

    /// Send one line; false when the client is gone or the stream must end.
    async fn send(&mut self, kind: &str, object: &Value) -> bool {
        let mut line = Vec::with_capacity(256);
        line.extend_from_slice(b"{\"type\":\"");
        line.extend_from_slice(kind.as_bytes());
        line.extend_from_slice(b"\",\"object\":");
        if serde_json::to_writer(&mut line, object).is_err() {
            return false;
        }
        line.extend_from_slice(b"}\n");
        if self.tx.send(Bytes::from(line)).await.is_err() {
            return false;
        }
        if kind != "BOOKMARK" && kind != "ERROR" {
            self.sent += 1;
            if self.cut_after_events.is_some_and(|n| self.sent >= n) {
                return false;
            }
        }
        true
    }

    async fn bookmark(&mut self, rv: u64, initial_end: bool) -> bool {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.def.kind, "apiVersion": self.api_version, "metadata": meta});
        self.send("BOOKMARK", &obj).await
    }

    async fn event(&mut self, e: &Event) -> bool {
        if !e.key.starts_with(&self.p.prefix) {
            return true;
        }
        let now = e.kind != EventKind::Deleted && self.matches(&e.object);
        let before = e.prev.as_ref().is_some_and(|p| self.matches(p));
        let kind = match (e.kind, before, now) {
            (EventKind::Added, _, true) => "ADDED",
            (EventKind::Modified, true, true) => "MODIFIED",
            (EventKind::Modified, false, true) => "ADDED",
            (EventKind::Modified, true, false) => "DELETED",
            (EventKind::Deleted, true, _) => "DELETED",
            _ => return true,
        };
        // An object that stops matching leaves as it last matched, with the
        // event's resourceVersion (the watch cache's `PrevObject`).
        let obj = match (&e.prev, e.kind, kind) {
            (Some(prev), EventKind::Modified, "DELETED") => {
                let mut last = (**prev).clone();
                if let Some(rv) = e.object.pointer("/metadata/resourceVersion") {
                    crate::meta::meta_mut(&mut last).insert("resourceVersion".into(), rv.clone());
                }
                self.present(&Arc::new(last))
            }
            _ => self.present(&e.object),
        };
        self.send(kind, &obj).await
    }
}

/// Start a watch; the response body streams until timeout, fault or shutdown.
pub fn watch(app: Arc<App>, def: Arc<ResourceDef>, version: String, p: WatchParams) -> Body {
    let (tx, rx) = mpsc::channel::<Bytes>(1024);
    tokio::spawn(run(app, def, version, p, tx));
    Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    }))
}

/// One watch stream: catch up from its start, then follow the live events.
async fn run(
    app: Arc<App>,
    def: Arc<ResourceDef>,
    version: String,
    p: WatchParams,
    tx: mpsc::Sender<Bytes>,
) {
    let (cut_events, cut_ms) = app.faults.watch_cuts();
    let mut ctx = Ctx {
        api_version: def.group_version(&version),
        def,
        version,
        p,
        tx,
        sent: 0,
        cut_after_events: cut_events,
    };
    let Some(sub) = catch_up(&app, &mut ctx).await else {
        return;
    };
    follow(&app, &mut ctx, sub, cut_ms).await;
}

/// The watch's start: a forced 410 (fault injection), or the initial state
/// (an ADDED per matching object, then the initial-events bookmark) and the
/// retained events since the start. `None`: the watch has ended.
async fn catch_up(app: &App, ctx: &mut Ctx) -> Option<Subscription> {
    let res = ctx.def.key();
    if app.faults.take_gone() {
        let rv = match ctx.p.start {
            Start::After(rv) => rv,
            Start::CurrentState => app.store.current_rv(),
        };
        let err = ApiError::too_old(rv, app.store.current_rv() + 1);
        ctx.send("ERROR", &err.to_status()).await;
        return None;
    }
    let (initial, from) = match ctx.p.start {
        Start::CurrentState => {
            let keep = |_: &Value| true;
            match app.store.page(&res, &ctx.p.prefix, None, None, 0, &keep) {
                Ok(page) => (page.items, page.rv),
                Err(g) => {
                    let err = ApiError::too_old(g.requested, g.oldest);
                    ctx.send("ERROR", &err.to_status()).await;
                    return None;
                }
            }
        }
        Start::After(rv) => (Vec::new(), rv),
    };
    let sub = match app.store.subscribe(&res, from) {
        Ok(s) => s,
        Err(g) => {
            let err = ApiError::too_old(g.requested, g.oldest);
            ctx.send("ERROR", &err.to_status()).await;
            return None;
        }
    };
    for o in &initial {
        if ctx.matches(o) {
            let obj = ctx.present(o);
            if !ctx.send("ADDED", &obj).await {
                return None;
            }
        }
    }
    if ctx.p.send_initial_events && ctx.p.bookmarks && !ctx.bookmark(from, true).await {
        return None;
    }
    for e in &sub.backlog {
        if !ctx.event(e).await {
            return None;
        }
    }
    Some(sub)
}

/// Streams the live events (and bookmarks) until the watch's timeout or an
/// injected cut, shutdown, the client going away, or a lag (410).
async fn follow(app: &App, ctx: &mut Ctx, sub: Subscription, cut_ms: Option<u64>) {
    let res = ctx.def.key();
    let mut last_rv = sub.rv;
    let mut rx = sub.rx;
    let deadline = tokio::time::sleep(match cut_ms {
        Some(ms) => ctx.p.timeout.min(Duration::from_millis(ms)),
        None => ctx.p.timeout,
    });
    tokio::pin!(deadline);
    let mut tick = tokio::time::interval(app.opts.bookmark_interval);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = app.shutdown.cancelled() => return,
            _ = &mut deadline => return,
            _ = ctx.tx.closed() => return,
            _ = tick.tick() => {
                if ctx.p.bookmarks && !ctx.bookmark(last_rv, false).await {
                    return;
                }
            }
            r = rx.recv() => match r {
                Ok(e) => {
                    if e.rv <= last_rv {
                        continue;
                    }
                    last_rv = e.rv;
                    if *e.resource == *res && !ctx.event(&e).await {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let err = ApiError::too_old(last_rv, app.store.compacted_rv() + 1);
                    ctx.send("ERROR", &err.to_status()).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}

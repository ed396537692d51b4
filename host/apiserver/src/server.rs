//! Start, serve and stop the server. Connections are served with hyper
//! directly (not `axum::serve`) so a fault can close a connection without
//! any response: a service error makes hyper drop the HTTP/1 connection.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::app::{App, CRD_KEY, Options};
use crate::errors::ApiError;
use crate::faults::FaultHandle;
use crate::handlers::{self, DropConnection};
use crate::persistence::{self, Persistence};
use crate::requests::{RequestLog, RequestRecord};
use crate::resources::{Registry, def_from_crd};
use crate::store::{Expect, Store, obj_key};

/// Server configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Listen address; port 0 picks a free port.
    pub bind: SocketAddr,
    /// Persist objects here (snapshot + write-ahead log) when set.
    pub data_dir: Option<PathBuf>,
    /// Committed events kept for watches and consistent pagination; older
    /// resourceVersions get `410 Gone`.
    pub watch_history: usize,
    /// Serve the admin path `/_wr/admin/` (faults, request log, compaction).
    pub fault_admin: bool,
    /// Seed of the fault-injection RNG.
    pub seed: u64,
    /// Interval between BOOKMARK events on watches that allow them.
    pub bookmark_interval: Duration,
    /// Largest accepted request body (kube-apiserver: 3 MiB).
    pub max_body_bytes: usize,
    /// Garbage collector / namespace controller resync interval.
    pub gc_interval: Duration,
    /// Bearer tokens, anonymous access and RBAC enforcement.
    pub auth: crate::auth::AuthConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir: None,
            watch_history: 10_000,
            fault_admin: false,
            seed: 0,
            bookmark_interval: Duration::from_secs(10),
            max_body_bytes: 3 * 1024 * 1024,
            gc_interval: Duration::from_millis(200),
            auth: Default::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot set up the signing key and admin token")]
    Secrets(#[source] std::io::Error),
    #[error("cannot use data directory {dir}")]
    DataDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A running server. Dropping it does not stop it; call [`RunningServer::shutdown`].
pub struct RunningServer {
    app: Arc<App>,
    addr: SocketAddr,
    accept: JoinHandle<()>,
    gc: JoinHandle<()>,
    active: Arc<AtomicUsize>,
    persistence: Option<Arc<Persistence>>,
}

#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by fault injection")
    }
}

impl std::error::Error for Dropped {}

const SYSTEM_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// Start a server and return once it accepts connections.
pub async fn start(config: Config) -> Result<RunningServer, StartError> {
    let listener = TcpListener::bind(config.bind)
        .await
        .map_err(|source| StartError::Bind {
            addr: config.bind,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| StartError::Bind {
        addr: config.bind,
        source,
    })?;
    let store = Store::new(config.watch_history);
    let registry = Registry::default();
    crate::auth::endpoints::register(&registry);
    let (store, persistence) = match &config.data_dir {
        Some(dir) => {
            let (store, p) = restore(dir, store, &registry)?;
            (store, Some(p))
        }
        None => (store, None),
    };
    let auth = crate::auth::Auth::new(&config.auth, config.bind, config.data_dir.as_deref())
        .map_err(StartError::Secrets)?;
    let app = App {
        store,
        registry,
        faults: FaultHandle::new(config.seed),
        requests: RequestLog::default(),
        opts: Options {
            bookmark_interval: config.bookmark_interval,
            max_body_bytes: config.max_body_bytes,
            fault_admin: config.fault_admin,
            gc_interval: config.gc_interval,
        },
        shutdown: CancellationToken::new(),
        gc_wake: tokio::sync::Notify::new(),
        addr,
        auth,
    }
    .shared();
    bootstrap(&app);
    if app.auth.mode == crate::auth::AuthorizationMode::Rbac {
        crate::auth::bootstrap::install(&app.store);
    }
    let gc = tokio::spawn(crate::gc::run(app.clone()));
    let active = Arc::new(AtomicUsize::new(0));
    let router = Router::new()
        .fallback(handlers::handle)
        .with_state(app.clone());
    let accept = tokio::spawn(accept_loop(
        listener,
        router,
        app.shutdown.clone(),
        active.clone(),
    ));
    tracing::info!(%addr, "embedded API server listening");
    Ok(RunningServer {
        app,
        addr,
        accept,
        gc,
        active,
        persistence,
    })
}

/// Restores the objects persisted in `dir` (and the custom resource kinds
/// their CRDs define), then persists every later change there.
fn restore(
    dir: &std::path::Path,
    store: Store,
    registry: &Registry,
) -> Result<(Store, Arc<Persistence>), StartError> {
    let derr = |source| StartError::DataDir {
        dir: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(derr)?;
    let loaded = persistence::load(dir).map_err(derr)?;
    for (r, _, o) in &loaded.objects {
        if r == CRD_KEY
            && let Ok(d) = def_from_crd(o)
        {
            registry.upsert(d);
        }
    }
    let n = loaded.objects.len();
    store.restore(loaded.rv, loaded.objects);
    let p = Arc::new(Persistence::open(dir).map_err(derr)?);
    p.snapshot(&store).map_err(derr)?;
    tracing::info!(dir = %dir.display(), objects = n, "restored persisted objects");
    let sink = p.clone();
    Ok((store.with_sink(Box::new(move |e| sink.record(e))), p))
}

fn bootstrap(app: &App) {
    for ns in SYSTEM_NAMESPACES {
        let key = obj_key("", ns);
        if app.store.get("/namespaces", &key).is_some() {
            continue;
        }
        let obj = json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": ns,
                "uid": uuid::Uuid::new_v4().to_string(),
                "creationTimestamp": crate::meta::now_rfc3339(),
                "labels": {"kubernetes.io/metadata.name": ns},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        });
        let _ = app
            .store
            .commit("/namespaces", &key, Expect::Absent, Some(obj));
    }
    for (resource, key, obj) in crate::kinds::bootstrap_objects() {
        if app.store.get(resource, &key).is_none() {
            let _ = app.store.commit(resource, &key, Expect::Absent, Some(obj));
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
    active: Arc<AtomicUsize>,
) {
    loop {
        let (stream, _) = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let token = shutdown.clone();
        let active = active.clone();
        active.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                let router = router.clone();
                async move {
                    let resp = match router.oneshot(req.map(Body::new)).await {
                        Ok(r) => r,
                        Err(never) => match never {},
                    };
                    if resp.extensions().get::<DropConnection>().is_some() {
                        Err(Dropped)
                    } else {
                        Ok(resp)
                    }
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = token.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(5), conn).await;
                }
            }
            active.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

impl RunningServer {
    /// Base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kubeconfig (cluster, context and user `wasm-reconciler-dev`) with
    /// the admin bearer token.
    pub fn kubeconfig_yaml(&self) -> String {
        crate::kubeconfig::kubeconfig_yaml_with_token(
            &self.url(),
            Some(self.app.auth.admin_token()),
        )
    }

    /// The admin bearer token (user `admin`, group `system:masters`). Secret:
    /// never log it.
    pub fn admin_token(&self) -> String {
        self.app.auth.admin_token().to_string()
    }

    /// A signed token of ServiceAccount `namespace/name` (which must exist),
    /// valid for `seconds` (at least 600): what `kubectl create token` returns.
    pub fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
        seconds: i64,
    ) -> Result<String, ApiError> {
        crate::auth::endpoints::mint(&self.app, namespace, name, seconds)
    }

    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent)?;
        }
        // The file holds the admin token: readable by its owner only.
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        std::io::Write::write_all(&mut opts.open(path)?, self.kubeconfig_yaml().as_bytes())?;
        #[cfg(unix)]
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        Ok(())
    }

    /// Fault injection, settable while the server runs.
    pub fn faults(&self) -> FaultHandle {
        self.app.faults.clone()
    }

    /// Every resource request served so far (discovery excluded).
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.app.requests.snapshot()
    }

    pub fn clear_requests(&self) {
        self.app.requests.clear();
    }

    /// Current value of the global resourceVersion counter.
    pub fn resource_version(&self) -> u64 {
        self.app.store.current_rv()
    }

    /// Drop all watch history: watches and continued lists from older
    /// versions get `410 Gone` (what an etcd compaction does).
    pub fn compact(&self) {
        self.app.store.compact_all();
    }

    /// Stop accepting, end watches, finish in-flight requests (up to 5 s),
    /// stop background tasks and write the final snapshot.
    pub async fn shutdown(self) {
        self.app.shutdown.cancel();
        let _ = self.accept.await;
        for _ in 0..100 {
            if self.active.load(Ordering::SeqCst) == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = self.gc.await;
        if let Some(p) = &self.persistence
            && let Err(e) = p.snapshot(&self.app.store)
        {
            tracing::error!(error = %e, "final snapshot failed; the write-ahead log still holds every write");
        }
    }
}

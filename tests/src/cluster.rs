//! Test bed for the engine: the embedded API server, the CRDs, a manager running
//! in-process, and scriptable native plugins (so a scenario can make a plugin
//! fail N times, return invalid output, never finalize, ... and count its calls).

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::future::BoxFuture;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::{Client, CustomResourceExt};
use serde_json::{Value, json};
use wr_apiserver::{FaultHandle, RequestRecord, RunningServer};
use wr_engine::{
    Manager, ManagerHandle, ManagerOptions, PluginError, PluginLoader, ReconcilePlugin,
    WasmController,
};
use wr_runtime::{CallLimits, ReconcileRequest, ReconcileResponse};

/// Group of the test parent kind `Widget`.
pub const TEST_GROUP: &str = "test.wasm-reconciler.dev";

/// The plugin function of a [`ScriptPlugin`]: request and 1-based call number in.
pub type ScriptFn =
    dyn Fn(&ReconcileRequest, u64) -> Result<ReconcileResponse, PluginError> + Send + Sync;

/// A native plugin driven by a closure; counts its calls.
pub struct ScriptPlugin {
    digest: String,
    calls: AtomicU64,
    f: Box<ScriptFn>,
}

impl ScriptPlugin {
    /// A plugin named `name` running `f`.
    pub fn new(
        name: &str,
        f: impl Fn(&ReconcileRequest, u64) -> Result<ReconcileResponse, PluginError>
        + Send
        + Sync
        + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            digest: format!("sha256:{name}"),
            calls: AtomicU64::new(0),
            f: Box::new(f),
        })
    }

    /// Calls so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}

impl ReconcilePlugin for ScriptPlugin {
    fn digest(&self) -> &str {
        &self.digest
    }

    fn reconcile<'a>(
        &'a self,
        req: &'a ReconcileRequest,
        _limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<ReconcileResponse, PluginError>> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let r = (self.f)(req, n);
        Box::pin(async move { r })
    }
}

/// Loads native plugins by the bytes of their "component" file, and real
/// components (anything else) with the wasm runtime when one is given.
#[derive(Default)]
pub struct TestLoader {
    native: Mutex<HashMap<Vec<u8>, Arc<dyn ReconcilePlugin>>>,
    wasm: Option<wr_engine::wasm::WasmLoader>,
}

impl TestLoader {
    /// A loader that also runs real components.
    pub fn with_wasm() -> Result<Self> {
        let rt = wr_runtime::PluginRuntime::new(wr_runtime::RuntimeConfig::default())
            .map_err(|e| anyhow::anyhow!("runtime: {e}"))?;
        Ok(Self {
            native: Mutex::default(),
            wasm: Some(wr_engine::wasm::WasmLoader::new(rt)),
        })
    }

    /// Registers a native plugin under `bytes`.
    pub fn register(&self, bytes: &[u8], p: Arc<dyn ReconcilePlugin>) {
        self.native
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(bytes.to_vec(), p);
    }
}

impl PluginLoader for TestLoader {
    fn load(&self, bytes: Vec<u8>) -> BoxFuture<'static, Result<Arc<dyn ReconcilePlugin>, String>> {
        let found = self
            .native
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&bytes)
            .cloned();
        if let Some(p) = found {
            return Box::pin(async move { Ok(p) });
        }
        match &self.wasm {
            Some(w) => w.load(bytes),
            None => Box::pin(async { Err("unknown test plugin".to_string()) }),
        }
    }
}

/// The API server a test runs against: its own embedded one, or its session on
/// the shared real control plane (`WR_TEST_CLUSTER=real`, see [`crate::target`]).
pub enum TestServer {
    /// The embedded API server of this test.
    Embedded(RunningServer),
    /// This test's turn on the shared real cluster.
    Real(crate::target::RealSession),
}

impl TestServer {
    /// Requests so far (since the last [`Self::clear_requests`]): the embedded
    /// server's log, or the real one's audit log.
    pub fn requests(&self) -> Vec<RequestRecord> {
        match self {
            TestServer::Embedded(s) => s.requests(),
            TestServer::Real(r) => r
                .requests()
                .unwrap_or_else(|e| panic!("reading the audit log: {e:#}")),
        }
    }

    /// Forgets the requests so far.
    pub fn clear_requests(&self) {
        match self {
            TestServer::Embedded(s) => s.clear_requests(),
            TestServer::Real(r) => r
                .clear_requests()
                .unwrap_or_else(|e| panic!("reading the audit log: {e:#}")),
        }
    }

    /// The embedded server's fault injection. Tests that use it skip on the
    /// real cluster first ([`crate::target::skip_on_real`]).
    pub fn faults(&self) -> FaultHandle {
        match self {
            TestServer::Embedded(s) => s.faults(),
            TestServer::Real(_) => panic!(
                "fault injection needs the embedded API server; skip this test on the real cluster"
            ),
        }
    }

    /// The embedded server itself, when that is what runs.
    pub fn embedded(&self) -> Option<&RunningServer> {
        match self {
            TestServer::Embedded(s) => Some(s),
            TestServer::Real(_) => None,
        }
    }

    /// Writes an admin kubeconfig for this server to `path`.
    pub fn write_kubeconfig(&self, path: &std::path::Path) -> std::io::Result<()> {
        match self {
            TestServer::Embedded(s) => s.write_kubeconfig(path),
            TestServer::Real(r) => std::fs::copy(&r.shared.kubeconfig, path).map(|_| ()),
        }
    }

    /// Whether this is the real control plane.
    pub fn is_real(&self) -> bool {
        matches!(self, TestServer::Real(_))
    }
}

/// A running test cluster plus (optionally) a running manager.
pub struct Env {
    /// The API server (embedded, or the real one).
    pub server: TestServer,
    /// Admin client configuration of the server (for clients a test builds itself).
    pub config: kube::Config,
    /// A client for the test's own reads and writes.
    pub client: Client,
    /// The engine's client (kube's built-in retry off, see `wr_engine::engine_config`).
    pub engine_client: Client,
    /// The loader the manager uses.
    pub loader: Arc<TestLoader>,
    /// Where plugin "component" files are written.
    pub dir: tempfile::TempDir,
    manager: Option<(
        tokio::task::JoinHandle<()>,
        tokio::sync::oneshot::Sender<()>,
        ManagerHandle,
    )>,
    /// Manager options for the next start.
    pub opts: ManagerOptions,
}

/// The `Widget` test parent CRD (namespaced, status subresource, free-form spec).
pub fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{TEST_GROUP}")},
        "spec": {
            "group": TEST_GROUP,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}}
            }]
        }
    })
}

/// ApiResource of `Widget`.
pub fn widget_ar() -> ApiResource {
    ApiResource {
        group: TEST_GROUP.into(),
        version: "v1".into(),
        api_version: format!("{TEST_GROUP}/v1"),
        kind: "Widget".into(),
        plural: "widgets".into(),
    }
}

/// ApiResource of core ConfigMaps.
pub fn configmap_ar() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        plural: "configmaps".into(),
    }
}

/// Polls `f` every 25 ms until it returns `Some`, or fails after `secs`.
pub async fn eventually<T, F, Fut>(what: &str, secs: u64, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("timed out waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Installs a CRD and waits until discovery serves it.
pub async fn install_crd(client: &Client, crd: Value) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(crd)?;
    let group = crd.spec.group.clone();
    let version = crd.spec.versions[0].name.clone();
    let plural = crd.spec.names.plural.clone();
    let name = crd.metadata.name.clone().unwrap_or_default();
    // Server-side apply: on the shared real cluster an earlier test may have
    // installed it already.
    api.patch(
        &name,
        &kube::api::PatchParams::apply("wr-tests").force(),
        &kube::api::Patch::Apply(&crd),
    )
    .await
    .with_context(|| format!("applying CRD {name}"))?;
    let gv: kube::core::GroupVersion = format!("{group}/{version}").parse()?;
    // A real API server establishes a CRD asynchronously (names accepted,
    // then discovery), which takes longer than the embedded one's.
    eventually("CRD in discovery", 30, || {
        let client = client.clone();
        let gv = gv.clone();
        let plural = plural.clone();
        async move {
            let g = kube::discovery::oneshot::pinned_group(&client, &gv)
                .await
                .ok()?;
            g.versioned_resources(&gv.version)
                .iter()
                .any(|(ar, _)| ar.plural == plural)
                .then_some(())
        }
    })
    .await
}

impl Env {
    /// Starts the API server and installs the WasmController and Widget CRDs.
    pub async fn start() -> Result<Env> {
        let (server, config) = if crate::target::real_selected() {
            let session = crate::target::RealSession::begin().await?;
            let config = session.config().await?;
            (TestServer::Real(session), config)
        } else {
            let server = wr_apiserver::start(wr_apiserver::Config::default()).await?;
            let config = kube::Config::new(server.url().parse()?);
            (TestServer::Embedded(server), config)
        };
        let client = Client::try_from(config.clone())?;
        let engine_client = Client::try_from(wr_engine::engine_config(config.clone()))?;
        if let TestServer::Real(s) = &server {
            s.create_namespace(&client, &s.ns("default")).await?;
        }
        install_crd(&client, serde_json::to_value(WasmController::crd())?).await?;
        install_crd(&client, widget_crd()).await?;
        let opts = ManagerOptions {
            plugin_poll: Duration::from_millis(500),
            ..ManagerOptions::default()
        };
        Ok(Env {
            server,
            config,
            client,
            engine_client,
            loader: Arc::new(TestLoader::default()),
            dir: tempfile::tempdir()?,
            manager: None,
            opts,
        })
    }

    /// Like [`Env::start`] with a loader that also runs real components.
    pub async fn start_with_wasm() -> Result<Env> {
        let mut env = Env::start().await?;
        env.loader = Arc::new(TestLoader::with_wasm()?);
        Ok(env)
    }

    /// Starts the engine's manager in-process.
    pub fn start_manager(&mut self) {
        let manager = Manager::new(
            self.engine_client.clone(),
            self.loader.clone(),
            self.opts.clone(),
        );
        let handle = manager.handle();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = manager
                .run(async move {
                    let _ = rx.await;
                })
                .await;
        });
        self.manager = Some((task, tx, handle));
    }

    /// The running manager's handle.
    pub fn manager(&self) -> Option<&ManagerHandle> {
        self.manager.as_ref().map(|m| &m.2)
    }

    /// Stops the manager (in-flight reconciles finish).
    pub async fn stop_manager(&mut self) {
        if let Some((task, tx, _)) = self.manager.take() {
            let _ = tx.send(());
            let _ = task.await;
        }
    }

    /// Writes `bytes` as a plugin file and registers the native plugin for it.
    pub fn plugin_file(&self, name: &str, p: Arc<dyn ReconcilePlugin>) -> Result<PathBuf> {
        let bytes = format!("native-plugin:{name}").into_bytes();
        self.loader.register(&bytes, p);
        let path = self.dir.path().join(format!("{name}.wasm"));
        std::fs::write(&path, &bytes)?;
        Ok(path)
    }

    /// Creates a WasmController for Widgets owning ConfigMaps, with a native plugin.
    pub async fn widget_controller(
        &self,
        name: &str,
        plugin: Arc<dyn ReconcilePlugin>,
        finalize: bool,
    ) -> Result<()> {
        let path = self.plugin_file(name, plugin)?;
        self.create_controller(json!({
            "apiVersion": "wasm-reconciler.dev/v1alpha1",
            "kind": "WasmController",
            "metadata": {"name": name},
            "spec": {
                "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"},
                "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
                "plugin": {"path": path.display().to_string()},
                "finalize": finalize,
                "resyncPeriodSeconds": 3600
            }
        }))
        .await
    }

    /// Creates any WasmController object.
    pub async fn create_controller(&self, wc: Value) -> Result<()> {
        let api: Api<DynamicObject> = Api::all_with(
            self.client.clone(),
            &kube::api::ApiResource::erase::<WasmController>(&()),
        );
        let obj: DynamicObject = serde_json::from_value(wc)?;
        api.create(&PostParams::default(), &obj)
            .await
            .context("creating WasmController")?;
        Ok(())
    }

    /// Api for Widgets in `ns`.
    pub fn widgets(&self, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.ns(ns), &widget_ar())
    }

    /// Api for ConfigMaps in `ns`.
    pub fn configmaps(&self, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.ns(ns), &configmap_ar())
    }

    /// The namespace this test uses for what it calls `name`: `name` itself on
    /// the embedded server, a name unique to the test on the shared real one
    /// (where `default` is mapped too).
    pub fn ns(&self, name: &str) -> String {
        match &self.server {
            TestServer::Embedded(_) => name.to_string(),
            TestServer::Real(s) => s.ns(name),
        }
    }

    /// Creates namespace `ns` (mapped by [`Self::ns`], as every namespace
    /// argument of `Env`'s methods is).
    pub async fn namespace(&self, ns: &str) -> Result<()> {
        if let TestServer::Real(s) = &self.server {
            return s.create_namespace(&self.client, &s.ns(ns)).await;
        }
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        let obj = serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )?;
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Creates a Widget with `spec`.
    pub async fn create_widget(&self, ns: &str, name: &str, spec: Value) -> Result<DynamicObject> {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{TEST_GROUP}/v1"), "kind": "Widget",
            "metadata": {"name": name, "namespace": self.ns(ns)},
            "spec": spec
        }))?;
        Ok(self
            .widgets(ns)
            .create(&PostParams::default(), &obj)
            .await?)
    }

    /// Writes recorded by the API server for `resource`, made by field manager `fm`
    /// (or by anyone when `fm` is None).
    pub fn writes(&self, resource: &str, fm: Option<&str>) -> Vec<RequestRecord> {
        self.server
            .requests()
            .into_iter()
            .filter(|r| r.is_write() && r.resource == resource)
            .filter(|r| fm.is_none() || r.field_manager.as_deref() == fm)
            .collect()
    }
}

/// Ready condition of an object: (status, reason, observedGeneration).
pub fn ready_of(obj: &DynamicObject) -> Option<(String, String, Option<i64>)> {
    let conds = obj.data.get("status")?.get("conditions")?.as_array()?;
    let c = conds
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))?;
    Some((
        c.get("status")?.as_str()?.to_string(),
        c.get("reason")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        c.get("observedGeneration").and_then(Value::as_i64),
    ))
}

/// A response with `children` and nothing else.
pub fn response(children: Vec<Value>) -> ReconcileResponse {
    ReconcileResponse {
        children,
        conditions: vec![],
        status: None,
        requeue_after_seconds: None,
        events: vec![],
        finalized: false,
    }
}

/// The standard test plugin logic: one ConfigMap `<parent>-<suffix>` per entry of
/// `spec.children` (default `["a"]`) with `data.value = spec.value`; finalizes at once.
pub fn configmap_children(req: &ReconcileRequest) -> ReconcileResponse {
    let name = req.parent["metadata"]["name"]
        .as_str()
        .unwrap_or("x")
        .to_string();
    let value = req.parent["spec"]["value"]
        .as_str()
        .unwrap_or("v")
        .to_string();
    let suffixes: Vec<String> = req.parent["spec"]["children"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_else(|| vec!["a".to_string()]);
    let mut r = response(
        suffixes
            .iter()
            .map(|s| {
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": format!("{name}-{s}"), "labels": {"app": name}},
                       "data": {"value": value}})
            })
            .collect(),
    );
    r.finalized = req.finalizing;
    if req.finalizing {
        r.children.clear();
    }
    r
}

//! Which cluster the integration suites run against: the embedded API server
//! (default, one per test) or, with `WR_TEST_CLUSTER=real`, one shared real
//! control plane ([`crate::real_cluster`]).
//!
//! The shared cluster is the one named by `WR_REAL_KUBECONFIG` (and its audit log
//! `WR_REAL_AUDIT_LOG`), as `real-cluster up` prints them; when unset, the first
//! test of a process starts one for the whole process (stopped when it exits).
//!
//! Tests on the shared cluster run one at a time per process ([`RealSession`]
//! holds a lock): every test runs its own manager, and a manager reconciles every
//! WasmController in the cluster, so two at once would fight over each other's
//! parents. Each session starts by clearing what earlier ones left (WasmControllers,
//! custom objects, test namespaces) and names its namespaces uniquely
//! ([`RealSession::ns`]), since namespace deletion is asynchronous on a real cluster.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use anyhow::{Context, Result, anyhow};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::json;
use wr_apiserver::RequestRecord;

use crate::audit::{AuditLog, Mark};
use crate::real_cluster::{CONTROLLER_MANAGER_USER, RealCluster, StartOptions};

/// Label on every namespace a test creates on the shared cluster.
pub const TEST_NS_LABEL: &str = "wasm-reconciler.dev/test";

/// `WR_TEST_CLUSTER=real`: run on the shared real control plane.
pub fn real_selected() -> bool {
    std::env::var("WR_TEST_CLUSTER").is_ok_and(|v| v == "real")
}

/// For tests that need the embedded server (fault injection, its internals):
/// true (and says why on stderr) when the real cluster is selected.
pub fn skip_on_real(why: &str) -> bool {
    if real_selected() {
        eprintln!("skipped on the real cluster: {why}");
        return true;
    }
    false
}

/// The shared control plane of this process.
pub struct Shared {
    /// Admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// kube-apiserver's audit log.
    pub audit: AuditLog,
    _cluster: Option<RealCluster>,
}

static SHARED: OnceLock<std::result::Result<Shared, String>> = OnceLock::new();
static SERIAL: Mutex<()> = Mutex::new(());
static SESSIONS: AtomicU64 = AtomicU64::new(0);

/// The shared real cluster: from the environment, or started once per process.
pub fn shared() -> Result<&'static Shared> {
    SHARED
        .get_or_init(|| {
            if let Some(kc) = std::env::var_os("WR_REAL_KUBECONFIG") {
                let audit = std::env::var_os("WR_REAL_AUDIT_LOG")
                    .ok_or("WR_REAL_KUBECONFIG is set but WR_REAL_AUDIT_LOG is not")?;
                return Ok(Shared {
                    kubeconfig: kc.into(),
                    audit: AuditLog::new(PathBuf::from(audit)),
                    _cluster: None,
                });
            }
            let c = RealCluster::start(StartOptions::default()).map_err(|e| format!("{e:#}"))?;
            eprintln!(
                "started a real control plane for this test process in {:.1} s",
                c.start_secs
            );
            Ok(Shared {
                kubeconfig: c.files.kubeconfig.clone(),
                audit: AuditLog::new(c.files.audit_log.clone()),
                _cluster: Some(c),
            })
        })
        .as_ref()
        .map_err(|e| anyhow!("real cluster: {e}"))
}

/// One test's use of the shared cluster: exclusive while it lives.
pub struct RealSession {
    _serial: MutexGuard<'static, ()>,
    /// The shared cluster.
    pub shared: &'static Shared,
    prefix: String,
    mark: Mutex<Mark>,
}

impl RealSession {
    /// Takes this process's turn on the shared cluster (waits for the previous test).
    fn locked() -> Result<RealSession> {
        let shared = shared()?;
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let n = SESSIONS.fetch_add(1, Ordering::SeqCst);
        Ok(RealSession {
            _serial: serial,
            shared,
            prefix: format!("t{}-{n}", std::process::id()),
            mark: Mutex::new(shared.audit.mark_now()?),
        })
    }

    /// Waits for the previous test to finish, then clears what it left.
    pub async fn begin() -> Result<RealSession> {
        let s = Self::locked()?;
        let client = s.client().await?;
        clear(&client).await?;
        s.clear_requests()?;
        Ok(s)
    }

    /// [`Self::begin`] for tests without an async runtime (the `run` tests).
    pub fn begin_blocking() -> Result<RealSession> {
        let s = Self::locked()?;
        on_admin_thread(
            &s.shared.kubeconfig,
            "clearing the real cluster",
            |client| async move { clear(&client).await },
        )?;
        s.clear_requests()?;
        Ok(s)
    }

    /// Creates namespace `ns` (mapped) without an async runtime.
    pub fn create_namespace_blocking(&self, ns: &str) -> Result<()> {
        let ns = self.ns(ns);
        on_admin_thread(
            &self.shared.kubeconfig,
            "creating a namespace",
            |client| async move { create_ns(&client, &ns).await },
        )
        .with_context(|| format!("session {}", self.prefix))
    }

    /// An admin client.
    pub async fn client(&self) -> Result<Client> {
        crate::real_cluster::admin_client(&self.shared.kubeconfig).await
    }

    /// An admin client configuration.
    pub async fn config(&self) -> Result<kube::Config> {
        crate::real_cluster::kube_config(&self.shared.kubeconfig).await
    }

    /// The namespace this test uses for what it calls `name` (a name already
    /// mapped stays as it is, so mapping twice is harmless).
    pub fn ns(&self, name: &str) -> String {
        let own = format!("{}-", self.prefix);
        if name.starts_with(&own) {
            return name.to_string();
        }
        format!("{own}{name}")
    }

    /// Creates (labelled) namespace `ns` (already mapped by [`Self::ns`]).
    pub async fn create_namespace(&self, client: &Client, ns: &str) -> Result<()> {
        create_ns(client, ns).await
    }

    /// Forgets the requests logged so far: those the server received before
    /// now ([`crate::audit::Mark`]), even if their events are written later.
    pub fn clear_requests(&self) -> Result<()> {
        let m = self.shared.audit.mark_now()?;
        *self.mark.lock().unwrap_or_else(|e| e.into_inner()) = m;
        Ok(())
    }

    /// Requests received since the session began (or [`Self::clear_requests`]),
    /// without the control plane's own (kube-controller-manager: the embedded
    /// server's garbage collector is internal and logs nothing either).
    ///
    /// Waits for the log to catch up first ([`Self::fence`]): a test reads it
    /// right after seeing the effect of the requests it counts.
    pub fn requests(&self) -> Result<Vec<RequestRecord>> {
        self.fence()?;
        let m = *self.mark.lock().unwrap_or_else(|e| e.into_inner());
        Ok(self
            .shared
            .audit
            .since_mark(&m)?
            .into_iter()
            .filter(|a| {
                a.user != CONTROLLER_MANAGER_USER
                    && !a.user.starts_with("system:serviceaccount:kube-system:")
                    && !is_fence(&a.record)
            })
            .map(|a| a.record)
            .collect())
    }

    /// Sends a request of its own (a GET of a namespace that does not exist)
    /// and waits until the audit log shows it. The API server writes a
    /// request's event after the request took effect, so a test that saw a
    /// write's effect and reads the log at once could miss the write; the
    /// fence, sent after the test saw the effect, makes the log catch up with
    /// everything that completed before it (short of a request stalled for a
    /// whole round trip between its commit and its audit event).
    fn fence(&self) -> Result<()> {
        let name = format!(
            "{FENCE_PREFIX}{}-{}",
            self.prefix,
            FENCES.fetch_add(1, Ordering::SeqCst)
        );
        let from = self.shared.audit.mark()?;
        let get = name.clone();
        on_admin_thread(
            &self.shared.kubeconfig,
            "the audit fence",
            |client| async move {
                let api: Api<Namespace> = Api::all(client);
                api.get_opt(&get)
                    .await
                    .with_context(|| format!("audit fence: getting namespace {get}"))?;
                Ok(())
            },
        )?;
        let deadline = std::time::Instant::now() + FENCE_WITHIN;
        loop {
            let seen = self.shared.audit.since(from)?.into_iter().any(|a| {
                a.record.resource == "namespaces" && a.record.name.as_deref() == Some(&name)
            });
            if seen {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                return Err(anyhow!(
                    "the audit log did not show request {name} within {FENCE_WITHIN:?}"
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// Names of [`RealSession::fence`]'s namespaces (never created).
const FENCE_PREFIX: &str = "wr-audit-fence-";
/// How long a fence may take to show in the audit log.
const FENCE_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);
static FENCES: AtomicU64 = AtomicU64::new(0);

/// Whether `r` is one of [`RealSession::fence`]'s requests.
fn is_fence(r: &RequestRecord) -> bool {
    r.resource == "namespaces"
        && r.name
            .as_deref()
            .is_some_and(|n| n.starts_with(FENCE_PREFIX))
}

async fn create_ns(client: &Client, ns: &str) -> Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    let obj = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": ns, "labels": {TEST_NS_LABEL: "true"}}}))?;
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating namespace {ns}")),
    }
}

/// Runs `work` with an admin client of the cluster at `kubeconfig` on a
/// thread of its own with a current-thread runtime: callers may be inside
/// another runtime (or none), where blocking on async work would panic.
fn on_admin_thread<F, Fut>(kubeconfig: &std::path::Path, what: &str, work: F) -> Result<()>
where
    F: FnOnce(Client) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<()>>,
{
    let kc = kubeconfig.to_path_buf();
    std::thread::spawn(move || -> Result<()> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async move {
            let client = crate::real_cluster::admin_client(&kc).await?;
            work(client).await
        })
    })
    .join()
    .map_err(|_| anyhow!("{what} panicked"))?
}

/// Removes what earlier tests left: WasmControllers (finalizers dropped, waited
/// for), every custom object (finalizers dropped) and test namespaces.
async fn clear(client: &Client) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut wc_ar = None;
    let mut ars = Vec::new();
    for crd in crds
        .list(&ListParams::default())
        .await
        .context("listing CRDs")?
    {
        let s = &crd.spec;
        // One served version reaches every object of the kind.
        if let Some(v) = s.versions.iter().find(|v| v.served) {
            let ar = ApiResource {
                group: s.group.clone(),
                version: v.name.clone(),
                api_version: format!("{}/{}", s.group, v.name),
                kind: s.names.kind.clone(),
                plural: s.names.plural.clone(),
            };
            if s.names.kind == "WasmController" {
                wc_ar = Some(ar.clone());
            }
            ars.push(ar);
        }
    }
    // WasmControllers first, so no manager of a later test sees an old one.
    if let Some(ar) = &wc_ar {
        delete_all(client, ar).await?;
    }
    for ar in &ars {
        delete_all(client, ar).await?;
    }
    if let Some(ar) = &wc_ar {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
        crate::cluster::eventually("old WasmControllers gone", 30, || {
            let api = api.clone();
            async move {
                api.list(&ListParams::default())
                    .await
                    .ok()?
                    .items
                    .is_empty()
                    .then_some(())
            }
        })
        .await?;
    }
    let nss: Api<Namespace> = Api::all(client.clone());
    let lp = ListParams::default().labels(TEST_NS_LABEL);
    for ns in nss.list(&lp).await.context("listing test namespaces")? {
        if ns.metadata.deletion_timestamp.is_none() {
            let name = ns.metadata.name.unwrap_or_default();
            let _ = nss.delete(&name, &DeleteParams::background()).await;
        }
    }
    Ok(())
}

/// Drops the finalizers of every object of `ar` and deletes it.
async fn delete_all(client: &Client, ar: &ApiResource) -> Result<()> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    let list = match api.list(&ListParams::default()).await {
        Ok(l) => l,
        // A CRD being deleted or not yet served.
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("listing {}", ar.plural)),
    };
    for o in list.items {
        let name = o.metadata.name.clone().unwrap_or_default();
        let api: Api<DynamicObject> = match &o.metadata.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
            None => Api::all_with(client.clone(), ar),
        };
        if o.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| !f.is_empty())
        {
            let _ = api
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                )
                .await;
        }
        let _ = api.delete(&name, &DeleteParams::background()).await;
    }
    Ok(())
}

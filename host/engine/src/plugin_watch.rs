//! Watching the ConfigMaps a controller's plugin comes from — only those.
//!
//! Two narrow watches per referenced ConfigMap, both in its namespace:
//! - `fieldSelector=metadata.name=<name>`: the referenced ConfigMap itself, so a
//!   hand-made ConfigMap without labels works;
//! - `labelSelector=wasm-reconciler.dev/plugin=<name>`: the chunk ConfigMaps
//!   `publish` writes for components larger than one ConfigMap.
//!
//! A field selector cannot be OR-ed with a label selector, hence two watches; a
//! namespace-wide watch would put every ConfigMap of the namespace (often
//! thousands, and Secrets-adjacent data) into the host's memory. Watching and
//! relisting are kube-runtime's `watcher` + `reflector` stores. Every event
//! only *triggers* a re-evaluation (level-triggered): the manager then reads
//! the whole current set from the stores, so an event order in which chunks
//! arrive after their manifest still converges, and a half-updated set is
//! refused by the checksums until it is complete.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};

use crate::chunked::PLUGIN_LABEL;
use crate::crd::ConfigMapSource;
use crate::plugin_source::{self, Fetched, SourceError};

/// How long a read waits for the first list of a new watch.
const SYNC_WAIT: Duration = Duration::from_secs(10);

/// The last evaluation: change counter, pin, result.
type LastRead = (u64, Option<String>, Result<Arc<Fetched>, String>);

/// The watches of one plugin ConfigMap; tasks stop when this is dropped.
pub struct SourceWatch {
    src: ConfigMapSource,
    main: Store<ConfigMap>,
    chunks: Store<ConfigMap>,
    changes: Arc<AtomicU64>,
    last: Mutex<Option<LastRead>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for SourceWatch {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl SourceWatch {
    /// Starts both watches; `on_change` runs after every event (it should only
    /// enqueue work).
    pub fn start(
        client: &kube::Client,
        src: &ConfigMapSource,
        on_change: Arc<dyn Fn() + Send + Sync>,
    ) -> Self {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &src.namespace);
        let changes = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        let mut spawn = |cfg: watcher::Config| {
            let (store, writer) = reflector::store();
            let stream = reflector::reflector(writer, watcher(api.clone(), cfg)).default_backoff();
            let changes = changes.clone();
            let on_change = on_change.clone();
            let ns = src.namespace.clone();
            let name = src.name.clone();
            tasks.push(tokio::spawn(async move {
                let mut stream = std::pin::pin!(stream);
                while let Some(ev) = stream.next().await {
                    match ev {
                        Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
                        Ok(_) => {
                            changes.fetch_add(1, Ordering::SeqCst);
                            on_change();
                        }
                        Err(e) => {
                            tracing::debug!(namespace = %ns, configmap = %name, error = %e, "plugin ConfigMap watch error; retrying");
                        }
                    }
                }
            }));
            store
        };
        let main = spawn(watcher::Config::default().fields(&format!("metadata.name={}", src.name)));
        let chunks =
            spawn(watcher::Config::default().labels(&format!("{PLUGIN_LABEL}={}", src.name)));
        Self {
            src: src.clone(),
            main,
            chunks,
            changes,
            last: Mutex::new(None),
            tasks,
        }
    }

    /// The ConfigMap this watch serves.
    pub fn source(&self) -> &ConfigMapSource {
        &self.src
    }

    /// The component as the stores see it now, decoded and checked against
    /// `pin`. Decoding happens once per change: repeated reads between events
    /// return the remembered result.
    pub async fn read(&self, pin: Option<&str>) -> Result<Arc<Fetched>, SourceError> {
        let not_synced = || SourceError::NotSynced {
            namespace: self.src.namespace.clone(),
            name: self.src.name.clone(),
        };
        for s in [&self.main, &self.chunks] {
            match tokio::time::timeout(SYNC_WAIT, s.wait_until_ready()).await {
                Ok(Ok(())) => {}
                _ => return Err(not_synced()),
            }
        }
        let seen = self.changes.load(Ordering::SeqCst);
        let pin = pin.map(str::to_string);
        if let Some((n, p, r)) = &*self.lock_last()
            && *n == seen
            && *p == pin
            && let Ok(f) = r
        {
            return Ok(f.clone());
        }
        let main = self
            .main
            .state()
            .into_iter()
            .find(|c| c.metadata.name.as_deref() == Some(self.src.name.as_str()));
        let chunks = self.chunks.state();
        let r = plugin_source::from_configmaps(
            &self.src,
            main.as_deref(),
            |n| {
                chunks
                    .iter()
                    .find(|c| c.metadata.name.as_deref() == Some(n))
                    .and_then(|c| plugin_source::chunk_bytes(c))
            },
            pin.as_deref(),
        )
        .map(Arc::new);
        *self.lock_last() = Some((
            seen,
            pin,
            r.as_ref().map(Arc::clone).map_err(|e| e.to_string()),
        ));
        r
    }

    fn lock_last(&self) -> std::sync::MutexGuard<'_, Option<LastRead>> {
        self.last.lock().unwrap_or_else(|e| e.into_inner())
    }
}

//! Shared state of a running server: storage, registry, faults, request log.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::faults::FaultHandle;
use crate::requests::RequestLog;
use crate::resources::{Registry, ResourceDef, def_from_crd};
use crate::store::Store;

/// Tunables fixed at start.
#[derive(Debug, Clone)]
pub struct Options {
    pub bookmark_interval: Duration,
    pub max_body_bytes: usize,
    pub fault_admin: bool,
    pub gc_interval: Duration,
}

pub struct App {
    pub store: Store,
    pub registry: Registry,
    pub faults: FaultHandle,
    pub requests: RequestLog,
    pub opts: Options,
    pub shutdown: CancellationToken,
    pub gc_wake: Notify,
    pub addr: SocketAddr,
    /// Who is asking and may they (issue 20): tokens, RBAC.
    pub auth: crate::auth::Auth,
}

pub const CRD_KEY: &str = "apiextensions.k8s.io/customresourcedefinitions";

impl App {
    /// Side effects of a committed create/update: CRDs (re)register their
    /// resources; anything entering deletion wakes the garbage collector.
    pub fn after_commit(&self, def: &ResourceDef, obj: &Arc<Value>) {
        if def.key() == CRD_KEY
            && let Ok(d) = def_from_crd(obj)
        {
            self.registry.upsert(d);
        }
        if crate::meta::is_deleting(obj) {
            self.gc_wake.notify_one();
        }
    }

    /// Side effects of a removal: CRDs unregister, dependents get collected.
    pub fn after_delete(&self, def: &ResourceDef, obj: &Arc<Value>) {
        if def.key() == CRD_KEY
            && let Ok(d) = def_from_crd(obj)
        {
            self.registry.remove(&d.key());
        }
        self.gc_wake.notify_one();
    }

    pub fn shared(self) -> Arc<App> {
        Arc::new(self)
    }
}

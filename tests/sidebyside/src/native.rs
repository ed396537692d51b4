//! Variant 2 (controller child process): static-site compiled in, as a good
//! kube-runtime operator author would write it.
//!
//! * kube-runtime's `applier` (the engine of `Controller`) over a reflector
//!   of parents, triggered by the parents and by the owners of the three
//!   child kinds (`trigger_self` / `trigger_owners`, exactly what
//!   `Controller::owns` wires up), with reflector stores of the children so
//!   no-op writes are skipped by comparing with the cached child;
//!   `managedFields` are dropped from every cached object (as the host does);
//! * children: server-side apply (`force`) under one field manager, with the
//!   controller owner reference; skipped when the cached child already holds
//!   every desired field (the same subset rule the host uses);
//! * status: the same Ready + plugin conditions with `observedGeneration`
//!   and stable `lastTransitionTime` (the host's `next_status` helper, the
//!   moral equivalent of `meta.SetStatusCondition`), written with a merge
//!   patch on the status subresource only when it changed, with a
//!   resourceVersion precondition;
//! * events: the child changes of one reconcile as one event, and the
//!   plugin's events, through the same deduplicating, aggregating recorder
//!   the host uses (core/v1 Events);
//! * concurrency 16, like the WasmController's `maxConcurrentReconciles`.
//!
//! Reconcile latency is timed around the reconcile function; the logic call
//! around `StaticSite::reconcile`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use futures::{StreamExt, stream::BoxStream};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{self, Action, trigger_owners, trigger_self};
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use wr_engine::events::{EventKind, EventRecorder, Regarding};
use wr_engine::status::{DesiredCondition, StatusUpdate, next_status};
use wr_runtime::{EventType, ReconcileRequest};

use crate::procs::{say, stdin_commands};
use crate::samples::{ChildStats, Samples, set};

/// Field manager of the native controller's writes.
pub const FIELD_MANAGER: &str = "static-site-native";
const CONCURRENCY: u16 = 16;

/// Why one native reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum NativeError {
    /// An API call failed.
    #[error("api: {0}")]
    Api(#[from] kube::Error),
    /// Serialising an object failed.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// The logic said try again later.
    #[error("logic: {0}")]
    Logic(crate::logic::LogicError),
}

struct ChildKind {
    kind: &'static str,
    suffix: &'static str,
    ar: ApiResource,
    store: Store<DynamicObject>,
}

struct Ctx {
    client: kube::Client,
    parent_ar: ApiResource,
    children: Vec<ChildKind>,
    events: EventRecorder,
    samples: Arc<Samples>,
    reconciles: AtomicU64,
}

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(group, version, kind),
        plural,
    )
}

/// The StaticSite resource.
pub fn site_ar() -> ApiResource {
    ar(
        "examples.wasm-reconciler.dev",
        "v1alpha1",
        "StaticSite",
        "staticsites",
    )
}

fn strip(o: &mut DynamicObject) {
    o.metadata.managed_fields = None;
}

fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

fn controlled_by(o: &DynamicObject, uid: &str) -> bool {
    o.metadata.owner_references.as_ref().is_some_and(|rs| {
        rs.iter()
            .any(|r| r.controller == Some(true) && r.uid == uid)
    })
}

async fn reconcile(parent: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, NativeError> {
    ctx.reconciles.fetch_add(1, Ordering::Relaxed);
    let started = Instant::now();
    // One aggregated child-change event per reconcile, as the host writes.
    let uid = parent.metadata.uid.clone().unwrap_or_default();
    ctx.events.begin_batch(&uid);
    let r = reconcile_inner(&parent, &ctx).await;
    ctx.events.end_batch(&uid);
    ctx.samples.add(set::RECONCILE, started.elapsed());
    r
}

async fn reconcile_inner(parent: &DynamicObject, ctx: &Ctx) -> Result<Action, NativeError> {
    // Children caches must be complete before comparing with them.
    for c in &ctx.children {
        let _ = c.store.wait_until_ready().await;
    }
    if parent.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let name = parent.metadata.name.clone().unwrap_or_default();
    let ns = parent.metadata.namespace.clone().unwrap_or_default();
    let uid = parent.metadata.uid.clone().unwrap_or_default();
    let on = Regarding {
        api_version: ctx.parent_ar.api_version.clone(),
        kind: ctx.parent_ar.kind.clone(),
        namespace: Some(ns.clone()),
        name: name.clone(),
        uid: uid.clone(),
    };

    let mut observed = Vec::with_capacity(ctx.children.len());
    for c in &ctx.children {
        let cname = wr_plugin_sdk::child_name(&name, c.suffix);
        if let Some(o) = c
            .store
            .get(&ObjectRef::new_with(&cname, c.ar.clone()).within(&ns))
            && controlled_by(&o, &uid)
        {
            observed.push(serde_json::to_value(&*o)?);
        }
    }
    let req = ReconcileRequest {
        parent: serde_json::to_value(parent)?,
        children: observed,
        related: Vec::new(),
        finalizing: false,
        config: Some(crate::logic::config()),
        now: now_rfc3339(),
    };
    let t = Instant::now();
    let result = crate::logic::reconcile(req);
    ctx.samples.add(set::LOGIC, t.elapsed());
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &ctx.parent_ar);
    let resp = match result {
        Ok(r) => r,
        Err(e) => {
            ctx.events
                .record(&on, EventKind::Warning, &e.reason, &e.message);
            let update = StatusUpdate {
                conditions: vec![DesiredCondition::ready(false, &e.reason, &e.message)],
                replace_conditions: false,
                plugin_status: None,
            };
            write_status(&api, parent, &update).await?;
            return if e.permanent {
                Ok(Action::await_change())
            } else {
                Err(NativeError::Logic(e))
            };
        }
    };

    let owner = json!([{
        "apiVersion": ctx.parent_ar.api_version, "kind": ctx.parent_ar.kind,
        "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true,
    }]);
    for mut desired in resp.children {
        let Some(kind) = ctx
            .children
            .iter()
            .find(|c| desired.get("kind").and_then(Value::as_str) == Some(c.kind))
        else {
            continue;
        };
        let cname = desired
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        desired["metadata"]["ownerReferences"] = owner.clone();
        let cached = kind
            .store
            .get(&ObjectRef::new_with(&cname, kind.ar.clone()).within(&ns));
        if let Some(c) = &cached
            && controlled_by(c, &uid)
            && wr_engine::diff::is_subset(&desired, &serde_json::to_value(&**c)?)
        {
            continue;
        }
        let capi: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &kind.ar);
        capi.patch(
            &cname,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&desired),
        )
        .await?;
        let (reason, verb) = match cached {
            None => ("ChildCreated", "created"),
            Some(_) => ("ChildUpdated", "updated"),
        };
        ctx.events.record(
            &on,
            EventKind::Normal,
            reason,
            &format!("{verb} {} {cname}", kind.kind),
        );
    }

    let mut conditions = vec![DesiredCondition::ready(true, "Reconciled", "")];
    conditions.extend(resp.conditions.iter().map(DesiredCondition::from_plugin));
    let update = StatusUpdate {
        conditions,
        replace_conditions: true,
        plugin_status: resp.status,
    };
    write_status(&api, parent, &update).await?;
    for ev in &resp.events {
        let kind = match ev.type_ {
            EventType::Normal => EventKind::Normal,
            EventType::Warning => EventKind::Warning,
        };
        ctx.events.record(&on, kind, &ev.reason, &ev.message);
    }
    Ok(Action::requeue(Duration::from_secs(3600)))
}

async fn write_status(
    api: &Api<DynamicObject>,
    parent: &DynamicObject,
    update: &StatusUpdate,
) -> Result<(), NativeError> {
    let Some(status) = next_status(
        parent.data.get("status"),
        parent.metadata.generation,
        update,
        wr_engine::status::StatusMode::Merge,
        &now_rfc3339(),
    ) else {
        return Ok(());
    };
    let body = json!({
        "metadata": {"resourceVersion": parent.metadata.resource_version},
        "status": status,
    });
    let name = parent.metadata.name.clone().unwrap_or_default();
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
        .await?;
    Ok(())
}

fn error_policy(_: Arc<DynamicObject>, e: &NativeError, _: Arc<Ctx>) -> Action {
    match e {
        // 409: the cached parent was stale; the watch brings the new one.
        NativeError::Api(kube::Error::Api(s)) if s.code == 409 => {
            Action::requeue(Duration::from_millis(100))
        }
        _ => Action::requeue(Duration::from_secs(1)),
    }
}

type Triggers =
    BoxStream<'static, Result<controller::ReconcileRequest<DynamicObject>, watcher::Error>>;

/// Child entry point: `controller native --api URL`.
pub async fn run(api_url: &str) -> Result<()> {
    let samples = Arc::new(Samples::default());
    let client = crate::client::build(
        api_url,
        crate::reqlog::CONTROLLER_AGENT,
        Some(samples.clone()),
        false,
    )?;
    let parent_ar = site_ar();
    let wc = watcher::Config::default();

    let mut triggers: Vec<Triggers> = Vec::new();
    let mut children = Vec::new();
    for (kind, suffix, car) in [
        (
            "ConfigMap",
            "content",
            ar("", "v1", "ConfigMap", "configmaps"),
        ),
        (
            "Deployment",
            "",
            ar("apps", "v1", "Deployment", "deployments"),
        ),
        ("Service", "", ar("", "v1", "Service", "services")),
    ] {
        let writer = Writer::new(car.clone());
        let store = writer.as_reader();
        let stream = reflector::reflector(
            writer,
            watcher(
                Api::<DynamicObject>::all_with(client.clone(), &car),
                wc.clone(),
            )
            .default_backoff()
            .modify(strip),
        )
        .touched_objects();
        triggers.push(trigger_owners(stream, parent_ar.clone(), car.clone()).boxed());
        children.push(ChildKind {
            kind,
            suffix,
            ar: car,
            store,
        });
    }
    let writer = Writer::new(parent_ar.clone());
    let parents = writer.as_reader();
    let stream = reflector::reflector(
        writer,
        watcher(
            Api::<DynamicObject>::all_with(client.clone(), &parent_ar),
            wc,
        )
        .default_backoff()
        .modify(strip),
    )
    .applied_objects();
    triggers.push(trigger_self(stream, parent_ar.clone()).boxed());
    // `resync` on stdin: every cached parent once (what kube-runtime's
    // `Controller::reconcile_all_on` does for a periodic resync).
    let (resync_tx, resync_rx) = futures::channel::mpsc::unbounded();
    triggers.push(resync_rx.map(Ok).boxed());
    let all_parents = parents.clone();

    let ctx = Arc::new(Ctx {
        events: EventRecorder::new(client.clone(), FIELD_MANAGER.into()),
        client,
        parent_ar,
        children,
        samples: samples.clone(),
        reconciles: AtomicU64::new(0),
    });
    let runner = controller::applier(
        |obj, ctx| Box::pin(reconcile(obj, ctx)),
        error_policy,
        ctx.clone(),
        parents,
        futures::stream::select_all(triggers),
        controller::Config::default().concurrency(CONCURRENCY),
    );
    let task = tokio::spawn(async move {
        runner
            .for_each(|r| async move {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "native reconcile failed");
                }
            })
            .await;
    });
    say("ready")?;
    let mut commands = stdin_commands();
    while let Some(cmd) = commands.recv().await {
        let reconciles = ctx.reconciles.load(Ordering::Relaxed);
        let reply = match cmd.as_str() {
            "count" => ChildStats {
                reconciles,
                ..Default::default()
            },
            "resync" => {
                for p in all_parents.state() {
                    let obj_ref = ObjectRef::from_obj_with(p.as_ref(), ctx.parent_ar.clone());
                    let _ = resync_tx.unbounded_send(controller::ReconcileRequest {
                        obj_ref,
                        reason: controller::ReconcileReason::BulkReconcile,
                    });
                }
                ChildStats {
                    reconciles,
                    ..Default::default()
                }
            }
            _ => ChildStats {
                reconciles,
                samples_ms: samples.drain(),
            },
        };
        say(&serde_json::to_string(&reply)?)?;
    }
    task.abort();
    Ok(())
}

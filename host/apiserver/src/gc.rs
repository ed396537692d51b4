//! Background controllers kube-controller-manager and apiextensions run for
//! objects being deleted: owner-reference garbage collection (background,
//! foreground, orphan), namespace content removal, CRD instance cleanup.
//! Driven by the store's indices (dangling owners, objects with a
//! deletionTimestamp), so a pass costs nothing when nothing is being deleted.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::app::{App, CRD_KEY};
use crate::kinds::CRD_CLEANUP_FINALIZER;
use crate::meta;
use crate::ops::{self, DeleteOpts, Target};
use crate::resources::{ResourceDef, def_from_crd};
use crate::store::{ObjRef, split_key};

const MANAGER: &str = "generic-garbage-collector";

/// Run until shutdown.
pub async fn run(app: Arc<App>) {
    loop {
        tokio::select! {
            _ = app.shutdown.cancelled() => return,
            _ = app.gc_wake.notified() => {}
            _ = tokio::time::sleep(app.opts.gc_interval) => {}
        }
        pass(&app);
    }
}

fn target<'a>(def: &'a Arc<ResourceDef>, namespace: &'a str) -> Target<'a> {
    Target {
        def,
        version: def.versions.first().map(String::as_str).unwrap_or("v1"),
        namespace,
        subresource: None,
        dry_run: false,
        manager: MANAGER,
        decoding: &crate::validation::SYSTEM,
    }
}

fn delete_ref(app: &App, r: &ObjRef, propagation: Option<&str>) {
    let Some(def) = app.registry.by_key(&r.0) else {
        return;
    };
    let (ns, name) = split_key(&r.1);
    let opts = DeleteOpts {
        propagation: propagation.map(str::to_string),
        ..Default::default()
    };
    if let Err(e) = ops::delete(app, &target(&def, ns), name, &opts)
        && e.code != 404
    {
        tracing::warn!(resource = %r.0, key = %r.1, error = %e, "garbage collector delete failed");
    }
}

/// Rewrite an object through the normal update path.
fn rewrite(app: &App, r: &ObjRef, f: impl Fn(&mut Value)) {
    let Some(def) = app.registry.by_key(&r.0) else {
        return;
    };
    let Some(old) = app.store.get(&r.0, &r.1) else {
        return;
    };
    let (ns, name) = split_key(&r.1);
    let mut new = (*old).clone();
    f(&mut new);
    if let Err(e) = ops::write_existing(app, &target(&def, ns), name, &old, new, true, false) {
        tracing::debug!(resource = %r.0, key = %r.1, error = %e, "garbage collector update retried later");
    }
}

fn remove_finalizer(app: &App, r: &ObjRef, finalizer: &str) {
    rewrite(app, r, |o| {
        let mut f = meta::finalizers(o);
        f.retain(|x| x != finalizer);
        meta::set_finalizers(o, &f);
    });
}

fn remove_owner_ref(app: &App, r: &ObjRef, owner_uid: &str) {
    rewrite(app, r, |o| {
        if let Some(refs) = o
            .pointer_mut("/metadata/ownerReferences")
            .and_then(Value::as_array_mut)
        {
            refs.retain(|x| x.get("uid").and_then(Value::as_str) != Some(owner_uid));
            if refs.is_empty()
                && let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut)
            {
                m.remove("ownerReferences");
            }
        }
    });
}

/// One garbage-collection pass: dependents of owners that are gone, then
/// the objects being deleted that wait on the server's own finalizers.
pub fn pass(app: &App) {
    collect_orphans(app);
    for r in app.store.deleting() {
        let Some(obj) = app.store.get(&r.0, &r.1) else {
            continue;
        };
        let fins = meta::finalizers(&obj);
        let uid = meta::uid(&obj).unwrap_or_default().to_string();
        if fins.iter().any(|f| f == "orphan") {
            orphan_dependents(app, &r, &uid);
        } else if fins.iter().any(|f| f == "foregroundDeletion") {
            delete_in_foreground(app, &r, &uid);
        } else if &*r.0 == "/namespaces" {
            empty_namespace(app, &r);
        } else if &*r.0 == CRD_KEY && fins.iter().any(|f| f == CRD_CLEANUP_FINALIZER) {
            delete_custom_resources(app, &r, &obj);
        }
    }
}

/// Dependents whose owners are gone: one that still has a living owner
/// loses the dangling reference, one that has none is deleted.
fn collect_orphans(app: &App) {
    for owner in app.store.dangling_owners() {
        for dep in app.store.dependents_of(&owner) {
            let Some(obj) = app.store.get(&dep.0, &dep.1) else {
                continue;
            };
            let living = obj
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|r| r.get("uid").and_then(Value::as_str))
                .any(|u| app.store.uid_exists(u));
            if living {
                remove_owner_ref(app, &dep, &owner);
            } else if !meta::is_deleting(&obj) {
                delete_ref(app, &dep, None);
            }
        }
    }
}

/// `orphan`: the dependents lose their reference to the owner, then the
/// finalizer goes.
fn orphan_dependents(app: &App, r: &ObjRef, uid: &str) {
    for dep in app.store.dependents_of(uid) {
        remove_owner_ref(app, &dep, uid);
    }
    if app.store.dependents_of(uid).is_empty() {
        remove_finalizer(app, r, "orphan");
    }
}

/// `foregroundDeletion`: the dependents are deleted (in the foreground too);
/// the finalizer goes once none is left.
fn delete_in_foreground(app: &App, r: &ObjRef, uid: &str) {
    let deps = app.store.dependents_of(uid);
    for dep in &deps {
        if app
            .store
            .get(&dep.0, &dep.1)
            .is_some_and(|d| !meta::is_deleting(&d))
        {
            delete_ref(app, dep, Some("Foreground"));
        }
    }
    if deps.is_empty() {
        remove_finalizer(app, r, "foregroundDeletion");
    }
}

/// A Namespace being deleted: its contents are deleted; once it is empty,
/// its `spec.finalizers` are cleared.
fn empty_namespace(app: &App, r: &ObjRef) {
    let (_, ns) = split_key(&r.1);
    let contents = app.store.keys_in_namespace(ns);
    for c in &contents {
        if app
            .store
            .get(&c.0, &c.1)
            .is_some_and(|d| !meta::is_deleting(&d))
        {
            delete_ref(app, c, None);
        }
    }
    if contents.is_empty() {
        rewrite(app, r, |o| {
            if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
                spec.insert("finalizers".into(), json!([]));
            }
        });
    }
}

/// A CRD being deleted: its custom resources are deleted; once none is
/// left (or the CRD does not resolve), its cleanup finalizer goes.
fn delete_custom_resources(app: &App, r: &ObjRef, crd: &Value) {
    let Ok(def) = def_from_crd(crd) else {
        remove_finalizer(app, r, CRD_CLEANUP_FINALIZER);
        return;
    };
    let res = def.key();
    let keys = app.store.keys_of(&res);
    for k in &keys {
        let oref: ObjRef = (Arc::from(res.as_str()), k.clone());
        if app
            .store
            .get(&res, k)
            .is_some_and(|d| !meta::is_deleting(&d))
        {
            delete_ref(app, &oref, None);
        }
    }
    if keys.is_empty() {
        remove_finalizer(app, r, CRD_CLEANUP_FINALIZER);
    }
}

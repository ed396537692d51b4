//! Which WasmController owns a parent resource when several name the same one.
//!
//! Two controllers reconciling the same parents overwrite each other's
//! children and Ready condition (new-user trial, stumble 12). The one that
//! claimed the resource first — oldest `creationTimestamp`, then name — keeps
//! it; every other one is `Ready=False ParentConflict`, runs nothing, and is
//! woken (see [`peers_of`]) when the owner is deleted or changes its parent,
//! so it takes over by itself. Decorators (`spec.decorate`) attach children to
//! objects they do not own and may share a resource; they claim nothing.

use std::sync::Arc;

use kube::api::DynamicObject;

use super::{Inner, set_cond, stop, warn_cond, write_wc_status};
use crate::cache::KindCache;
use crate::crd::{ResourceRef, WasmController, WasmControllerStatus};
use crate::queue::ObjectKey;
use crate::resolve::resolve;

/// Another WasmController owns the parent resource this one names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Conflict {
    /// The owning WasmController's name.
    pub owner: String,
    /// The parent resource, as `plural.group` (`plural` for the core group).
    pub resource: String,
}

impl Conflict {
    /// The Ready condition's message.
    fn message(&self) -> String {
        format!(
            "WasmController {} already reconciles {} (it claimed it first); this one reconciles \
             nothing until that one is deleted or names another parent resource",
            self.owner, self.resource
        )
    }
}

/// The group of an apiVersion (`""` for the core group).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

/// The parent a WasmController claims: `spec.parentResource` of a live one.
fn claimed(wc: &WasmController) -> Option<&ResourceRef> {
    if wc.metadata.deletion_timestamp.is_some() || wc.spec.validate().is_err() {
        return None;
    }
    wc.spec.parent_resource.as_ref()
}

/// Claim order: oldest first, then by name.
fn order(wc: &WasmController) -> (Option<k8s_openapi::jiff::Timestamp>, String) {
    (
        wc.metadata.creation_timestamp.as_ref().map(|t| t.0),
        wc.metadata.name.clone().unwrap_or_default(),
    )
}

/// `plural.group` of a reference, resolved through discovery; as written
/// (`resource` or `kind`, lowercased) when it does not resolve.
pub(super) async fn resource_name(client: &kube::Client, r: &ResourceRef) -> String {
    let (group, name) = match resolve(client, r).await {
        Ok(p) => (p.ar.group, p.ar.plural),
        Err(_) => (
            group_of(&r.api_version).to_string(),
            r.resource
                .clone()
                .or_else(|| r.kind.clone())
                .unwrap_or_default()
                .to_lowercase(),
        ),
    };
    if group.is_empty() {
        name
    } else {
        format!("{name}.{group}")
    }
}

/// The WasmController that owns the parent resource `wc` names, when it is
/// another one. Only same-group WasmControllers that claimed earlier are
/// resolved (usually none).
pub(super) async fn conflict(
    client: &kube::Client,
    cache: &KindCache,
    wc: &WasmController,
) -> Option<Conflict> {
    let mine = claimed(wc)?;
    let group = group_of(&mine.api_version);
    let me = order(wc);
    let mut earlier: Vec<WasmController> = cache
        .keys()
        .iter()
        .filter_map(|k| cache.get_as::<WasmController>(k))
        .filter(|o| order(o) < me)
        .filter(|o| claimed(o).is_some_and(|r| group_of(&r.api_version) == group))
        .collect();
    if earlier.is_empty() {
        return None;
    }
    earlier.sort_by_key(order);
    let resource = resource_name(client, mine).await;
    for o in earlier {
        let Some(r) = claimed(&o) else { continue };
        if resource_name(client, r).await == resource {
            let owner = o.metadata.name.unwrap_or_default();
            return Some(Conflict { owner, resource });
        }
    }
    None
}

/// Stops the controller (releasing the finalizers it put on parents, if it
/// ran) and says `Ready=False ParentConflict` on the WasmController, with a
/// Warning event when that is news.
pub(super) async fn yield_parent(
    inner: &Arc<Inner>,
    wc: &WasmController,
    mut status: WasmControllerStatus,
    c: &Conflict,
) {
    let name = wc.metadata.name.as_deref().unwrap_or("");
    let ran = inner.running.lock().await.contains_key(name);
    stop(inner, name).await;
    if ran
        && crate::admission::writes_wasmcontroller()
        && let Err(e) = super::release_parents(inner, name, &wc.spec).await
    {
        tracing::warn!(controller = %name, owner = %c.owner, error = %e, "releasing parents to their owner failed");
    }
    let generation = wc.metadata.generation;
    warn_cond(
        inner,
        wc,
        &mut status,
        "Ready",
        "ParentConflict",
        &c.message(),
        generation,
    );
    set_cond(
        &mut status,
        "PluginLoaded",
        false,
        "ParentConflict",
        "not loaded: another WasmController owns the parent resource",
        generation,
    );
    let api = kube::Api::all(inner.client.clone());
    write_wc_status(&api, wc, status).await;
}

/// WasmControllers to sync again when `obj` changes: the others naming a
/// parent resource in its group (it may have owned theirs, or now claims it).
pub(super) fn peers_of(cache: &KindCache, obj: &DynamicObject) -> Vec<ObjectKey> {
    let group_in = |o: &DynamicObject| {
        o.data
            .pointer("/spec/parentResource/apiVersion")
            .and_then(|v| v.as_str())
            .map(|v| group_of(v).to_string())
    };
    let Some(group) = group_in(obj) else {
        return Vec::new();
    };
    cache
        .keys()
        .into_iter()
        .filter(|k| Some(k.name.as_str()) != obj.metadata.name.as_deref())
        .filter(|k| cache.get(k).and_then(|o| group_in(&o)).as_deref() == Some(&group))
        .collect()
}

/// `Ready=False` on a running controller whose parent watch fails with 403
/// (the host's RBAC lacks `list`/`watch` on the parent resource): said once
/// on the WasmController with a Warning event, instead of only in the log.
/// Whether it did.
pub(super) fn report_watch_failure(
    inner: &Arc<Inner>,
    wc: &WasmController,
    status: &mut WasmControllerStatus,
) -> bool {
    let Some(parent) = status.parent.clone() else {
        return false;
    };
    let (plural, group) = parent.split_once('.').unwrap_or((parent.as_str(), ""));
    let Some(f) = inner.caches.failing(group, plural) else {
        return false;
    };
    if f.code != 403 {
        return false;
    }
    let message = format!(
        "the host may not {} {parent}: {}; no parent is reconciled until its RBAC role allows list and watch",
        f.verb, f.message
    );
    let generation = wc.metadata.generation;
    warn_cond(
        inner,
        wc,
        status,
        "Ready",
        "Forbidden",
        &message,
        generation,
    );
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_of_an_api_version() {
        assert_eq!(group_of("v1"), "");
        assert_eq!(group_of("apps/v1"), "apps");
        assert_eq!(
            group_of("my-app.example.com/v1alpha1"),
            "my-app.example.com"
        );
    }
}

//! Pods from a controller's pod template, placed on a simulated node.
//!
//! There is no scheduler: the controller that creates a pod names its node
//! (`spec.nodeName`) at creation, choosing the simulated node with the fewest
//! pods among those whose labels match the template's `nodeSelector`. Taints,
//! affinity and resource requests are not considered.

use serde_json::{Map, Value, json};

use crate::pass::Cx;
use crate::world::{self, selects};

/// The controller reference every generated object carries.
pub fn owner_ref(owner: &Value) -> Value {
    json!({
        "apiVersion": world::str_at(owner, "/apiVersion"),
        "kind": world::str_at(owner, "/kind"),
        "name": world::name(owner),
        "uid": world::uid(owner),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// A Pod of `owner` from `template`: its labels and annotations, its spec,
/// the owner's namespace and controller reference. Name it with `name` or,
/// when None, with `generateName: <prefix>`.
pub fn pod(owner: &Value, template: &Value, name: Option<&str>, prefix: &str) -> Value {
    let mut meta = Map::new();
    match name {
        Some(n) => meta.insert("name".into(), json!(n)),
        None => meta.insert("generateName".into(), json!(prefix)),
    };
    meta.insert("namespace".into(), json!(world::namespace(owner)));
    for key in ["labels", "annotations"] {
        if let Some(v) = template.pointer(&format!("/metadata/{key}"))
            && v.as_object().is_some_and(|m| !m.is_empty())
        {
            meta.insert(key.into(), v.clone());
        }
    }
    meta.insert("ownerReferences".into(), json!([owner_ref(owner)]));
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
    })
}

fn node_selected(node: &Value, spec: &Value) -> bool {
    let labels = node.pointer("/metadata/labels");
    match spec.get("nodeSelector").and_then(Value::as_object) {
        None => true,
        Some(sel) => sel
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v)),
    }
}

/// Could a pod with `spec` run on `node` (its nodeSelector matches)?
pub fn fits(node: &Value, spec: &Value) -> bool {
    node_selected(node, spec)
}

/// Put `pod` on the least-loaded fitting, schedulable simulated node. Left
/// unplaced (and so Pending) when none fits.
pub fn place(cx: &mut Cx<'_>, pod: &mut Value) {
    let spec = pod.get("spec").cloned().unwrap_or_default();
    if !world::str_at(&spec, "/nodeName").is_empty() {
        return;
    }
    let load = |cx: &Cx<'_>, node: &str| {
        cx.world
            .pods
            .iter()
            .filter(|p| world::pod_active(p) && world::str_at(p, "/spec/nodeName") == node)
            .count()
            + cx.placed.get(node).copied().unwrap_or(0)
    };
    let best = cx
        .sim_nodes()
        .into_iter()
        .filter(|n| fits(n, &spec) && n.pointer("/spec/unschedulable") != Some(&json!(true)))
        .map(|n| world::name(n).to_string())
        .min_by_key(|n| (load(cx, n), n.clone()));
    if let Some(node) = best {
        *cx.placed.entry(node.clone()).or_default() += 1;
        pod["spec"]["nodeName"] = json!(node);
    }
}

/// Pods of `owner` selected by its selector (active ones and, for Jobs,
/// finished ones too); adoption of orphans is not simulated.
pub fn owned_pods<'a>(cx: &Cx<'a>, owner: &Value) -> Vec<&'a Value> {
    let sel = owner.pointer("/spec/selector");
    world::World::owned(&cx.world.pods, owner)
        .into_iter()
        .filter(|p| world::namespace(p) == world::namespace(owner))
        .filter(|p| selects(sel, p.pointer("/metadata/labels")))
        .collect()
}

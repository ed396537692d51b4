//! The DaemonSet controller: one pod on every simulated node that matches
//! the template's `nodeSelector` (named `<ds>-xxxxx`, pinned to its node by
//! required node affinity on `metadata.name` and the daemon tolerations the
//! real controller adds), rolling updates one `maxUnavailable` batch at a
//! time on a template change, and the status counts of the real controller.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::hash::template_hash;
use crate::pass::Cx;
use crate::template;
use crate::world::{self, i64_at, str_at};
use crate::write::CONTROLLER_MANAGER;

const REVISION_LABEL: &str = "controller-revision-hash";
const GENERATION_LABEL: &str = "pod-template-generation";

/// The tolerations the DaemonSet controller adds to every daemon pod.
fn daemon_tolerations(host_network: bool) -> Vec<Value> {
    let mut t = vec![
        json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}),
        json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}),
        json!({"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}),
    ];
    if host_network {
        t.push(json!({"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"}));
    }
    t
}

fn daemon_pod(ds: &Value, template: &Value, hash: &str, node: &str) -> Value {
    let mut t = template.clone();
    t["metadata"]["labels"][REVISION_LABEL] = json!(hash);
    t["metadata"]["labels"][GENERATION_LABEL] = json!(world::generation(ds).to_string());
    let mut pod = template::pod(ds, &t, None, &format!("{}-", world::name(ds)));
    let spec = &mut pod["spec"];
    spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = json!({
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]
    });
    let host_network = spec.get("hostNetwork") == Some(&json!(true));
    let mut tolerations: Vec<Value> = spec
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for t in daemon_tolerations(host_network) {
        if !tolerations
            .iter()
            .any(|x| x["key"] == t["key"] && x["effect"] == t["effect"])
        {
            tolerations.push(t);
        }
    }
    spec["tolerations"] = json!(tolerations);
    spec["nodeName"] = json!(node);
    pod
}

pub async fn sync(cx: &mut Cx<'_>) {
    let world = cx.world;
    for ds in &world.daemonsets {
        if world::is_deleting(ds) {
            continue;
        }
        let (ns, name) = (world::namespace(ds), world::name(ds));
        let what = format!("DaemonSet {ns}/{name}");
        let template = ds.pointer("/spec/template").cloned().unwrap_or_default();
        let hash = template_hash(&template, i64_at(ds, "/status/collisionCount").unwrap_or(0));
        let spec = template.get("spec").cloned().unwrap_or_default();
        let nodes: Vec<String> = cx
            .sim_nodes()
            .into_iter()
            .filter(|n| template::fits(n, &spec))
            .map(|n| world::name(n).to_string())
            .collect();
        let pods: Vec<&Value> = template::owned_pods(cx, ds)
            .into_iter()
            .filter(|p| world::pod_active(p))
            .collect();
        let min_ready = i64_at(ds, "/spec/minReadySeconds").unwrap_or(0);
        let on = |node: &str| -> Vec<&Value> {
            pods.iter()
                .copied()
                .filter(|p| str_at(p, "/spec/nodeName") == node)
                .collect()
        };
        // Nodes without a daemon pod get one; surplus pods go.
        for node in &nodes {
            let mine = on(node);
            if mine.is_empty() {
                let pod = daemon_pod(ds, &template, &hash, node);
                if let Err(e) = cx.writer.create::<Pod>(ns, pod).await {
                    cx.failed(&what, e);
                }
            }
            for extra in mine.iter().skip(1) {
                if let Err(e) = cx.writer.delete::<Pod>(ns, world::name(extra), false).await {
                    cx.failed(&what, e);
                }
            }
        }
        let misscheduled: Vec<&Value> = pods
            .iter()
            .copied()
            .filter(|p| !nodes.iter().any(|n| n == str_at(p, "/spec/nodeName")))
            .collect();
        for p in &misscheduled {
            if let Err(e) = cx.writer.delete::<Pod>(ns, world::name(p), false).await {
                cx.failed(&what, e);
            }
        }
        let scheduled: Vec<&Value> = pods
            .iter()
            .copied()
            .filter(|p| nodes.iter().any(|n| n == str_at(p, "/spec/nodeName")))
            .collect();
        let updated = |p: &Value| world::label(p, REVISION_LABEL) == Some(hash.as_str());
        let mut due = std::mem::take(&mut cx.due);
        let available = scheduled
            .iter()
            .filter(|p| world::pod_available(p, min_ready, &mut due))
            .count() as i64;
        cx.due = due;
        // Rolling update: replace outdated pods, at most maxUnavailable down at once.
        if str_at(ds, "/spec/updateStrategy/type") != "OnDelete" {
            let desired = nodes.len() as i64;
            let max_unavailable =
                match ds.pointer("/spec/updateStrategy/rollingUpdate/maxUnavailable") {
                    Some(Value::String(s)) => {
                        let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
                        (desired * pct / 100).max(1)
                    }
                    Some(v) => v.as_i64().unwrap_or(1).max(1),
                    None => 1,
                };
            let unavailable = desired - available;
            let budget = (max_unavailable - unavailable).max(0);
            let mut outdated: Vec<&Value> =
                scheduled.iter().copied().filter(|p| !updated(p)).collect();
            outdated.sort_by_key(|p| world::pod_ready(p));
            for p in outdated.iter().filter(|p| !world::pod_ready(p)).chain(
                outdated
                    .iter()
                    .filter(|p| world::pod_ready(p))
                    .take(budget as usize),
            ) {
                if let Err(e) = cx.writer.delete::<Pod>(ns, world::name(p), false).await {
                    cx.failed(&what, e);
                }
            }
        }
        let desired = nodes.len() as i64;
        let ready = scheduled.iter().filter(|p| world::pod_ready(p)).count() as i64;
        let patch = world::status_patch(
            ds,
            vec![
                (
                    "currentNumberScheduled",
                    Value::from(scheduled.len() as i64),
                ),
                ("numberMisscheduled", Value::from(misscheduled.len() as i64)),
                ("desiredNumberScheduled", Value::from(desired)),
                ("numberReady", Value::from(ready)),
                ("observedGeneration", Value::from(world::generation(ds))),
                (
                    "updatedNumberScheduled",
                    world::omit_zero(scheduled.iter().filter(|p| updated(p)).count() as i64),
                ),
                ("numberAvailable", world::omit_zero(available)),
                (
                    "numberUnavailable",
                    world::omit_zero((desired - available).max(0)),
                ),
            ],
        );
        if let Some(patch) = patch
            && let Err(e) = cx
                .writer
                .merge::<DaemonSet>(ns, name, patch, true, CONTROLLER_MANAGER)
                .await
        {
            cx.failed(&what, e);
        }
    }
}

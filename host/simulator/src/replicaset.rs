//! The ReplicaSet controller: as many pods as `spec.replicas` (created with
//! `generateName: <rs>-`, deleted least-useful first), and a status counted
//! from them.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use crate::pass::Cx;
use crate::template;
use crate::world::{self, i64_at, omit_zero, str_at};
use crate::write::CONTROLLER_MANAGER;

/// Which pods go first on scale-down (the controller's `ActivePods` order):
/// unplaced before placed, Pending before Running, not ready before ready,
/// newer before older.
pub fn deletion_rank(pod: &Value) -> (bool, u8, bool, std::cmp::Reverse<String>) {
    let phase = match world::pod_phase(pod) {
        "Pending" | "" => 0,
        "Unknown" => 1,
        _ => 2,
    };
    (
        !str_at(pod, "/spec/nodeName").is_empty(),
        phase,
        world::pod_ready(pod),
        std::cmp::Reverse(world::created(pod).to_string()),
    )
}

/// Counts of a workload's pods, as its status reports them.
pub struct Counts {
    pub replicas: i64,
    pub ready: i64,
    pub available: i64,
    pub terminating: i64,
}

pub fn count(cx: &mut Cx<'_>, pods: &[&Value], min_ready_seconds: i64) -> Counts {
    let active: Vec<&&Value> = pods.iter().filter(|p| world::pod_active(p)).collect();
    Counts {
        replicas: active.len() as i64,
        ready: active.iter().filter(|p| world::pod_ready(p)).count() as i64,
        available: active
            .iter()
            .filter(|p| world::pod_available(p, min_ready_seconds, &mut cx.due))
            .count() as i64,
        terminating: pods
            .iter()
            .filter(|p| {
                world::is_deleting(p) && !matches!(world::pod_phase(p), "Succeeded" | "Failed")
            })
            .count() as i64,
    }
}

pub async fn sync(cx: &mut Cx<'_>) {
    let world = cx.world;
    for rs in &world.replicasets {
        if world::is_deleting(rs) {
            continue;
        }
        let (ns, name) = (world::namespace(rs), world::name(rs));
        let what = format!("ReplicaSet {ns}/{name}");
        let pods = template::owned_pods(cx, rs);
        let want = i64_at(rs, "/spec/replicas").unwrap_or(1);
        let mut active: Vec<&Value> = pods
            .iter()
            .copied()
            .filter(|p| world::pod_active(p))
            .collect();
        let have = active.len() as i64;
        let template = rs.pointer("/spec/template").cloned().unwrap_or_default();
        if have < want {
            for _ in have..want {
                let mut pod = template::pod(rs, &template, None, &format!("{name}-"));
                template::place(cx, &mut pod);
                if let Err(e) = cx.writer.create::<Pod>(ns, pod).await {
                    cx.failed(&what, e);
                    break;
                }
            }
        } else if have > want {
            active.sort_by_key(|p| deletion_rank(p));
            for p in active.iter().take((have - want) as usize) {
                if let Err(e) = cx.writer.delete::<Pod>(ns, world::name(p), false).await {
                    cx.failed(&what, e);
                }
            }
        }
        let min_ready = i64_at(rs, "/spec/minReadySeconds").unwrap_or(0);
        let c = count(cx, &pods, min_ready);
        let template_labels = template.pointer("/metadata/labels");
        let fully_labeled = pods
            .iter()
            .filter(|p| world::pod_active(p))
            .filter(|p| {
                template_labels
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                    .all(|(k, v)| p.pointer("/metadata/labels").and_then(|l| l.get(k)) == Some(v))
            })
            .count() as i64;
        let patch = world::status_patch(
            rs,
            vec![
                ("replicas", Value::from(c.replicas)),
                ("fullyLabeledReplicas", omit_zero(fully_labeled)),
                ("readyReplicas", omit_zero(c.ready)),
                ("availableReplicas", omit_zero(c.available)),
                ("terminatingReplicas", Value::from(c.terminating)),
                ("observedGeneration", Value::from(world::generation(rs))),
            ],
        );
        if let Some(patch) = patch
            && let Err(e) = cx
                .writer
                .merge::<ReplicaSet>(ns, name, patch, true, CONTROLLER_MANAGER)
                .await
        {
            cx.failed(&what, e);
        }
    }
}

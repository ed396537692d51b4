//! The StatefulSet controller: pods `<sts>-<ordinal>` with stable hostnames
//! (`hostname`, `subdomain` = `serviceName`), created in order and each only
//! once the previous one is Running and Ready (`OrderedReady`), or all at
//! once (`Parallel`); scale-down from the highest ordinal; rolling updates
//! from the highest ordinal down to `partition`; the revision labels and
//! status of the real controller. PersistentVolumeClaims of
//! `volumeClaimTemplates` are created (`<claim>-<sts>-<ordinal>`) and
//! referenced by the pods; no volume is provisioned or bound (there is no
//! storage) and the pods run regardless.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use serde_json::{Value, json};

use crate::hash::template_hash;
use crate::pass::Cx;
use crate::template;
use crate::world::{self, i64_at, str_at};
use crate::write::CONTROLLER_MANAGER;

const REVISION_LABEL: &str = "controller-revision-hash";
const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

fn ordinal(sts: &Value, pod: &Value) -> Option<i64> {
    world::name(pod)
        .strip_prefix(world::name(sts))?
        .strip_prefix('-')?
        .parse()
        .ok()
}

fn sts_pod(sts: &Value, template: &Value, revision: &str, ord: i64) -> Value {
    let name = format!("{}-{ord}", world::name(sts));
    let mut t = template.clone();
    t["metadata"]["labels"][REVISION_LABEL] = json!(revision);
    t["metadata"]["labels"][POD_NAME_LABEL] = json!(name);
    t["metadata"]["labels"][POD_INDEX_LABEL] = json!(ord.to_string());
    let mut pod = template::pod(sts, &t, Some(&name), "");
    pod["spec"]["hostname"] = json!(name);
    let service = str_at(sts, "/spec/serviceName");
    if !service.is_empty() {
        pod["spec"]["subdomain"] = json!(service);
    }
    // Each claim template becomes a volume backed by this ordinal's claim.
    let claims = sts
        .pointer("/spec/volumeClaimTemplates")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !claims.is_empty() {
        let mut volumes: Vec<Value> = pod["spec"]["volumes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for c in &claims {
            let cname = world::name(c);
            volumes.retain(|v| v["name"] != cname);
            volumes.push(json!({"name": cname, "persistentVolumeClaim": {
                "claimName": format!("{cname}-{name}")}}));
        }
        pod["spec"]["volumes"] = json!(volumes);
    }
    pod
}

/// Create the ordinal's claims that do not exist yet.
async fn ensure_claims(cx: &mut Cx<'_>, sts: &Value, ord: i64) {
    let ns = world::namespace(sts);
    for c in sts
        .pointer("/spec/volumeClaimTemplates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let mut claim = c.clone();
        let name = format!("{}-{}-{ord}", world::name(c), world::name(sts));
        claim["apiVersion"] = json!("v1");
        claim["kind"] = json!("PersistentVolumeClaim");
        claim["metadata"]["name"] = json!(name);
        claim["metadata"]["namespace"] = json!(ns);
        if let Some(m) = claim["metadata"].as_object_mut() {
            m.remove("creationTimestamp");
        }
        if let Some(m) = claim.as_object_mut() {
            m.remove("status");
        }
        let mut labels = sts
            .pointer("/spec/selector/matchLabels")
            .cloned()
            .unwrap_or_else(|| json!({}));
        if let Some(own) = c.pointer("/metadata/labels").and_then(Value::as_object) {
            for (k, v) in own {
                labels[k] = v.clone();
            }
        }
        claim["metadata"]["labels"] = labels;
        match cx.writer.create::<PersistentVolumeClaim>(ns, claim).await {
            Ok(_) => {}
            Err(e) if e.code() == Some(409) => {}
            Err(e) => cx.failed(&format!("PersistentVolumeClaim {ns}/{name}"), e),
        }
    }
}

pub async fn sync(cx: &mut Cx<'_>) {
    let world = cx.world;
    for sts in &world.statefulsets {
        if world::is_deleting(sts) {
            continue;
        }
        let (ns, name) = (world::namespace(sts), world::name(sts));
        let what = format!("StatefulSet {ns}/{name}");
        let template = sts.pointer("/spec/template").cloned().unwrap_or_default();
        let update_revision = format!(
            "{name}-{}",
            template_hash(
                &template,
                i64_at(sts, "/status/collisionCount").unwrap_or(0)
            )
        );
        let replicas = i64_at(sts, "/spec/replicas").unwrap_or(1);
        let start = i64_at(sts, "/spec/ordinals/start").unwrap_or(0);
        let parallel = str_at(sts, "/spec/podManagementPolicy") == "Parallel";
        let pods: Vec<&Value> = template::owned_pods(cx, sts)
            .into_iter()
            .filter(|p| world::pod_active(p))
            .collect();
        let by_ord = |o: i64| pods.iter().copied().find(|p| ordinal(sts, p) == Some(o));
        let healthy = |p: &Value| world::pod_ready(p);
        let mut acted = false;
        // Create missing ordinals (in order, each after the previous is ready).
        for ord in start..start + replicas {
            match by_ord(ord) {
                Some(p) => {
                    if !parallel && !healthy(p) {
                        acted = true;
                        break;
                    }
                }
                None => {
                    ensure_claims(cx, sts, ord).await;
                    let mut pod = sts_pod(sts, &template, &update_revision, ord);
                    template::place(cx, &mut pod);
                    if let Err(e) = cx.writer.create::<Pod>(ns, pod).await {
                        cx.failed(&what, e);
                    }
                    acted = true;
                    if !parallel {
                        break;
                    }
                }
            }
        }
        // Scale down from the highest ordinal (one at a time when ordered).
        if !acted {
            let mut extra: Vec<&Value> = pods
                .iter()
                .copied()
                .filter(|p| ordinal(sts, p).is_none_or(|o| o < start || o >= start + replicas))
                .collect();
            extra.sort_by_key(|p| std::cmp::Reverse(ordinal(sts, p)));
            let take = if parallel {
                extra.len()
            } else {
                extra.len().min(1)
            };
            for p in extra.iter().take(take) {
                if let Err(e) = cx.writer.delete::<Pod>(ns, world::name(p), false).await {
                    cx.failed(&what, e);
                }
                acted = true;
            }
        }
        // Rolling update: the highest outdated ordinal at or above the
        // partition goes once every pod is ready; it comes back updated.
        if !acted && str_at(sts, "/spec/updateStrategy/type") != "OnDelete" {
            let partition =
                i64_at(sts, "/spec/updateStrategy/rollingUpdate/partition").unwrap_or(0);
            let all_ready = pods.iter().all(|p| healthy(p));
            let outdated = pods
                .iter()
                .copied()
                .filter(|p| world::label(p, REVISION_LABEL) != Some(update_revision.as_str()))
                .filter(|p| ordinal(sts, p).is_some_and(|o| o >= start + partition))
                .max_by_key(|p| ordinal(sts, p));
            if all_ready
                && let Some(p) = outdated
                && let Err(e) = cx.writer.delete::<Pod>(ns, world::name(p), false).await
            {
                cx.failed(&what, e);
            }
        }
        let updated = pods
            .iter()
            .filter(|p| world::label(p, REVISION_LABEL) == Some(update_revision.as_str()))
            .count() as i64;
        let current_revision = if updated == pods.len() as i64 && pods.len() as i64 == replicas {
            update_revision.clone()
        } else {
            sts.pointer("/status/currentRevision")
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty())
                .unwrap_or(&update_revision)
                .to_string()
        };
        let current = pods
            .iter()
            .filter(|p| world::label(p, REVISION_LABEL) == Some(current_revision.as_str()))
            .count() as i64;
        let min_ready = i64_at(sts, "/spec/minReadySeconds").unwrap_or(0);
        let c = crate::replicaset::count(cx, &pods, min_ready);
        let patch = world::status_patch(
            sts,
            vec![
                ("observedGeneration", Value::from(world::generation(sts))),
                ("replicas", Value::from(c.replicas)),
                ("readyReplicas", world::omit_zero(c.ready)),
                ("currentReplicas", world::omit_zero(current)),
                ("updatedReplicas", world::omit_zero(updated)),
                ("availableReplicas", Value::from(c.available)),
                ("currentRevision", json!(current_revision)),
                ("updateRevision", json!(update_revision)),
                (
                    "collisionCount",
                    Value::from(i64_at(sts, "/status/collisionCount").unwrap_or(0)),
                ),
            ],
        );
        if let Some(patch) = patch
            && let Err(e) = cx
                .writer
                .merge::<StatefulSet>(ns, name, patch, true, CONTROLLER_MANAGER)
                .await
        {
            cx.failed(&what, e);
        }
    }
}

//! The Deployment controller: a ReplicaSet per pod template
//! (`<deployment>-<pod-template-hash>`), rollouts by the `RollingUpdate`
//! (maxSurge / maxUnavailable) or `Recreate` strategy, revision
//! annotations, history cleanup, and the status and `Available` /
//! `Progressing` conditions of kube-controller-manager.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use serde_json::{Map, Value, json};

use crate::conditions;
use crate::hash::template_hash;
use crate::pass::Cx;
use crate::template::owner_ref;
use crate::world::{self, World, i64_at, omit_zero, str_at};
use crate::write::CONTROLLER_MANAGER;

const HASH_LABEL: &str = "pod-template-hash";
const REVISION: &str = "deployment.kubernetes.io/revision";
const DESIRED: &str = "deployment.kubernetes.io/desired-replicas";
const MAX: &str = "deployment.kubernetes.io/max-replicas";
/// Deployment annotations not copied to its ReplicaSets.
const NOT_COPIED: [&str; 6] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    "deployment.kubernetes.io/revision-history",
    DESIRED,
    MAX,
    "deprecated.deployment.rollback.to",
];

/// An int-or-percent of `total` (percentages rounded up or down).
fn scaled(v: Option<&Value>, total: i64, round_up: bool) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => {
            let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
            let x = total * pct;
            if round_up { (x + 99) / 100 } else { x / 100 }
        }
        _ => 0,
    }
}

fn rolling(d: &Value) -> bool {
    str_at(d, "/spec/strategy/type") != "Recreate"
}

/// (maxSurge, maxUnavailable) as the controller resolves them.
fn fenceposts(d: &Value, replicas: i64) -> (i64, i64) {
    if !rolling(d) {
        return (0, 0);
    }
    let surge = scaled(
        d.pointer("/spec/strategy/rollingUpdate/maxSurge"),
        replicas,
        true,
    );
    let mut unavailable = scaled(
        d.pointer("/spec/strategy/rollingUpdate/maxUnavailable"),
        replicas,
        false,
    );
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    let unavailable = if replicas == 0 {
        0
    } else {
        unavailable.min(replicas)
    };
    (surge, unavailable)
}

fn spec_replicas(rs: &Value) -> i64 {
    i64_at(rs, "/spec/replicas").unwrap_or(0)
}

fn status_of(rs: &Value, field: &str) -> i64 {
    i64_at(rs, &format!("/status/{field}")).unwrap_or(0)
}

fn revision(rs: &Value) -> i64 {
    world::annotation(rs, REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// The ReplicaSet's template without its hash label: equal to the
/// Deployment's when it is the Deployment's new ReplicaSet.
fn unhashed_template(rs: &Value) -> Value {
    let mut t = rs.pointer("/spec/template").cloned().unwrap_or_default();
    if let Some(l) = t
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        l.remove(HASH_LABEL);
    }
    t
}

fn new_replicaset(
    d: &Value,
    template: &Value,
    hash: &str,
    replicas: i64,
    revision: i64,
    surge: i64,
) -> Value {
    let dname = world::name(d);
    let mut tmpl = template.clone();
    tmpl["metadata"]["labels"][HASH_LABEL] = json!(hash);
    let labels = tmpl["metadata"]["labels"].clone();
    let mut selector = d
        .pointer("/spec/selector")
        .cloned()
        .unwrap_or_else(|| json!({}));
    selector["matchLabels"][HASH_LABEL] = json!(hash);
    let mut annotations: Map<String, Value> = d
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    annotations.retain(|k, _| !NOT_COPIED.contains(&k.as_str()));
    let want = i64_at(d, "/spec/replicas").unwrap_or(1);
    annotations.insert(DESIRED.into(), json!(want.to_string()));
    annotations.insert(MAX.into(), json!((want + surge).to_string()));
    annotations.insert(REVISION.into(), json!(revision.to_string()));
    let mut spec = json!({"replicas": replicas, "selector": selector, "template": tmpl});
    if let Some(m) = d.pointer("/spec/minReadySeconds") {
        spec["minReadySeconds"] = m.clone();
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": format!("{dname}-{hash}"),
            "namespace": world::namespace(d),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_ref(d)],
        },
        "spec": spec,
    })
}

/// Per-pass view of one Deployment's ReplicaSets, with scale changes applied.
struct Sets<'a> {
    new: Option<&'a Value>,
    old: Vec<&'a Value>,
    /// Replicas after this pass's scaling, by RS name.
    scaled: std::collections::HashMap<String, i64>,
}

impl Sets<'_> {
    fn replicas(&self, rs: &Value) -> i64 {
        self.scaled
            .get(world::name(rs))
            .copied()
            .unwrap_or_else(|| spec_replicas(rs))
    }

    fn all(&self) -> impl Iterator<Item = &Value> {
        self.new.into_iter().chain(self.old.iter().copied())
    }
}

async fn scale(
    cx: &mut Cx<'_>,
    sets: &mut Sets<'_>,
    rs: &Value,
    to: i64,
    d: &Value,
    surge: i64,
) -> bool {
    if sets.replicas(rs) == to {
        return false;
    }
    let want = i64_at(d, "/spec/replicas").unwrap_or(1);
    let patch = json!({
        "metadata": {"annotations": {DESIRED: want.to_string(), MAX: (want + surge).to_string()}},
        "spec": {"replicas": to},
    });
    let (ns, name) = (world::namespace(rs), world::name(rs));
    match cx
        .writer
        .merge::<ReplicaSet>(ns, name, patch, false, CONTROLLER_MANAGER)
        .await
    {
        Ok(()) => {
            sets.scaled.insert(name.to_string(), to);
            true
        }
        Err(e) => {
            cx.failed(&format!("ReplicaSet {ns}/{name}"), e);
            false
        }
    }
}

/// One rollout step; true when it changed a ReplicaSet.
async fn rollout(cx: &mut Cx<'_>, d: &Value, sets: &mut Sets<'_>) -> bool {
    let replicas = i64_at(d, "/spec/replicas").unwrap_or(1);
    let (surge, max_unavailable) = fenceposts(d, replicas);
    let mut old: Vec<&Value> = sets.old.clone();
    old.sort_by_key(|rs| (revision(rs), world::created(rs).to_string()));
    if !rolling(d) {
        // Recreate: every old pod gone before the new ReplicaSet scales up.
        let mut changed = false;
        for rs in &old {
            changed |= scale(cx, sets, rs, 0, d, surge).await;
        }
        let old_pods = old.iter().any(|rs| {
            World::owned(&cx.world.pods, rs)
                .iter()
                .any(|p| world::pod_active(p))
        });
        if changed || old_pods {
            return changed;
        }
        if let Some(new) = sets.new {
            return scale(cx, sets, new, replicas, d, surge).await;
        }
        return false;
    }
    let Some(new) = sets.new else {
        return false;
    };
    // Scale the new ReplicaSet up within maxSurge (or down to replicas).
    let new_now = sets.replicas(new);
    if new_now > replicas {
        return scale(cx, sets, new, replicas, d, surge).await;
    }
    if new_now < replicas {
        let total: i64 = sets.all().map(|rs| sets.replicas(rs)).sum();
        let max_total = replicas + surge;
        if total < max_total {
            let to = (new_now + max_total - total).min(replicas);
            if scale(cx, sets, new, to, d, surge).await {
                return true;
            }
        }
    }
    // Scale old ReplicaSets down while keeping replicas - maxUnavailable available.
    let all_pods: i64 = sets.all().map(|rs| sets.replicas(rs)).sum();
    let min_available = replicas - max_unavailable;
    let new_unavailable = sets.replicas(new) - status_of(new, "availableReplicas");
    let max_scaled_down = all_pods - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return false;
    }
    let mut changed = false;
    let mut done = 0;
    // First the unhealthy replicas of old sets ...
    for rs in &old {
        if done >= max_scaled_down {
            break;
        }
        let cur = sets.replicas(rs);
        let unhealthy = cur - status_of(rs, "availableReplicas");
        if cur == 0 || unhealthy <= 0 {
            continue;
        }
        let n = unhealthy.min(max_scaled_down - done);
        changed |= scale(cx, sets, rs, cur - n, d, surge).await;
        done += n;
    }
    // ... then available ones, down to minAvailable.
    let available: i64 = sets
        .all()
        .map(|rs| status_of(rs, "availableReplicas"))
        .sum();
    let mut left = available - min_available;
    for rs in &old {
        if left <= 0 {
            break;
        }
        let cur = sets.replicas(rs);
        if cur == 0 {
            continue;
        }
        let n = cur.min(left);
        changed |= scale(cx, sets, rs, cur - n, d, surge).await;
        left -= n;
    }
    changed
}

/// Delete old, empty ReplicaSets beyond `revisionHistoryLimit`, oldest first.
async fn cleanup(cx: &mut Cx<'_>, d: &Value, sets: &Sets<'_>) {
    let limit = i64_at(d, "/spec/revisionHistoryLimit").unwrap_or(10);
    let mut empty: Vec<&Value> = sets
        .old
        .iter()
        .copied()
        .filter(|rs| sets.replicas(rs) == 0 && status_of(rs, "replicas") == 0)
        .collect();
    if empty.len() as i64 <= limit {
        return;
    }
    empty.sort_by_key(|rs| (revision(rs), world::created(rs).to_string()));
    let extra = empty.len() - limit.max(0) as usize;
    for rs in empty.into_iter().take(extra) {
        let (ns, name) = (world::namespace(rs), world::name(rs));
        if let Err(e) = cx.writer.delete::<ReplicaSet>(ns, name, false).await {
            cx.failed(&format!("ReplicaSet {ns}/{name}"), e);
        }
    }
}

fn status(d: &Value, sets: &Sets<'_>, extra: Option<Value>) -> Vec<(&'static str, Value)> {
    let replicas = i64_at(d, "/spec/replicas").unwrap_or(1);
    let (_, max_unavailable) = fenceposts(d, replicas);
    let sum = |f: &str| -> i64 { sets.all().map(|rs| status_of(rs, f)).sum() };
    let total_spec: i64 = sets.all().map(spec_replicas).sum();
    let actual = sum("replicas");
    let updated = sets.new.map_or(0, |rs| status_of(rs, "replicas"));
    let ready = sum("readyReplicas");
    let available = sum("availableReplicas");
    let terminating = sum("terminatingReplicas");
    let generation = world::generation(d);
    let mut conds = conditions::of(d);
    if let Some(c) = extra {
        conditions::set(&mut conds, c);
    }
    if available >= replicas - max_unavailable {
        conditions::set(
            &mut conds,
            conditions::deployment(
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
            ),
        );
    } else {
        conditions::set(
            &mut conds,
            conditions::deployment(
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
            ),
        );
    }
    let paused = d.pointer("/spec/paused") == Some(&json!(true));
    if paused {
        conditions::set(
            &mut conds,
            conditions::deployment(
                "Progressing",
                "Unknown",
                "DeploymentPaused",
                "Deployment is paused",
            ),
        );
    } else if let Some(new) = sets.new {
        let rs = world::name(new);
        let complete = updated == replicas && actual == replicas && available == replicas;
        let old_status = |f: &str| i64_at(d, &format!("/status/{f}")).unwrap_or(0);
        let progressing = updated > old_status("updatedReplicas")
            || actual - updated < old_status("replicas") - old_status("updatedReplicas")
            || ready > old_status("readyReplicas")
            || available > old_status("availableReplicas");
        if complete {
            conditions::set(
                &mut conds,
                conditions::deployment(
                    "Progressing",
                    "True",
                    "NewReplicaSetAvailable",
                    &format!("ReplicaSet \"{rs}\" has successfully progressed."),
                ),
            );
        } else if progressing {
            conditions::set(
                &mut conds,
                conditions::deployment(
                    "Progressing",
                    "True",
                    "ReplicaSetUpdated",
                    &format!("ReplicaSet \"{rs}\" is progressing."),
                ),
            );
        } else if world::condition(d, "Progressing").is_none() {
            conditions::set(
                &mut conds,
                conditions::deployment(
                    "Progressing",
                    "True",
                    "FoundNewReplicaSet",
                    &format!("Found new replica set \"{rs}\""),
                ),
            );
        }
    }
    let mut fields = vec![
        ("observedGeneration", Value::from(generation)),
        ("replicas", omit_zero(actual)),
        ("updatedReplicas", omit_zero(updated)),
        ("readyReplicas", omit_zero(ready)),
        ("availableReplicas", omit_zero(available)),
        (
            "unavailableReplicas",
            omit_zero((total_spec - available).max(0)),
        ),
        ("terminatingReplicas", Value::from(terminating)),
        ("conditions", Value::from(conds)),
    ];
    if let Some(c) = d.pointer("/status/collisionCount") {
        fields.push(("collisionCount", c.clone()));
    }
    fields
}

pub async fn sync(cx: &mut Cx<'_>) {
    let world = cx.world;
    for d in &world.deployments {
        if world::is_deleting(d) {
            continue;
        }
        let (ns, name) = (world::namespace(d), world::name(d));
        let what = format!("Deployment {ns}/{name}");
        let template = d.pointer("/spec/template").cloned().unwrap_or_default();
        let owned: Vec<&Value> = World::owned(&world.replicasets, d)
            .into_iter()
            .filter(|rs| world::namespace(rs) == ns && !world::is_deleting(rs))
            .collect();
        let (new, old): (Vec<&Value>, Vec<&Value>) = owned
            .iter()
            .partition(|rs| unhashed_template(rs) == template);
        let mut sets = Sets {
            new: new.into_iter().max_by_key(|rs| revision(rs)),
            old,
            scaled: Default::default(),
        };
        let replicas = i64_at(d, "/spec/replicas").unwrap_or(1);
        let (surge, _) = fenceposts(d, replicas);
        let paused = d.pointer("/spec/paused") == Some(&json!(true));
        let mut created = None;
        if sets.new.is_none() && !paused {
            let old_active = sets.old.iter().any(|rs| spec_replicas(rs) > 0);
            if rolling(d) || !old_active {
                let collisions = i64_at(d, "/status/collisionCount").unwrap_or(0);
                let hash = template_hash(&template, collisions);
                let rev = sets.old.iter().map(|rs| revision(rs)).max().unwrap_or(0) + 1;
                let initial = if rolling(d) {
                    let total: i64 = sets.old.iter().map(|rs| spec_replicas(rs)).sum();
                    (replicas + surge - total).clamp(0, replicas)
                } else {
                    replicas
                };
                let body = new_replicaset(d, &template, &hash, initial, rev, surge);
                match cx.writer.create::<ReplicaSet>(ns, body).await {
                    Ok(rs) => {
                        created = Some(world::name(&rs).to_string());
                        let ann = json!({"metadata": {"annotations": {REVISION: rev.to_string()}}});
                        if let Err(e) = cx
                            .writer
                            .merge::<Deployment>(ns, name, ann, false, CONTROLLER_MANAGER)
                            .await
                        {
                            cx.failed(&what, e);
                        }
                    }
                    Err(e) if e.code() == Some(409) => {
                        // A ReplicaSet of that name is not ours: hash again.
                        let patch = json!({"status": {"collisionCount": collisions + 1}});
                        if let Err(e) = cx
                            .writer
                            .merge::<Deployment>(ns, name, patch, true, CONTROLLER_MANAGER)
                            .await
                        {
                            cx.failed(&what, e);
                        }
                        continue;
                    }
                    Err(e) => {
                        cx.failed(&what, e);
                        continue;
                    }
                }
            }
        }
        if !paused && created.is_none() {
            if let Some(new) = sets.new
                && world::annotation(d, REVISION) != world::annotation(new, REVISION)
                && let Some(rev) = world::annotation(new, REVISION)
            {
                let ann = json!({"metadata": {"annotations": {REVISION: rev}}});
                if let Err(e) = cx
                    .writer
                    .merge::<Deployment>(ns, name, ann, false, CONTROLLER_MANAGER)
                    .await
                {
                    cx.failed(&what, e);
                }
            }
            let changed = rollout(cx, d, &mut sets).await;
            if !changed
                && sets
                    .new
                    .is_some_and(|n| status_of(n, "availableReplicas") == replicas)
            {
                cleanup(cx, d, &sets).await;
            }
        }
        let extra = created.map(|rs| {
            conditions::deployment(
                "Progressing",
                "True",
                "NewReplicaSetCreated",
                &format!("Created new replica set \"{rs}\""),
            )
        });
        if let Some(patch) = world::status_patch(d, status(d, &sets, extra))
            && let Err(e) = cx
                .writer
                .merge::<Deployment>(ns, name, patch, true, CONTROLLER_MANAGER)
                .await
        {
            cx.failed(&what, e);
        }
    }
}

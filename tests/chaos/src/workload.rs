//! The workload: a seeded plan of operations (pure, replayable: the plan
//! depends only on the seed, never on how operations turned out) and their
//! execution against the API server with a few retries.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serde_json::{Value, json};

use crate::setup::{HOSTILE_NS, NS, PARENT_KIND, configmap_ar, parent_ar};

/// Keys a parent's spec picks from (each child is `<parent>-<key>`).
pub const KEYS: &[&str] = &["a", "b", "c", "d"];
/// Field manager of the harness's tampering (not the host's).
pub const TAMPER_MANAGER: &str = "chaos-tamper";
/// A label the harness adds to children behind the host's back.
pub const FOREIGN_LABEL: &str = "chaos.wasm-reconciler.dev/foreign";

/// One workload operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Create {
        name: String,
        spec: Value,
    },
    Update {
        name: String,
        spec: Value,
    },
    /// Overwrite `data.value` of a child (a field the plugin sets).
    TamperEdit {
        child: String,
    },
    /// Delete a child.
    TamperDelete {
        child: String,
    },
    /// Add a foreign label to a child.
    TamperLabel {
        child: String,
    },
    Delete {
        name: String,
    },
    /// Change a hostile parent's spec so the hostile controller runs again.
    HostileTouch {
        name: String,
        n: u64,
    },
}

impl Op {
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Create { .. } => "create",
            Op::Update { .. } => "update",
            Op::TamperEdit { .. } => "tamperEdit",
            Op::TamperDelete { .. } => "tamperDelete",
            Op::TamperLabel { .. } => "tamperLabel",
            Op::Delete { .. } => "delete",
            Op::HostileTouch { .. } => "hostileTouch",
        }
    }
}

/// Plans operations from a seed and a model of the parents it has created.
pub struct Planner {
    rng: StdRng,
    target: usize,
    next_id: u64,
    live: BTreeMap<String, Vec<String>>,
    hostile: usize,
    touches: u64,
}

impl Planner {
    /// `target` live parents, `hostile` hostile parents named by [`hostile_name`].
    pub fn new(seed: u64, target: usize, hostile: usize) -> Self {
        Planner {
            rng: StdRng::seed_from_u64(seed ^ 0x05ee_d0fc_4a05),
            target,
            next_id: 0,
            live: BTreeMap::new(),
            hostile,
            touches: 0,
        }
    }

    fn spec(&mut self) -> (Value, Vec<String>) {
        let keys: Vec<String> = KEYS
            .iter()
            .filter(|_| self.rng.random_bool(0.5))
            .map(|k| k.to_string())
            .collect();
        let value = format!("v{}", self.rng.random_range(0..10_000));
        (json!({"keys": keys, "value": value}), keys)
    }

    fn create(&mut self) -> Op {
        self.next_id += 1;
        let name = format!("p{:05}", self.next_id);
        let (spec, keys) = self.spec();
        self.live.insert(name.clone(), keys);
        Op::Create { name, spec }
    }

    fn pick_live(&mut self) -> Option<String> {
        if self.live.is_empty() {
            return None;
        }
        let i = self.rng.random_range(0..self.live.len());
        self.live.keys().nth(i).cloned()
    }

    fn pick_child(&mut self) -> Option<String> {
        let parent = self.pick_live()?;
        let keys = self.live.get(&parent)?.clone();
        if keys.is_empty() {
            return None;
        }
        let k = &keys[self.rng.random_range(0..keys.len())];
        Some(format!("{parent}-{k}"))
    }

    /// The initial creates: `target` parents.
    pub fn initial(&mut self) -> Vec<Op> {
        (0..self.target).map(|_| self.create()).collect()
    }

    /// The next operation of the steady phase.
    pub fn next_op(&mut self) -> Op {
        loop {
            let roll = self.rng.random_range(0..100);
            let op = match roll {
                0..15 if self.live.len() < self.target + self.target / 5 => Some(self.create()),
                15..50 => self.pick_live().map(|name| {
                    let (spec, keys) = self.spec();
                    self.live.insert(name.clone(), keys);
                    Op::Update { name, spec }
                }),
                50..65 => self.pick_child().map(|child| Op::TamperEdit { child }),
                65..73 => self.pick_child().map(|child| Op::TamperDelete { child }),
                73..81 => self.pick_child().map(|child| Op::TamperLabel { child }),
                81..94 if self.live.len() > self.target / 2 => self.pick_live().map(|name| {
                    self.live.remove(&name);
                    Op::Delete { name }
                }),
                94..100 if self.hostile > 0 => {
                    self.touches += 1;
                    let i = self.rng.random_range(0..self.hostile);
                    Some(Op::HostileTouch {
                        name: hostile_name(i),
                        n: self.touches,
                    })
                }
                _ => None,
            };
            if let Some(op) = op {
                return op;
            }
        }
    }

    /// Parents the plan believes live.
    #[cfg(test)]
    pub fn live(&self) -> usize {
        self.live.len()
    }
}

/// Name of hostile parent `i`.
pub fn hostile_name(i: usize) -> String {
    format!("h{i:03}")
}

/// Outcomes of one kind of operation.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcomes {
    pub ok: u64,
    /// The target did not exist (e.g. a child not created yet, or deleted).
    pub not_found: u64,
    /// Still failing after the retries.
    pub failed: u64,
}

/// What happened to one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    NotFound,
    Failed,
}

fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// Runs `op` with up to 4 attempts (faults are on, and the harness is a client
/// like any other). A create that finds its object already there counts as
/// done: an earlier attempt may have been committed and its answer dropped.
pub async fn execute(client: &Client, op: &Op) -> Outcome {
    let parents: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NS, &parent_ar(PARENT_KIND));
    let hostile: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), HOSTILE_NS, &parent_ar("HostileParent"));
    let cms: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &configmap_ar());
    let pp = PatchParams {
        field_manager: Some(TAMPER_MANAGER.into()),
        ..Default::default()
    };
    for attempt in 0..4 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
        }
        let r: Result<(), kube::Error> = match op {
            Op::Create { name, spec } => {
                let obj = parent_object(name, spec);
                match parents.create(&PostParams::default(), &obj).await {
                    Err(e) if code(&e) == Some(409) && attempt > 0 => Ok(()),
                    r => r.map(drop),
                }
            }
            Op::Update { name, spec } => parents
                .patch(name, &pp, &Patch::Merge(json!({"spec": spec})))
                .await
                .map(drop),
            Op::TamperEdit { child } => cms
                .patch(
                    child,
                    &pp,
                    &Patch::Merge(json!({"data": {"value": "tampered"}})),
                )
                .await
                .map(drop),
            Op::TamperDelete { child } => {
                cms.delete(child, &DeleteParams::default()).await.map(drop)
            }
            Op::TamperLabel { child } => cms
                .patch(
                    child,
                    &pp,
                    &Patch::Merge(json!({"metadata": {"labels": {FOREIGN_LABEL: "x"}}})),
                )
                .await
                .map(drop),
            Op::Delete { name } => parents
                .delete(name, &DeleteParams::default())
                .await
                .map(drop),
            Op::HostileTouch { name, n } => hostile
                .patch(name, &pp, &Patch::Merge(json!({"spec": {"n": n}})))
                .await
                .map(drop),
        };
        match r {
            Ok(()) => return Outcome::Ok,
            Err(e) if code(&e) == Some(404) => {
                // A delete whose first attempt was committed but not answered.
                let deleting = matches!(op, Op::Delete { .. } | Op::TamperDelete { .. });
                return if deleting && attempt > 0 {
                    Outcome::Ok
                } else {
                    Outcome::NotFound
                };
            }
            Err(e) => tracing::debug!(op = op.kind(), attempt, error = %e, "operation failed"),
        }
    }
    Outcome::Failed
}

/// A ChaosParent object.
pub fn parent_object(name: &str, spec: &Value) -> DynamicObject {
    let mut obj = DynamicObject::new(name, &parent_ar(PARENT_KIND)).within(NS);
    obj.data = json!({"spec": spec});
    obj
}

/// A HostileParent object.
pub fn hostile_object(name: &str) -> DynamicObject {
    let mut obj = DynamicObject::new(name, &parent_ar("HostileParent")).within(HOSTILE_NS);
    obj.data = json!({"spec": {"n": 0}});
    obj
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(seed: u64) -> Vec<Op> {
        let mut p = Planner::new(seed, 20, 3);
        let mut ops = p.initial();
        ops.extend((0..300).map(|_| p.next_op()));
        ops
    }

    #[test]
    fn the_same_seed_replays_the_same_plan() {
        assert_eq!(plan(7), plan(7));
        assert_ne!(plan(7), plan(8));
    }

    #[test]
    fn the_plan_uses_every_kind_and_keeps_the_population_near_target() {
        let mut p = Planner::new(1, 50, 2);
        let _ = p.initial();
        let mut kinds = std::collections::BTreeSet::new();
        for _ in 0..2000 {
            kinds.insert(p.next_op().kind());
            assert!((25..=60).contains(&p.live()), "{}", p.live());
        }
        assert_eq!(kinds.len(), 7, "{kinds:?}");
    }

    #[test]
    fn children_named_in_tampering_belong_to_planned_parents() {
        for op in plan(3) {
            if let Op::TamperEdit { child }
            | Op::TamperDelete { child }
            | Op::TamperLabel { child } = op
            {
                let (parent, key) = child.rsplit_once('-').unwrap();
                assert!(parent.starts_with('p') && KEYS.contains(&key), "{child}");
            }
        }
    }
}

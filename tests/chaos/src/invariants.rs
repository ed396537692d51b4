//! The end-of-run invariants, checked on objects listed from the API server's
//! store (never from the host). Pure functions over JSON objects, so they are
//! unit-tested on hand-built objects.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use crate::desired::{self, desired_children};

/// ConfigMaps that are nobody's children (none today; kept for real clusters).
const IGNORED_CONFIGMAPS: &[&str] = &["kube-root-ca.crt"];
/// Examples kept per invariant in the report.
const EXAMPLES: usize = 8;

/// Outcome of one invariant.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    pub name: &'static str,
    pub description: &'static str,
    pub checked: usize,
    pub violations: usize,
    pub examples: Vec<String>,
}

impl Check {
    fn new(name: &'static str, description: &'static str) -> Self {
        Check {
            name,
            description,
            checked: 0,
            violations: 0,
            examples: Vec::new(),
        }
    }

    fn fail(&mut self, example: String) {
        self.violations += 1;
        if self.examples.len() < EXAMPLES {
            self.examples.push(example);
        }
    }

    pub fn ok(&self) -> bool {
        self.violations == 0
    }
}

/// "Never two owners" (sharded runs): no parent changed writer without a
/// new shard map and the previous writer's acknowledgement or death
/// ([`wr_tests::shard_log`]), judged on the API server's request log.
pub fn never_two_owners(log: &[wr_apiserver::RequestRecord], group: &str) -> Check {
    let mut c = Check::new(
        "never-two-owners",
        "no parent is written by a second host before a new shard map and the first host's acknowledgement (or death)",
    );
    let h = wr_tests::shard_log::handovers(log, group, |r| {
        wr_tests::shard_log::parent_by_name_prefix(
            r,
            &["chaosparents", "hostileparents", "configmaps"],
        )
    });
    c.checked = h.switches;
    for v in h.violations {
        c.fail(v);
    }
    c
}

/// What the checker needs to know about the run.
pub struct Expect<'a> {
    /// Plugin version the children and status must carry.
    pub version: &'a str,
    /// The host's finalizer on parents.
    pub finalizer: &'a str,
    /// Kind and apiVersion of the parents (for owner references).
    pub parent_kind: &'a str,
}

fn s<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

fn name(v: &Value) -> String {
    s(v, "/metadata/name").unwrap_or("?").to_string()
}

fn controller_owners(v: &Value) -> Vec<&Value> {
    v.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
                .collect()
        })
        .unwrap_or_default()
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("<non-string>").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn has_finalizer(v: &Value, f: &str) -> bool {
    v.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(f)))
}

/// Checks every invariant. `parents`: the healthy controller's parents;
/// `children`: every ConfigMap of the parents' namespace; `all_configmaps`:
/// every ConfigMap in the cluster (for the one-controller check).
pub fn check(
    parents: &[Value],
    children: &[Value],
    all_configmaps: &[Value],
    expect: &Expect<'_>,
) -> Vec<Check> {
    let mut ready = Check::new(
        "parentsReady",
        "every live parent Ready=True with observedGeneration == generation, status from the current plugin version",
    );
    let mut finalizer = Check::new(
        "finalizerOnLiveParents",
        "every live parent carries the host's finalizer",
    );
    let mut stuck = Check::new(
        "noParentStuckDeleting",
        "no parent left with a deletionTimestamp (finalizer released, object gone)",
    );
    let mut lost = Check::new(
        "noLostChildren",
        "every desired child of every live parent exists",
    );
    let mut exact = Check::new(
        "childrenExact",
        "every existing desired child has exactly the desired data, its labels and one controller owner reference to its parent",
    );
    let mut duplicate = Check::new(
        "noDuplicateChildren",
        "no object owned by a live parent beyond its desired children",
    );
    let mut leaked = Check::new(
        "noLeakedChildren",
        "no object owned by a parent that no longer exists (after GC)",
    );
    let mut unowned = Check::new(
        "noUnownedObjects",
        "no randomly named or unowned ConfigMap in the parents' namespace",
    );
    let mut owners = Check::new(
        "singleControllerOwner",
        "no object with more than one controller owner reference",
    );

    let mut live_uid: BTreeMap<String, String> = BTreeMap::new();
    let mut wanted: BTreeMap<String, (String, desired::DesiredChild)> = BTreeMap::new();
    for p in parents {
        let pname = name(p);
        if p.pointer("/metadata/deletionTimestamp").is_some() {
            stuck.checked += 1;
            let fins = p
                .pointer("/metadata/finalizers")
                .map(Value::to_string)
                .unwrap_or_default();
            stuck.fail(format!("{pname}: deleting, finalizers {fins}"));
            continue;
        }
        ready.checked += 1;
        finalizer.checked += 1;
        let uid = s(p, "/metadata/uid").unwrap_or("").to_string();
        live_uid.insert(pname.clone(), uid.clone());
        if !has_finalizer(p, expect.finalizer) {
            finalizer.fail(format!("{pname}: no {}", expect.finalizer));
        }
        let generation = p.pointer("/metadata/generation").and_then(Value::as_i64);
        let cond = p
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|a| {
                a.iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
            });
        let (want_n, want_v) = desired::desired_status(p, expect.version);
        match cond {
            None => ready.fail(format!("{pname}: no Ready condition")),
            Some(c) => {
                let st = c.get("status").and_then(Value::as_str).unwrap_or("");
                let og = c.get("observedGeneration").and_then(Value::as_i64);
                let got_n = p.pointer("/status/children").and_then(Value::as_u64);
                let got_v = s(p, "/status/pluginVersion");
                if st != "True" || og != generation {
                    ready.fail(format!(
                        "{pname}: Ready={st} reason={} observedGeneration={og:?} generation={generation:?}",
                        c.get("reason").and_then(Value::as_str).unwrap_or("")
                    ));
                } else if got_n != Some(want_n) || got_v != Some(want_v.as_str()) {
                    ready.fail(format!(
                        "{pname}: status children={got_n:?} pluginVersion={got_v:?}, want {want_n} {want_v}"
                    ));
                }
            }
        }
        for (cname, child) in desired_children(p, expect.version) {
            wanted.insert(cname, (uid.clone(), child));
        }
    }

    let by_name: BTreeMap<String, &Value> = children.iter().map(|c| (name(c), c)).collect();
    for (cname, (uid, want)) in &wanted {
        lost.checked += 1;
        let Some(got) = by_name.get(cname) else {
            lost.fail(format!("{cname}: missing"));
            continue;
        };
        exact.checked += 1;
        let data = string_map(got.get("data"));
        if data != want.data {
            exact.fail(format!("{cname}: data {data:?}, want {:?}", want.data));
            continue;
        }
        let labels = string_map(got.pointer("/metadata/labels"));
        if let Some((k, v)) = want.labels.iter().find(|(k, v)| labels.get(*k) != Some(v)) {
            exact.fail(format!("{cname}: label {k}={:?}, want {v}", labels.get(k)));
            continue;
        }
        let ctl = controller_owners(got);
        let owned = ctl.len() == 1
            && s(ctl[0], "/uid") == Some(uid.as_str())
            && s(ctl[0], "/kind") == Some(expect.parent_kind);
        if !owned {
            exact.fail(format!(
                "{cname}: controller owners {ctl:?}, want parent uid {uid}"
            ));
        }
    }

    for c in children {
        let cname = name(c);
        if IGNORED_CONFIGMAPS.contains(&cname.as_str()) {
            continue;
        }
        duplicate.checked += 1;
        leaked.checked += 1;
        unowned.checked += 1;
        if wanted.contains_key(&cname) {
            continue;
        }
        let owner = controller_owners(c).first().map(|o| {
            (
                s(o, "/name").unwrap_or("").to_string(),
                s(o, "/uid").unwrap_or("").to_string(),
            )
        });
        match owner {
            Some((o, uid)) if live_uid.get(&o) == Some(&uid) => {
                duplicate.fail(format!("{cname}: owned by live parent {o}, not desired"))
            }
            Some((o, _)) => leaked.fail(format!("{cname}: child of deleted parent {o}")),
            None => unowned.fail(format!("{cname}: owned by no parent")),
        }
    }

    let mut seen = BTreeSet::new();
    for c in all_configmaps.iter().chain(children) {
        let key = format!("{}/{}", s(c, "/metadata/namespace").unwrap_or(""), name(c));
        if !seen.insert(key.clone()) {
            continue;
        }
        owners.checked += 1;
        let n = controller_owners(c).len();
        if n > 1 {
            owners.fail(format!("{key}: {n} controller owners"));
        }
    }
    vec![
        ready, finalizer, stuck, lost, exact, duplicate, leaked, unowned, owners,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FIN: &str = "wasm-reconciler.dev/chaos";

    fn expect() -> Expect<'static> {
        Expect {
            version: "v2",
            finalizer: FIN,
            parent_kind: "ChaosParent",
        }
    }

    fn parent(name: &str, uid: &str, keys: &[&str], gen_: i64, og: i64) -> Value {
        json!({
            "metadata": {"name": name, "uid": uid, "generation": gen_, "finalizers": [FIN]},
            "spec": {"keys": keys, "value": "x"},
            "status": {"children": keys.len(), "pluginVersion": "v2",
                       "conditions": [{"type": "Ready", "status": "True", "observedGeneration": og}]}
        })
    }

    fn child(parent: &str, uid: &str, key: &str) -> Value {
        json!({
            "metadata": {"name": format!("{parent}-{key}"), "namespace": "chaos",
                "labels": {desired::PARENT_LABEL: parent, desired::VERSION_LABEL: "v2", "foreign": "ok"},
                "ownerReferences": [{"kind": "ChaosParent", "name": parent, "uid": uid, "controller": true}]},
            "data": {"key": key, "value": "x", "version": "v2"}
        })
    }

    fn failed(checks: &[Check]) -> Vec<&'static str> {
        checks.iter().filter(|c| !c.ok()).map(|c| c.name).collect()
    }

    #[test]
    fn a_converged_store_passes_every_check() {
        let parents = [
            parent("p1", "u1", &["a", "b"], 3, 3),
            parent("p2", "u2", &[], 1, 1),
        ];
        let kids = [child("p1", "u1", "a"), child("p1", "u1", "b")];
        let checks = check(&parents, &kids, &[], &expect());
        assert!(failed(&checks).is_empty(), "{checks:#?}");
        assert_eq!(
            checks
                .iter()
                .find(|c| c.name == "childrenExact")
                .unwrap()
                .checked,
            2
        );
        assert_eq!(
            checks
                .iter()
                .find(|c| c.name == "noLeakedChildren")
                .unwrap()
                .checked,
            2
        );
    }

    #[test]
    fn each_kind_of_damage_is_caught_by_its_check() {
        let parents = [
            parent("p1", "u1", &["a", "b"], 3, 2), // stale observedGeneration
            json!({"metadata": {"name": "gone", "uid": "u9", "deletionTimestamp": "t", "finalizers": [FIN]}}),
        ];
        let mut tampered = child("p1", "u1", "a");
        tampered["data"]["value"] = json!("tampered");
        let mut two_owners = child("p1", "u1", "zz");
        two_owners["metadata"]["ownerReferences"]
            .as_array_mut()
            .unwrap()
            .push(json!({"kind": "Other", "name": "o", "uid": "o", "controller": true}));
        let mut random = child("p1", "u1", "x");
        random["metadata"]["name"] = json!("random-7f3k");
        random["metadata"]["ownerReferences"] = json!([]);
        let kids = [tampered, child("gone", "u9", "a"), two_owners, random];
        let checks = check(&parents, &kids, &[], &expect());
        assert_eq!(
            failed(&checks),
            [
                "parentsReady",
                "noParentStuckDeleting",
                "noLostChildren",
                "childrenExact",
                "noDuplicateChildren",
                "noLeakedChildren",
                "noUnownedObjects",
                "singleControllerOwner"
            ]
        );
        for c in &checks {
            assert!(c.violations <= 1, "one damage each: {c:?}");
        }
    }

    #[test]
    fn old_plugin_version_and_missing_finalizer_fail() {
        let mut p = parent("p1", "u1", &["a"], 1, 1);
        p["status"]["pluginVersion"] = json!("v1");
        p["metadata"]["finalizers"] = json!([]);
        let mut k = child("p1", "u1", "a");
        k["data"]["version"] = json!("v1");
        let checks = check(&[p], &[k], &[], &expect());
        assert_eq!(
            failed(&checks),
            ["parentsReady", "finalizerOnLiveParents", "childrenExact"]
        );
    }
}

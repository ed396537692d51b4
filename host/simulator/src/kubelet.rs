//! The kubelet of every simulated node: a pod placed there is reported
//! `Pending` (scheduled, containers being created) at once, `Running` with
//! every container ready after the configured delay, and — for a Job's
//! pods — `Succeeded` (every container exited 0) after as long again. No
//! image is pulled, no process runs, no probe is called, no network exists:
//! the pod IP is an address of the node's pod CIDR that nothing answers.
//! A pod without a node is reported unschedulable, as the scheduler would.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::nodes;
use crate::pass::Cx;
use crate::world::{self, str_at};
use crate::write::KUBELET;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    New,
    Pending,
    Running,
    Succeeded,
}

fn stage_of(pod: &Value) -> Stage {
    match world::pod_phase(pod) {
        "Succeeded" | "Failed" => Stage::Succeeded,
        "Running" => Stage::Running,
        "Pending" if !str_at(pod, "/status/hostIP").is_empty() => Stage::Pending,
        _ => Stage::New,
    }
}

/// A Job's pods run to completion; every other pod runs until deleted.
fn runs_to_completion(pod: &Value) -> bool {
    pod.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|r| r["controller"] == true && r["kind"] == "Job")
}

fn names(pod: &Value, list: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = pod
        .pointer(&format!("/spec/{list}"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            (
                str_at(c, "/name").to_string(),
                str_at(c, "/image").to_string(),
            )
        })
        .collect();
    // The kubelet reports container statuses sorted by name.
    v.sort();
    v
}

fn container_id() -> String {
    format!(
        "containerd://{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Keep the ID and start time a container already has.
fn existing<'a>(pod: &'a Value, list: &str, name: &str) -> Option<&'a Value> {
    pod.pointer(&format!("/status/{list}"))?
        .as_array()?
        .iter()
        .find(|c| c["name"] == name)
}

fn container_status(
    pod: &Value,
    list: &str,
    name: &str,
    image: &str,
    stage: Stage,
    init: bool,
    now: &str,
) -> Value {
    let prev = existing(pod, list, name);
    let id = prev
        .and_then(|c| c["containerID"].as_str())
        .map(str::to_string)
        .unwrap_or_else(container_id);
    let started_at = prev
        .and_then(|c| c.pointer("/state/running/startedAt"))
        .and_then(Value::as_str)
        .unwrap_or(now)
        .to_string();
    let base = json!({"name": name, "image": image, "imageID": "", "restartCount": 0});
    let mut s = base;
    let terminated = init && stage >= Stage::Running || stage == Stage::Succeeded;
    if stage == Stage::Pending {
        let reason = if init {
            "PodInitializing"
        } else {
            "ContainerCreating"
        };
        s["state"] = json!({"waiting": {"reason": reason}});
        s["ready"] = json!(false);
        s["started"] = json!(false);
    } else if terminated {
        s["state"] = json!({"terminated": {"exitCode": 0, "reason": "Completed",
            "startedAt": started_at, "finishedAt": now, "containerID": id}});
        s["containerID"] = json!(id);
        s["ready"] = json!(false);
        s["started"] = json!(false);
    } else {
        s["state"] = json!({"running": {"startedAt": started_at}});
        s["containerID"] = json!(id);
        s["ready"] = json!(true);
        s["started"] = json!(true);
    }
    s["lastState"] = json!({});
    s
}

/// Guaranteed, Burstable or BestEffort, from the containers' resources.
fn qos_class(pod: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|l| pod.pointer(&format!("/spec/{l}")).and_then(Value::as_array))
        .flatten()
        .collect();
    let has = |c: &Value, k: &str| {
        c.pointer(&format!("/resources/{k}"))
            .and_then(Value::as_object)
            .is_some_and(|m| !m.is_empty())
    };
    if containers
        .iter()
        .all(|c| !has(c, "requests") && !has(c, "limits"))
    {
        return "BestEffort";
    }
    let guaranteed = containers.iter().all(|c| {
        ["cpu", "memory"].iter().all(|r| {
            let limit = c.pointer(&format!("/resources/limits/{r}"));
            let request = c.pointer(&format!("/resources/requests/{r}")).or(limit);
            limit.is_some() && request == limit
        })
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn conditions(
    pod: &Value,
    stage: Stage,
    init_names: &[String],
    names: &[String],
    now: &str,
) -> Value {
    let generation = world::generation(pod);
    let old = world::condition;
    let cond = |ty: &str, status: bool, reason: Option<&str>, message: Option<String>| {
        let status = if status { "True" } else { "False" };
        let since = old(pod, ty)
            .filter(|c| c["status"] == status)
            .and_then(|c| c["lastTransitionTime"].as_str())
            .unwrap_or(now);
        let mut c = json!({"type": ty, "observedGeneration": generation, "status": status,
                           "lastProbeTime": null, "lastTransitionTime": since});
        if let Some(r) = reason {
            c["reason"] = json!(r);
        }
        if let Some(m) = message {
            c["message"] = json!(m);
        }
        c
    };
    let running = stage == Stage::Running;
    let unready = format!("containers with unready status: [{}]", names.join(" "));
    let (ready_reason, ready_msg) = match stage {
        Stage::Running => (None, None),
        Stage::Succeeded => (Some("PodCompleted"), None),
        _ => (Some("ContainersNotReady"), Some(unready)),
    };
    let initialized = stage != Stage::Pending || init_names.is_empty();
    json!([
        cond("PodReadyToStartContainers", running, None, None),
        if initialized {
            cond("Initialized", true, None, None)
        } else {
            cond(
                "Initialized",
                false,
                Some("ContainersNotInitialized"),
                Some(format!(
                    "containers with incomplete status: [{}]",
                    init_names.join(" ")
                )),
            )
        },
        cond("Ready", running, ready_reason, ready_msg.clone()),
        cond("ContainersReady", running, ready_reason, ready_msg),
        cond("PodScheduled", true, None, None),
    ])
}

/// A free address of the node's pod CIDR (10.244.X.2 and up).
fn allocate_ip(cx: &mut Cx<'_>, node: &Value) -> String {
    let Some(x) = nodes::cidr_index(node) else {
        return nodes::internal_ip(node);
    };
    let name = world::name(node).to_string();
    let prefix = format!("10.244.{x}.");
    let used: Vec<u32> = cx
        .world
        .pods
        .iter()
        .filter_map(|p| {
            str_at(p, "/status/podIP")
                .strip_prefix(&prefix)?
                .parse()
                .ok()
        })
        .collect();
    let next = cx.state.next_ip.entry(name).or_insert(2);
    while used.contains(next) {
        *next += 1;
    }
    let host = *next;
    *next = if *next >= 254 { 2 } else { *next + 1 };
    format!("{prefix}{host}")
}

fn status(cx: &mut Cx<'_>, pod: &Value, node: &Value, stage: Stage) -> Value {
    let now = crate::conditions::now();
    let host_ip = nodes::internal_ip(node);
    let init: Vec<(String, String)> = names(pod, "initContainers");
    let main: Vec<(String, String)> = names(pod, "containers");
    let init_names: Vec<String> = init.iter().map(|(n, _)| n.clone()).collect();
    let main_names: Vec<String> = main.iter().map(|(n, _)| n.clone()).collect();
    let phase = match stage {
        Stage::Running => "Running",
        Stage::Succeeded => "Succeeded",
        _ => "Pending",
    };
    let mut s = json!({
        "observedGeneration": world::generation(pod),
        "phase": phase,
        "conditions": conditions(pod, stage, &init_names, &main_names, &now),
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": pod.pointer("/status/startTime").cloned().unwrap_or_else(|| json!(now)),
        "qosClass": qos_class(pod),
        "containerStatuses": main.iter()
            .map(|(n, i)| container_status(pod, "containerStatuses", n, i, stage, false, &now))
            .collect::<Vec<_>>(),
    });
    if !init.is_empty() {
        s["initContainerStatuses"] = init
            .iter()
            .map(|(n, i)| container_status(pod, "initContainerStatuses", n, i, stage, true, &now))
            .collect();
    }
    if stage >= Stage::Running {
        let ip = match str_at(pod, "/status/podIP") {
            "" if pod.pointer("/spec/hostNetwork") == Some(&json!(true)) => host_ip.clone(),
            "" => allocate_ip(cx, node),
            ip => ip.to_string(),
        };
        s["podIP"] = json!(ip);
        s["podIPs"] = json!([{"ip": ip}]);
    }
    s
}

/// Made by one of the simulated controllers.
fn ours(pod: &Value) -> bool {
    pod.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|r| {
            r["controller"] == true
                && matches!(
                    r["kind"].as_str(),
                    Some("ReplicaSet" | "StatefulSet" | "DaemonSet" | "Job")
                )
        })
}

fn can_place(cx: &Cx<'_>, pod: &Value) -> bool {
    let spec = pod.get("spec").cloned().unwrap_or_default();
    cx.sim_nodes().iter().any(|n| {
        crate::template::fits(n, &spec) && n.pointer("/spec/unschedulable") != Some(&json!(true))
    })
}

pub async fn sync(cx: &mut Cx<'_>) {
    let nodes: HashMap<String, Value> = cx
        .sim_nodes()
        .into_iter()
        .map(|n| (world::name(n).to_string(), n.clone()))
        .collect();
    let delay = cx.config.delay;
    let world = cx.world;
    for pod in &world.pods {
        let (ns, name) = (world::namespace(pod), world::name(pod));
        let what = format!("Pod {ns}/{name}");
        let node_name = str_at(pod, "/spec/nodeName");
        if node_name.is_empty() {
            if world::is_deleting(pod) {
                continue;
            }
            // A controller's pod made before a node fitted it: the API does
            // not let a node be named later (there is no binding here), so
            // it is deleted and its controller makes a placed one.
            if ours(pod) && can_place(cx, pod) {
                if let Err(e) = cx.writer.delete::<Pod>(ns, name, false).await {
                    cx.failed(&what, e);
                }
                continue;
            }
            if world::condition(pod, "PodScheduled").is_none() {
                let message = format!(
                    "0/{} nodes are available: no simulated node matches the pod's node selector, or the pod was not created by a simulated controller (the dev cluster has no scheduler; set spec.nodeName to a simulated node).",
                    nodes.len()
                );
                let patch = json!({"status": {"phase": "Pending", "conditions": [{
                    "type": "PodScheduled", "status": "False", "lastProbeTime": null,
                    "lastTransitionTime": crate::conditions::now(),
                    "reason": "Unschedulable", "message": message}]}});
                if let Err(e) = cx
                    .writer
                    .merge::<Pod>(ns, name, patch, true, "kube-scheduler")
                    .await
                {
                    cx.failed(&what, e);
                }
            }
            continue;
        }
        let Some(node) = nodes.get(node_name) else {
            continue;
        };
        if world::is_deleting(pod) {
            // Graceful deletion: the kubelet confirms the containers are gone.
            let finalizers = pod
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array);
            if finalizers.is_none_or(Vec::is_empty)
                && let Err(e) = cx.writer.delete::<Pod>(ns, name, true).await
            {
                cx.failed(&what, e);
            }
            continue;
        }
        let current = stage_of(pod);
        if current == Stage::Succeeded {
            continue;
        }
        let first = *cx
            .state
            .first_seen
            .entry(world::uid(pod).to_string())
            .or_insert_with(Instant::now);
        let elapsed = first.elapsed();
        let completes = runs_to_completion(pod);
        let desired = if elapsed < delay {
            cx.due.at(first + delay);
            Stage::Pending
        } else if completes && elapsed < delay * 2 {
            cx.due.at(first + delay * 2);
            Stage::Running
        } else if completes {
            Stage::Succeeded
        } else {
            Stage::Running
        };
        if desired <= current {
            continue;
        }
        let patch = json!({"status": status(cx, pod, node, desired)});
        if let Err(e) = cx.writer.merge::<Pod>(ns, name, patch, true, KUBELET).await {
            cx.failed(&what, e);
        }
    }
}

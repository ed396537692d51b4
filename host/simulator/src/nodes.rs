//! Simulated Nodes: the simulator creates `Config::nodes` of them at start
//! (`sim-node-1` …), and gives every Node labelled
//! [`SIMULATED_NODE_LABEL`](crate::SIMULATED_NODE_LABEL)`=true` (its own or
//! one you create) what node-ipam and the kubelet would: a pod CIDR, a
//! `Ready` status, addresses, capacity and node info.

use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

use crate::SIMULATED_NODE_LABEL;
use crate::pass::Cx;
use crate::world::{self, str_at};
use crate::write::KUBELET;

pub fn is_simulated(node: &Value) -> bool {
    world::label(node, SIMULATED_NODE_LABEL) == Some("true")
}

/// The node's index in 10.244.X.0/24 (its pod CIDR), when it has one.
pub fn cidr_index(node: &Value) -> Option<u32> {
    let cidr = str_at(node, "/spec/podCIDR");
    let rest = cidr.strip_prefix("10.244.")?;
    rest.split('.').next()?.parse().ok()
}

/// The node's InternalIP (and the hostIP of its pods).
pub fn internal_ip(node: &Value) -> String {
    node.pointer("/status/addresses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|a| a["type"] == "InternalIP")
        .and_then(|a| a["address"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| format!("172.18.0.{}", cidr_index(node).unwrap_or(0) + 2))
}

fn new_node(name: &str, index: u32) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                SIMULATED_NODE_LABEL: "true",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {
            "podCIDR": format!("10.244.{index}.0/24"),
            "podCIDRs": [format!("10.244.{index}.0/24")],
        },
    })
}

fn node_status(node: &Value) -> Value {
    let now = crate::conditions::now();
    let cond = |ty: &str, status: &str, reason: &str, message: &str| {
        json!({"type": ty, "status": status, "lastHeartbeatTime": now, "lastTransitionTime": now,
               "reason": reason, "message": message})
    };
    let capacity = json!({"cpu": "4", "ephemeral-storage": "100Gi", "hugepages-2Mi": "0",
                          "memory": "16Gi", "pods": "110"});
    let uid = world::uid(node).replace('-', "");
    json!({
        "capacity": capacity,
        "allocatable": capacity,
        "conditions": [
            cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ],
        "addresses": [
            {"type": "InternalIP", "address": format!("172.18.0.{}", cidr_index(node).unwrap_or(0) + 2)},
            {"type": "Hostname", "address": world::name(node)},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": uid,
            "systemUUID": world::uid(node),
            "bootID": world::uid(node),
            "kernelVersion": "6.8.0-simulated",
            "osImage": "wasm-reconciler simulated node",
            "containerRuntimeVersion": "simulated://0",
            "kubeletVersion": "v1.37.2",
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    })
}

/// Create the configured nodes (first pass only), then give every
/// simulated node a pod CIDR and a Ready status when it lacks them.
/// True when it created nodes (the pass starts over to see them).
pub async fn sync(cx: &mut Cx<'_>) -> bool {
    let mut created = false;
    if !cx.state.nodes_created {
        cx.state.nodes_created = true;
        for i in 1..=cx.config.nodes {
            let name = format!("sim-node-{i}");
            if cx.world.nodes.iter().any(|n| world::name(n) == name) {
                continue;
            }
            let index = u32::try_from(i).unwrap_or(u32::MAX);
            match cx.writer.create::<Node>("", new_node(&name, index)).await {
                Ok(_) => created = true,
                Err(e) => {
                    cx.failed(&name, e);
                    cx.state.nodes_created = false;
                }
            }
        }
        if created {
            return true;
        }
    }
    let nodes: Vec<Value> = cx.sim_nodes().into_iter().cloned().collect();
    let mut used: Vec<u32> = cx.world.nodes.iter().filter_map(cidr_index).collect();
    for node in &nodes {
        let name = world::name(node).to_string();
        if cidr_index(node).is_none() && str_at(node, "/spec/podCIDR").is_empty() {
            // What node-ipam does: the first free /24.
            let index = (1..).find(|i| !used.contains(i)).unwrap_or(0);
            used.push(index);
            let cidr = format!("10.244.{index}.0/24");
            let patch = json!({"spec": {"podCIDR": cidr, "podCIDRs": [cidr]}});
            if let Err(e) = cx
                .writer
                .merge::<Node>("", &name, patch, false, crate::write::CONTROLLER_MANAGER)
                .await
            {
                cx.failed(&name, e);
            }
            continue;
        }
        if world::condition(node, "Ready").is_none() {
            let patch = json!({"status": node_status(node)});
            if let Err(e) = cx
                .writer
                .merge::<Node>("", &name, patch, true, KUBELET)
                .await
            {
                cx.failed(&name, e);
            }
        }
    }
    false
}

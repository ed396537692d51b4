//! The simulator at the wire: a `kube::Client` against the embedded API
//! server with the simulator on, as `dev` runs it. Each test starts its own
//! server and simulator (short delay, two simulated nodes).

use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

struct Cluster {
    server: wr_apiserver::RunningServer,
    sim: wr_simulator::Simulator,
    client: Client,
}

impl Cluster {
    async fn start(nodes: usize) -> Result<Cluster> {
        // RUST_LOG=wr_simulator=debug shows the simulator's writes.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let server = wr_apiserver::start(wr_apiserver::Config::default()).await?;
        let yaml = wr_apiserver::kubeconfig::kubeconfig_yaml_with_token(
            &server.url(),
            Some(&server.admin_token()),
        );
        let kc = kube::config::Kubeconfig::from_yaml(&yaml)?;
        let config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await?;
        let client = Client::try_from(config)?;
        let sim = wr_simulator::spawn(
            client.clone(),
            wr_simulator::Config {
                delay: Duration::from_millis(150),
                nodes,
            },
        );
        Ok(Cluster {
            server,
            sim,
            client,
        })
    }

    async fn stop(self) {
        self.sim.stop().await;
        self.server.shutdown().await;
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), "default")
    }

    async fn create<K>(&self, body: Value) -> Result<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + serde::Serialize,
    {
        let obj: K = serde_json::from_value(body)?;
        Ok(self.api::<K>().create(&PostParams::default(), &obj).await?)
    }

    async fn get(&self, kind: &str, name: &str) -> Result<Value> {
        Ok(match kind {
            "Deployment" => serde_json::to_value(self.api::<Deployment>().get(name).await?)?,
            "StatefulSet" => serde_json::to_value(self.api::<StatefulSet>().get(name).await?)?,
            "DaemonSet" => serde_json::to_value(self.api::<DaemonSet>().get(name).await?)?,
            "Job" => serde_json::to_value(self.api::<Job>().get(name).await?)?,
            _ => bail!("unknown kind {kind}"),
        })
    }

    async fn pods(&self, selector: &str) -> Result<Vec<Value>> {
        let list = self
            .api::<Pod>()
            .list(&ListParams::default().labels(selector))
            .await?;
        Ok(list
            .items
            .iter()
            .map(|p| serde_json::to_value(p).unwrap_or_default())
            .collect())
    }

    async fn replicasets(&self) -> Result<Vec<Value>> {
        let list = self
            .api::<ReplicaSet>()
            .list(&ListParams::default())
            .await?;
        Ok(list
            .items
            .iter()
            .map(|p| serde_json::to_value(p).unwrap_or_default())
            .collect())
    }
}

/// Poll `f` (every 100 ms, up to 30 s) until it yields Some.
async fn eventually<T, F, Fut>(what: &str, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut last = None;
    loop {
        match f().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last = Some(e),
        }
        if tokio::time::Instant::now() > deadline {
            bail!("timed out waiting for {what} (last error: {last:?})");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn int(v: &Value, ptr: &str) -> i64 {
    v.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

fn cond<'a>(v: &'a Value, ty: &str) -> Option<&'a Value> {
    v.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == ty)
}

fn deployment(name: &str, replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": image}]},
            },
        },
    })
}

/// The Deployment once its status reports `replicas` available for its
/// current generation.
async fn rolled_out(c: &Cluster, name: &str, replicas: i64) -> Result<Value> {
    eventually(
        &format!("Deployment {name} with {replicas} available"),
        || async {
            let d = c.get("Deployment", name).await?;
            let done = int(&d, "/status/observedGeneration") == int(&d, "/metadata/generation")
                && int(&d, "/status/availableReplicas") == replicas
                && int(&d, "/status/updatedReplicas") == replicas
                && int(&d, "/status/replicas") == replicas
                && cond(&d, "Progressing").is_some_and(|p| p["reason"] == "NewReplicaSetAvailable");
            Ok(done.then_some(d))
        },
    )
    .await
}

#[tokio::test]
async fn a_deployment_becomes_available_with_running_pods() -> Result<()> {
    let c = Cluster::start(2).await?;
    c.create::<Deployment>(deployment("web", 3, "nginx:1.27"))
        .await?;
    let d = rolled_out(&c, "web", 3).await?;
    assert_eq!(int(&d, "/status/readyReplicas"), 3, "{d:#}");
    let available = cond(&d, "Available").context("Available condition")?;
    assert_eq!(available["status"], "True");
    assert_eq!(available["reason"], "MinimumReplicasAvailable");
    assert_eq!(available["message"], "Deployment has minimum availability.");
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "1"
    );

    // One ReplicaSet, named by its pod-template-hash, controlled by the Deployment.
    let rss = c.replicasets().await?;
    assert_eq!(rss.len(), 1, "{rss:#?}");
    let rs = &rss[0];
    let hash = rs["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .context("pod-template-hash label")?;
    assert_eq!(rs["metadata"]["name"], format!("web-{hash}"));
    assert_eq!(
        rs["spec"]["selector"]["matchLabels"]["pod-template-hash"],
        hash
    );
    assert_eq!(
        rs["metadata"]["ownerReferences"][0]["uid"],
        d["metadata"]["uid"]
    );
    assert_eq!(rs["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(int(rs, "/status/availableReplicas"), 3);

    // Its pods run on the simulated nodes, ready, with an IP.
    let pods = c.pods("app=web").await?;
    assert_eq!(pods.len(), 3);
    for p in &pods {
        assert_eq!(p["status"]["phase"], "Running", "{p:#}");
        assert_eq!(
            p["metadata"]["ownerReferences"][0]["uid"],
            rs["metadata"]["uid"]
        );
        assert_eq!(p["metadata"]["labels"]["pod-template-hash"], hash);
        assert!(
            p["spec"]["nodeName"]
                .as_str()
                .is_some_and(|n| n.starts_with("sim-node-"))
        );
        assert!(
            p["status"]["podIP"]
                .as_str()
                .is_some_and(|ip| ip.starts_with("10.244."))
        );
        assert_eq!(p["status"]["containerStatuses"][0]["ready"], true);
        assert_eq!(
            cond(p, "Ready").map(|c| c["status"].clone()),
            Some(json!("True"))
        );
    }
    let ips: std::collections::BTreeSet<&str> = pods
        .iter()
        .filter_map(|p| p["status"]["podIP"].as_str())
        .collect();
    assert_eq!(ips.len(), 3, "pod IPs are distinct: {ips:?}");
    c.stop().await;
    Ok(())
}

#[tokio::test]
async fn a_template_change_rolls_out_a_new_replicaset_and_scales_the_old_one_down() -> Result<()> {
    let c = Cluster::start(2).await?;
    c.create::<Deployment>(deployment("app", 4, "nginx:1.27"))
        .await?;
    rolled_out(&c, "app", 4).await?;
    let first = c.replicasets().await?[0]["metadata"]["name"].clone();

    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.28"}]}}}});
    c.api::<Deployment>()
        .patch("app", &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    let d = rolled_out(&c, "app", 4).await?;
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "2"
    );
    let rss = c.replicasets().await?;
    assert_eq!(rss.len(), 2, "old ReplicaSet kept as history: {rss:#?}");
    let old = rss
        .iter()
        .find(|r| r["metadata"]["name"] == first)
        .context("old RS")?;
    let new = rss
        .iter()
        .find(|r| r["metadata"]["name"] != first)
        .context("new RS")?;
    assert_eq!(int(old, "/spec/replicas"), 0);
    assert_eq!(int(new, "/spec/replicas"), 4);
    assert_eq!(
        new["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "2"
    );
    let pods = eventually("only new pods left", || async {
        let pods = c.pods("app=app").await?;
        Ok((pods.len() == 4).then_some(pods))
    })
    .await?;
    for p in &pods {
        assert_eq!(p["spec"]["containers"][0]["image"], "nginx:1.28");
    }
    c.stop().await;
    Ok(())
}

#[tokio::test]
async fn scaling_to_zero_removes_every_pod() -> Result<()> {
    let c = Cluster::start(1).await?;
    c.create::<Deployment>(deployment("gone", 2, "nginx:1.27"))
        .await?;
    rolled_out(&c, "gone", 2).await?;
    let patch = json!({"spec": {"replicas": 0}});
    c.api::<Deployment>()
        .patch("gone", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let d = eventually("Deployment scaled to 0", || async {
        let d = c.get("Deployment", "gone").await?;
        let done = int(&d, "/status/observedGeneration") == int(&d, "/metadata/generation")
            && d["status"].get("replicas").is_none()
            && c.pods("app=gone").await?.is_empty();
        Ok(done.then_some(d))
    })
    .await?;
    assert_eq!(
        cond(&d, "Available").map(|a| a["status"].clone()),
        Some(json!("True"))
    );
    assert_eq!(int(&c.replicasets().await?[0], "/spec/replicas"), 0);
    c.stop().await;
    Ok(())
}

#[tokio::test]
async fn deleting_a_deployment_collects_its_replicasets_and_pods() -> Result<()> {
    let c = Cluster::start(1).await?;
    c.create::<Deployment>(deployment("doomed", 2, "nginx:1.27"))
        .await?;
    rolled_out(&c, "doomed", 2).await?;
    assert_eq!(c.pods("app=doomed").await?.len(), 2);
    c.api::<Deployment>()
        .delete("doomed", &DeleteParams::default())
        .await?;
    eventually("ReplicaSets and pods collected", || async {
        let gone = c.replicasets().await?.is_empty() && c.pods("app=doomed").await?.is_empty();
        Ok(gone.then_some(()))
    })
    .await?;
    // And the simulator does not bring them back.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(c.pods("app=doomed").await?.is_empty());
    c.stop().await;
    Ok(())
}

#[tokio::test]
async fn simulated_nodes_are_ready() -> Result<()> {
    let c = Cluster::start(3).await?;
    let nodes: Api<Node> = Api::all(c.client.clone());
    let list = eventually("three Ready nodes", || async {
        let list = nodes.list(&ListParams::default()).await?;
        let ready = list
            .items
            .iter()
            .filter_map(|n| serde_json::to_value(n).ok())
            .filter(|n| cond(n, "Ready").is_some_and(|r| r["status"] == "True"))
            .count();
        Ok((ready == 3).then_some(list))
    })
    .await?;
    let names: Vec<String> = list
        .items
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    assert_eq!(names, ["sim-node-1", "sim-node-2", "sim-node-3"]);
    c.stop().await;
    Ok(())
}

#[tokio::test]
async fn a_job_runs_its_pods_to_completion() -> Result<()> {
    let c = Cluster::start(2).await?;
    c.create::<Job>(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "batch", "namespace": "default"},
        "spec": {
            "completions": 3, "parallelism": 2,
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "work", "image": "busybox:1.36"}]}},
        },
    }))
    .await?;
    // Never more than `parallelism` pods at once.
    let most = std::sync::atomic::AtomicUsize::new(0);
    let job = eventually("Job batch Complete", || {
        let (c, most) = (&c, &most);
        async move {
            let active = c
                .pods("job-name=batch")
                .await?
                .iter()
                .filter(|p| p["status"]["phase"] != "Succeeded")
                .count();
            most.fetch_max(active, std::sync::atomic::Ordering::SeqCst);
            let j = c.get("Job", "batch").await?;
            Ok(cond(&j, "Complete")
                .is_some_and(|c| c["status"] == "True")
                .then_some(j))
        }
    })
    .await?;
    let most = most.into_inner();
    assert!(most <= 2, "{most} pods ran at once with parallelism 2");
    assert_eq!(int(&job, "/status/succeeded"), 3, "{job:#}");
    assert!(job["status"].get("active").is_none(), "{job:#}");
    assert!(job["status"]["startTime"].is_string());
    assert!(job["status"]["completionTime"].is_string());
    let met = cond(&job, "SuccessCriteriaMet").context("SuccessCriteriaMet")?;
    assert_eq!(met["reason"], "CompletionsReached");
    let pods = c.pods("job-name=batch").await?;
    assert_eq!(pods.len(), 3);
    for p in &pods {
        assert_eq!(p["status"]["phase"], "Succeeded", "{p:#}");
        assert_eq!(
            p["status"]["containerStatuses"][0]["state"]["terminated"]["reason"],
            "Completed"
        );
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "Job");
    }
    c.stop().await;
    Ok(())
}

#[tokio::test]
async fn an_indexed_job_completes_every_index() -> Result<()> {
    let c = Cluster::start(1).await?;
    c.create::<Job>(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "idx", "namespace": "default"},
        "spec": {
            "completions": 3, "parallelism": 3, "completionMode": "Indexed",
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "work", "image": "busybox:1.36"}]}},
        },
    }))
    .await?;
    let job = eventually("Job idx Complete", || async {
        let j = c.get("Job", "idx").await?;
        Ok(cond(&j, "Complete")
            .is_some_and(|c| c["status"] == "True")
            .then_some(j))
    })
    .await?;
    assert_eq!(job["status"]["completedIndexes"], "0-2", "{job:#}");
    let mut idx: Vec<String> = c
        .pods("job-name=idx")
        .await?
        .iter()
        .filter_map(|p| {
            p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    idx.sort();
    assert_eq!(idx, ["0", "1", "2"]);
    c.stop().await;
    Ok(())
}

#[tokio::test]
async fn a_daemonset_covers_every_node_including_one_added_later() -> Result<()> {
    let c = Cluster::start(2).await?;
    c.create::<DaemonSet>(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "agent", "image": "busybox:1.36"}]}},
        },
    }))
    .await?;
    let covered = |n: i64| {
        let c = &c;
        async move {
            let ds = c.get("DaemonSet", "agent").await?;
            let done = int(&ds, "/status/desiredNumberScheduled") == n
                && int(&ds, "/status/numberReady") == n
                && int(&ds, "/status/numberAvailable") == n
                && int(&ds, "/status/updatedNumberScheduled") == n
                && int(&ds, "/status/observedGeneration") == int(&ds, "/metadata/generation");
            Ok(done.then_some(ds))
        }
    };
    eventually("DaemonSet on both nodes", || covered(2)).await?;
    let nodes_of = |pods: &[Value]| {
        let mut n: Vec<String> = pods
            .iter()
            .filter_map(|p| p["spec"]["nodeName"].as_str().map(str::to_string))
            .collect();
        n.sort();
        n
    };
    assert_eq!(
        nodes_of(&c.pods("app=agent").await?),
        ["sim-node-1", "sim-node-2"]
    );

    // A Node created with the simulated label joins; the DaemonSet follows.
    let nodes: Api<Node> = Api::all(c.client.clone());
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "extra", "labels": {wr_simulator::SIMULATED_NODE_LABEL: "true"}},
    }))?;
    nodes.create(&PostParams::default(), &node).await?;
    eventually("DaemonSet on three nodes", || covered(3)).await?;
    let pods = c.pods("app=agent").await?;
    assert_eq!(nodes_of(&pods), ["extra", "sim-node-1", "sim-node-2"]);
    for p in &pods {
        assert_eq!(p["status"]["phase"], "Running");
        let term = &p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"][0]["matchFields"][0];
        assert_eq!(term["values"][0], p["spec"]["nodeName"], "{p:#}");
    }
    c.stop().await;
    Ok(())
}

#[tokio::test]
async fn a_statefulset_creates_ordered_pods_and_rolls_them() -> Result<()> {
    let c = Cluster::start(2).await?;
    c.create::<StatefulSet>(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {
            "replicas": 3, "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "db", "image": "postgres:17"}]}},
        },
    }))
    .await?;
    let ready = |image: &'static str| {
        let c = &c;
        async move {
            let s = c.get("StatefulSet", "db").await?;
            let pods = c.pods("app=db").await?;
            let done = int(&s, "/status/readyReplicas") == 3
                && int(&s, "/status/updatedReplicas") == 3
                && s["status"]["currentRevision"] == s["status"]["updateRevision"]
                && pods
                    .iter()
                    .all(|p| p["spec"]["containers"][0]["image"] == image);
            Ok(done.then_some((s, pods)))
        }
    };
    let (s, pods) = eventually("StatefulSet db ready", || ready("postgres:17")).await?;
    let mut names: Vec<&str> = pods
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str())
        .collect();
    names.sort();
    assert_eq!(names, ["db-0", "db-1", "db-2"]);
    let rev = s["status"]["updateRevision"]
        .as_str()
        .context("updateRevision")?;
    for p in &pods {
        assert_eq!(p["metadata"]["labels"]["controller-revision-hash"], rev);
        assert_eq!(p["spec"]["hostname"], p["metadata"]["name"]);
        assert_eq!(p["spec"]["subdomain"], "db");
    }
    // Ordered: each pod was created after the previous one was ready.
    let created = |n: &str| {
        pods.iter()
            .find(|p| p["metadata"]["name"] == n)
            .and_then(|p| p["metadata"]["creationTimestamp"].as_str())
            .map(str::to_string)
    };
    assert!(created("db-0") <= created("db-1") && created("db-1") <= created("db-2"));

    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "db", "image": "postgres:18"}]}}}});
    c.api::<StatefulSet>()
        .patch("db", &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    let (s2, _) = eventually("StatefulSet db rolled", || ready("postgres:18")).await?;
    assert_ne!(
        s2["status"]["updateRevision"],
        s["status"]["updateRevision"]
    );
    c.stop().await;
    Ok(())
}

/// Level-triggered controllers must converge: once every workload has its
/// final status, a further pass writes nothing (a field written but never
/// read back the same would make the simulator write forever).
#[tokio::test]
async fn once_converged_the_simulator_writes_nothing() -> Result<()> {
    let c = Cluster::start(2).await?;
    c.create::<Deployment>(deployment("steady", 2, "nginx:1.27"))
        .await?;
    c.create::<StatefulSet>(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "kv", "namespace": "default"},
        "spec": {"replicas": 2, "serviceName": "kv", "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "kv"}},
            "template": {"metadata": {"labels": {"app": "kv"}},
                "spec": {"containers": [{"name": "kv", "image": "redis:7"}]}}},
    }))
    .await?;
    c.create::<DaemonSet>(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "logs", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "logs"}},
            "template": {"metadata": {"labels": {"app": "logs"}},
                "spec": {"containers": [{"name": "logs", "image": "busybox:1.36"}]}}},
    }))
    .await?;
    c.create::<Job>(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "once", "namespace": "default"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "once", "image": "busybox:1.36"}]}}},
    }))
    .await?;
    rolled_out(&c, "steady", 2).await?;
    eventually("everything converged", || async {
        let s = c.get("StatefulSet", "kv").await?;
        let d = c.get("DaemonSet", "logs").await?;
        let j = c.get("Job", "once").await?;
        let done = int(&s, "/status/readyReplicas") == 2
            && int(&d, "/status/numberAvailable") == 2
            && cond(&j, "Complete").is_some();
        Ok(done.then_some(()))
    })
    .await?;
    // Let the last status writes land, then watch for writes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    c.server.clear_requests();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writes: Vec<String> = c
        .server
        .requests()
        .iter()
        .filter(|r| r.is_write())
        .map(|r| format!("{} {}/{:?} {:?}", r.verb, r.resource, r.subresource, r.name))
        .collect();
    assert!(writes.is_empty(), "writes after convergence: {writes:#?}");
    c.stop().await;
    Ok(())
}

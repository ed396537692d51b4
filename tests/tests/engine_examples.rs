//! The example plugins (real WebAssembly components) driven by the real engine
//! against the embedded API server: the happy path for each.

use anyhow::Result;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};
use wr_tests::cluster::*;

fn init_tracing() {
    wr_tests::logs::init();
}

fn example(path: &str) -> Result<Value> {
    let p = wr_tests::plugins::workspace_root()
        .join("examples")
        .join(path);
    Ok(serde_yaml::from_str(&std::fs::read_to_string(p)?)?)
}

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(group, version, kind),
        plural,
    )
}

/// The example WasmController, pointed at the locally built component.
async fn controller_from_example(env: &Env, file: &str, plugin: &str) -> Result<()> {
    let mut wc = example(file)?;
    let path = wr_tests::plugins::plugin_path(plugin);
    wc["spec"]["plugin"] = json!({"path": path.display().to_string(), "config": wc["spec"]["plugin"]["config"].clone()});
    env.create_controller(wc).await
}

async fn ready_for_generation(api: &Api<DynamicObject>, name: &str) -> Result<DynamicObject> {
    eventually("Ready=True for the current generation", 30, || async {
        let o = api.get(name).await.ok()?;
        let (s, _, g) = ready_of(&o)?;
        (s == "True" && g == o.metadata.generation).then_some(o)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_site_happy_path() -> Result<()> {
    init_tracing();
    let mut env = Env::start_with_wasm().await?;
    install_crd(&env.client, example("static-site/crd.yaml")?).await?;
    controller_from_example(&env, "static-site/controller.yaml", "static-site").await?;
    env.start_manager();

    let sites: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        &env.ns("default"),
        &ar(
            "examples.wasm-reconciler.dev",
            "v1alpha1",
            "StaticSite",
            "staticsites",
        ),
    );
    let deployments: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        &env.ns("default"),
        &ar("apps", "v1", "Deployment", "deployments"),
    );
    let services: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        &env.ns("default"),
        &ar("", "v1", "Service", "services"),
    );
    let cms = env.configmaps("default");

    let mut site: DynamicObject = serde_json::from_value(example("static-site/site.yaml")?)?;
    site.metadata.namespace = Some(env.ns("default"));
    sites.create(&PostParams::default(), &site).await?;
    let s = ready_for_generation(&sites, "web").await?;
    let uid = s.metadata.uid.clone().unwrap_or_default();
    for child in [
        deployments.get("web").await?,
        services.get("web").await?,
        cms.get("web-content").await?,
    ] {
        let r = &child.metadata.owner_references.clone().unwrap_or_default()[0];
        assert_eq!(
            (r.uid.as_str(), r.controller, r.block_owner_deletion),
            (uid.as_str(), Some(true), Some(true))
        );
    }
    assert_eq!(s.data["status"]["replicas"], 2);

    // Spec change: children updated, generation tracked.
    sites
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await?;
    let s2 = ready_for_generation(&sites, "web").await?;
    assert_eq!(s2.metadata.generation, Some(2));
    eventually("deployment scaled", 10, || async {
        (deployments.get("web").await.ok()?.data["spec"]["replicas"] == 3).then_some(())
    })
    .await?;

    // Child deleted by hand: recreated.
    cms.delete("web-content", &DeleteParams::default()).await?;
    eventually("configmap recreated", 10, || async {
        cms.get_opt("web-content").await.ok()?.map(|_| ())
    })
    .await?;

    // Child edited by hand on a field the plugin sets: restored.
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 9}})),
        )
        .await?;
    eventually("replicas restored", 10, || async {
        (deployments.get("web").await.ok()?.data["spec"]["replicas"] == 3).then_some(())
    })
    .await?;

    // Converged: a burst of annotation touches writes no child.
    env.server.clear_requests();
    for i in 0..20 {
        sites
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"touch": i.to_string()}}})),
            )
            .await?;
    }
    // Barrier, not a sleep: a spec change after the touches. The parent's
    // passes run one at a time in the order of its changes, so once the
    // Deployment shows it, every pass the touches triggered has finished,
    // and the only child write is the one the spec change asks for.
    sites
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await?;
    ready_for_generation(&sites, "web").await?;
    eventually("deployment scaled after the touches", 10, || async {
        (deployments.get("web").await.ok()?.data["spec"]["replicas"] == 4).then_some(())
    })
    .await?;
    let deployment_writes = env.writes("deployments", None);
    assert_eq!(
        deployment_writes.len(),
        1,
        "only the scale-up: {deployment_writes:?}"
    );
    for res in ["services", "configmaps"] {
        assert!(
            env.writes(res, None).is_empty(),
            "{res} written: {:?}",
            env.writes(res, None)
        );
    }

    // Parent deleted: children garbage-collected. On a real cluster that is
    // kube-controller-manager's garbage collector, which watches a kind of
    // owner only after its next discovery resync (every 30 s) once the CRD is
    // new, so this can take a minute there.
    sites.delete("web", &DeleteParams::default()).await?;
    eventually("children collected", 120, || async {
        let d = deployments
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .len();
        let c = cms
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .iter()
            .filter(|c| c.metadata.name.as_deref() == Some("web-content"))
            .count();
        (d == 0 && c == 0).then_some(())
    })
    .await?;
    env.stop_manager().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tombstone_finalizes_in_order() -> Result<()> {
    init_tracing();
    let mut env = Env::start_with_wasm().await?;
    install_crd(&env.client, example("tombstone/crd.yaml")?).await?;
    controller_from_example(&env, "tombstone/controller.yaml", "tombstone").await?;
    env.start_manager();
    let ws: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        &env.ns("default"),
        &ar(
            "examples.wasm-reconciler.dev",
            "v1alpha1",
            "Workspace",
            "workspaces",
        ),
    );
    let cms = env.configmaps("default");
    let mut w: DynamicObject = serde_json::from_value(example("tombstone/workspace.yaml")?)?;
    w.metadata.namespace = Some(env.ns("default"));
    ws.create(&PostParams::default(), &w).await?;
    let w = ready_for_generation(&ws, "team-a").await?;
    assert!(
        w.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"wasm-reconciler.dev/tombstone".to_string())
    );
    assert!(cms.get_opt("team-a-data").await?.is_some());
    assert!(cms.get_opt("team-a-tombstone").await?.is_some());

    env.server.clear_requests();
    ws.delete("team-a", &DeleteParams::default()).await?;
    eventually("workspace gone", 20, || async {
        ws.get_opt("team-a").await.ok()?.is_none().then_some(())
    })
    .await?;
    let deletes: Vec<String> = env
        .writes("configmaps", None)
        .into_iter()
        .filter(|r| r.verb == "delete" && r.code < 300)
        .filter_map(|r| r.name)
        .collect();
    assert_eq!(
        deletes,
        ["team-a-data", "team-a-tombstone"],
        "ordered teardown"
    );
    env.stop_manager().await;
    Ok(())
}

/// `examples/namespace-defaults` (decorator mode) with its real component: a
/// `team-defaults` ConfigMap in each Namespace labelled `team`, owned by the
/// Namespace, gone when the label goes; the Namespaces are never written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_defaults_decorates_labelled_namespaces() -> Result<()> {
    init_tracing();
    let mut env = Env::start_with_wasm().await?;
    if env.server.is_real() {
        // Labels cluster-scoped Namespaces with fixed names.
        eprintln!("skipped on the real control plane: uses fixed cluster-wide namespace names");
        return Ok(());
    }
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(env.client.clone());
    for (name, labels) in [("shop", json!({"team": "web"})), ("infra", json!({}))] {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": name, "labels": labels}});
        nss.create(&PostParams::default(), &serde_json::from_value(ns)?)
            .await?;
    }
    controller_from_example(
        &env,
        "namespace-defaults/controller.yaml",
        "namespace-defaults",
    )
    .await?;
    env.start_manager();
    let shop = env.configmaps("shop");
    let cm = eventually("team-defaults in shop", 30, || async {
        shop.get_opt("team-defaults").await.ok()?
    })
    .await?;
    assert_eq!(
        cm.data["data"],
        json!({"logLevel": "info", "region": "eu-west-1", "team": "web"})
    );
    let owner = &cm.metadata.owner_references.clone().unwrap_or_default()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Namespace", "shop")
    );
    assert!(
        env.configmaps("infra")
            .get_opt("team-defaults")
            .await?
            .is_none()
    );

    nss.patch(
        "shop",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": null}}})),
    )
    .await?;
    eventually("team-defaults removed from shop", 30, || async {
        shop.get_opt("team-defaults")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await?;
    let ns_writes: Vec<_> = env
        .server
        .requests()
        .into_iter()
        .filter(|r| r.is_write() && r.resource == "namespaces")
        .map(|r| (r.verb, r.name))
        .collect();
    assert_eq!(
        ns_writes.len(),
        3,
        "only the test's 2 creates and 1 label patch: {ns_writes:?}"
    );
    env.stop_manager().await;
    Ok(())
}

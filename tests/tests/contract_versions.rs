//! The plugin contract can evolve: components built against 0.1.0 (committed
//! under `tests/fixtures/contract-0.1.0`, never rebuilt) and against 0.2.0
//! (the plugins built from this tree) load side by side, are told apart from
//! their type, answer the same, and both reconcile in one host.

use std::path::PathBuf;

use anyhow::Result;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use wr_runtime::{
    CallLimits, ContractVersion, CustomizeRequest, LoadError, Plugin, PluginRuntime,
    ReconcileRequest, RelatedObjects, RuntimeConfig, World,
};
use wr_tests::cluster::*;
use wr_tests::plugins::{plugin_bytes, workspace_root};

fn old_component(name: &str) -> PathBuf {
    workspace_root()
        .join("tests/fixtures/contract-0.1.0")
        .join(format!("{}.wasm", name.replace('-', "_")))
}

fn old_bytes(name: &str) -> Vec<u8> {
    let path = old_component(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn runtime() -> PluginRuntime {
    PluginRuntime::new(RuntimeConfig::default()).expect("runtime")
}

fn request(parent: Value, config: Option<Value>) -> ReconcileRequest {
    ReconcileRequest {
        parent,
        children: vec![],
        related: vec![],
        finalizing: false,
        config,
        now: "2026-01-15T12:00:00Z".into(),
    }
}

#[test]
fn committed_components_are_the_documented_ones() {
    // The README's sha256 are what the tests run: a replaced file is caught.
    let readme =
        std::fs::read_to_string(workspace_root().join("tests/fixtures/contract-0.1.0/README.md"))
            .unwrap();
    let rt = runtime();
    for name in ["static-site", "tombstone"] {
        let plugin = rt.load(&old_bytes(name)).unwrap();
        let sha = plugin.digest().trim_start_matches("sha256:");
        assert!(
            readme.contains(sha),
            "{name}: sha256 {sha} not in the README"
        );
    }
}

#[test]
fn each_version_is_detected_from_the_component() {
    let rt = runtime();
    let cases = [
        (
            old_bytes("static-site"),
            ContractVersion::V0_1,
            World::Reconciler,
            true,
        ),
        (
            old_bytes("tombstone"),
            ContractVersion::V0_1,
            World::Reconciler,
            true,
        ),
        // static-site declares it never reads `now`; tombstone that it does.
        (
            plugin_bytes("static-site"),
            ContractVersion::V0_2,
            World::Reconciler,
            false,
        ),
        (
            plugin_bytes("tombstone"),
            ContractVersion::V0_2,
            World::Reconciler,
            true,
        ),
        (
            plugin_bytes("team-config"),
            ContractVersion::V0_2,
            World::ReconcilerWithCustomize,
            false,
        ),
    ];
    for (index, (bytes, contract, world, reads_now)) in cases.into_iter().enumerate() {
        let plugin = rt
            .load(&bytes)
            .unwrap_or_else(|e| panic!("case {index}: {e}"));
        let info = plugin.info();
        assert_eq!(
            (info.contract, info.world, info.reads_now),
            (contract, world, reads_now),
            "case {index}"
        );
    }
}

#[test]
fn a_component_of_neither_world_is_refused_naming_the_supported_worlds() {
    // Exports a `reconcile` of the wrong type: no world of any version fits.
    let wat = r#"(component
        (core module $m (func (export "f") (param i32) (result i32) local.get 0))
        (core instance $i (instantiate $m))
        (func (export "reconcile") (param "x" u32) (result u32)
            (canon lift (core func $i "f")))
    )"#;
    let err = runtime().load(wat.as_bytes()).unwrap_err();
    assert!(matches!(err, LoadError::WorldMismatch { .. }), "{err:?}");
    let text = err.to_string();
    for world in ContractVersion::supported_worlds() {
        assert!(text.contains(&world), "{text}");
    }
    assert!(text.contains("reconciler@0.1.0"), "{text}");

    // No `reconcile` at all.
    let err = runtime().load(b"(component)").unwrap_err();
    assert!(
        err.to_string().contains("reconciler-with-customize@0.2.0"),
        "{err}"
    );
}

/// Every render fixture of the two plugins: the committed 0.1.0 component
/// and the 0.2.0 one built from this tree answer exactly the same.
#[tokio::test]
async fn old_and_new_components_answer_the_same_on_every_fixture() {
    let rt = runtime();
    let limits = CallLimits::default();
    for name in ["static-site", "tombstone"] {
        let old = rt.load(&old_bytes(name)).unwrap();
        let new = rt.load(&plugin_bytes(name)).unwrap();
        assert_ne!(old.info().contract, new.info().contract);
        let fixtures = wr_tests::languages::fixtures(name);
        assert!(!fixtures.is_empty(), "{name}: no fixtures");
        for fixture in fixtures {
            let a = old.reconcile(&fixture.request, &limits).await;
            let b = new.reconcile(&fixture.request, &limits).await;
            assert_eq!(
                format!("{a:?}"),
                format!("{b:?}"),
                "{name}/{}: 0.1.0 and 0.2.0 differ",
                fixture.name
            );
        }
    }
}

/// A 0.1.0 plugin gets the related groups as one flat list in rule order;
/// a 0.2.0 plugin gets them by name. team-config reports what it saw.
#[tokio::test]
async fn related_groups_reach_each_version_in_its_shape() {
    let rt = runtime();
    let limits = CallLimits::default();
    let cm = |name: &str, team: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "labels": {"team": team}}, "data": {name: team}})
    };
    let mut req = request(
        json!({"apiVersion": "x/v1", "kind": "Team", "metadata": {"name": "p", "namespace": "ns"},
               "spec": {"team": "web"}}),
        None,
    );
    req.related = vec![
        RelatedObjects {
            name: "other".into(),
            objects: vec![cm("o", "web")],
        },
        RelatedObjects {
            name: "team-configs".into(),
            objects: vec![cm("a", "web"), cm("b", "db")],
        },
    ];
    let team = rt.load(&plugin_bytes("team-config")).unwrap();
    let resp = team.reconcile(&req, &limits).await.unwrap();
    // Only its own rule's group: "o" is not seen. (It takes the group as
    // the host hands it, narrowed by its `customize` answer, so "b" is here.)
    assert_eq!(
        resp.status,
        Some(json!({"team": "web", "sources": ["a", "b"]}))
    );
    assert_eq!(resp.children[0]["data"], json!({"a": "web", "b": "db"}));
    assert_eq!(req.related_flat().count(), 3);
}

#[tokio::test]
async fn the_host_calls_customize_and_not_on_plugins_without_it() {
    let rt = runtime();
    let limits = CallLimits::default();
    let req = CustomizeRequest {
        parent: json!({"metadata": {"name": "p"}, "spec": {"team": "db"}}),
        config: None,
    };
    let team = rt.load(&plugin_bytes("team-config")).unwrap();
    let selectors = team.customize(&req, &limits).await.unwrap().unwrap();
    assert_eq!(
        serde_json::to_value(&selectors).unwrap(),
        json!([{"name": "team-configs", "matchLabels": {"team": "db"}}])
    );
    // The plugin's own error comes back as such.
    let bad = CustomizeRequest {
        parent: json!({"metadata": {"name": "p"}, "spec": {}}),
        config: None,
    };
    let err = team.customize(&bad, &limits).await.unwrap_err();
    assert_eq!(err.reason(), "InvalidSpec", "{err}");
    // Under a fuel budget too (the metered lane has its own pre-link).
    let fueled = CallLimits {
        fuel: Some(500_000_000),
        ..CallLimits::default()
    };
    assert!(team.customize(&req, &fueled).await.unwrap().is_some());

    for plugin in [
        rt.load(&old_bytes("static-site")).unwrap(),
        rt.load(&plugin_bytes("static-site")).unwrap(),
    ] {
        assert_eq!(plugin.customize(&req, &limits).await.unwrap(), None);
    }
}

fn site_ar() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("examples.wasm-reconciler.dev", "v1alpha1", "StaticSite"),
        "staticsites",
    )
}

fn workspace_ar() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("examples.wasm-reconciler.dev", "v1alpha1", "Workspace"),
        "workspaces",
    )
}

fn example(path: &str) -> Result<Value> {
    let p = workspace_root().join("examples").join(path);
    Ok(serde_yaml::from_str(&std::fs::read_to_string(p)?)?)
}

async fn controller(env: &Env, file: &str, component: PathBuf) -> Result<()> {
    let mut wc = example(file)?;
    wc["spec"]["plugin"] = json!({"path": component.display().to_string(),
                                  "config": wc["spec"]["plugin"]["config"].clone()});
    env.create_controller(wc).await
}

async fn ready(api: &Api<DynamicObject>, name: &str) -> Result<DynamicObject> {
    eventually("Ready=True for the current generation", 30, || async {
        let o = api.get(name).await.ok()?;
        let (s, _, g) = ready_of(&o)?;
        (s == "True" && g == o.metadata.generation).then_some(o)
    })
    .await
}

/// One host, two controllers: static-site served by the committed 0.1.0
/// component, tombstone by the 0.2.0 one built from this tree. Both
/// reconcile their parents through the real engine against the embedded API
/// server, and each WasmController reports the contract its plugin implements.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_and_new_contract_components_reconcile_in_one_host() -> Result<()> {
    wr_tests::logs::init();
    let mut env = Env::start_with_wasm().await?;
    install_crd(&env.client, example("static-site/crd.yaml")?).await?;
    install_crd(&env.client, example("tombstone/crd.yaml")?).await?;
    controller(
        &env,
        "static-site/controller.yaml",
        old_component("static-site"),
    )
    .await?;
    controller(
        &env,
        "tombstone/controller.yaml",
        wr_tests::plugins::plugin_path("tombstone"),
    )
    .await?;
    env.start_manager();

    let ns = env.ns("default");
    let sites: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), &ns, &site_ar());
    let workspaces: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &ns, &workspace_ar());
    let mut site: DynamicObject = serde_json::from_value(example("static-site/site.yaml")?)?;
    site.metadata.namespace = Some(ns.clone());
    sites.create(&PostParams::default(), &site).await?;
    let mut ws: DynamicObject = serde_json::from_value(example("tombstone/workspace.yaml")?)?;
    ws.metadata.namespace = Some(ns.clone());
    workspaces.create(&PostParams::default(), &ws).await?;

    let s = ready(&sites, "web").await?;
    assert_eq!(s.data["status"]["replicas"], 2);
    ready(&workspaces, "team-a").await?;
    let cms = env.configmaps("default");
    for name in ["web-content", "team-a-data", "team-a-tombstone"] {
        assert!(cms.get_opt(name).await?.is_some(), "{name} not created");
    }

    let controllers: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("wasm-reconciler.dev", "v1alpha1", "WasmController"),
            "wasmcontrollers",
        ),
    );
    for (name, want) in [
        ("static-site", "wasm-reconciler:plugin/reconciler@0.1.0"),
        ("tombstone", "wasm-reconciler:plugin/reconciler@0.2.0"),
    ] {
        eventually(&format!("{name} reports contract {want}"), 20, || async {
            let wc = controllers.get(name).await.ok()?;
            (wc.data["status"]["pluginContract"] == want).then_some(())
        })
        .await?;
    }
    Ok(())
}

/// Loading the same bytes twice keeps the declarations (the in-memory map
/// hands back the same plugin, `info` is not called again).
#[test]
fn info_survives_the_memory_cache() {
    let rt = runtime();
    let bytes = plugin_bytes("static-site");
    let first: Plugin = rt.load(&bytes).unwrap();
    let second = rt.load(&bytes).unwrap();
    assert_eq!(first.info(), second.info());
    assert_eq!(rt.stats().memory_cache_hits, 1);
}

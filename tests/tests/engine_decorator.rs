//! Decorator mode (issue 18 item 3) at the wire: a WasmController with
//! `spec.decorate` attaches a ConfigMap to every Namespace labelled
//! `team=a`, owned by that Namespace; the plugin receives the Namespace and
//! its attachment; the ConfigMap goes when the label goes; and the host never
//! writes a Namespace (no finalizer asked for, no `writeStatus`), as the
//! API server's request log shows.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use wr_tests::cluster::*;

const HOST: &str = "wasm-reconciler/team-defaults";

/// One plugin call: the Namespace and its attachments' names.
type Call = (String, Vec<String>);

async fn namespace(env: &Env, name: &str, team: Option<&str>) -> Result<()> {
    let api: Api<Namespace> = Api::all(env.client.clone());
    let mut ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    if let Some(t) = team {
        ns["metadata"]["labels"] = json!({"team": t});
    }
    api.create(&PostParams::default(), &serde_json::from_value(ns)?)
        .await?;
    Ok(())
}

async fn label(env: &Env, name: &str, team: Option<&str>) -> Result<()> {
    let api: Api<Namespace> = Api::all(env.client.clone());
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": team}}})),
    )
    .await?;
    Ok(())
}

async fn attachment(env: &Env, ns: &str) -> Option<kube::api::DynamicObject> {
    env.configmaps(ns).get_opt("team-defaults").await.ok()?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decorator_attaches_children_to_selected_objects_only_and_never_writes_them() -> Result<()>
{
    let mut env = Env::start().await?;
    if env.server.is_real() {
        // Creates and relabels cluster-scoped Namespaces with fixed names.
        eprintln!("skipped on the real control plane: uses fixed cluster-wide namespace names");
        return Ok(());
    }
    namespace(&env, "n1", Some("a")).await?;
    namespace(&env, "n2", None).await?;
    namespace(&env, "n3", Some("b")).await?;
    let seen: Arc<Mutex<Vec<Call>>> = Arc::default();
    let log = seen.clone();
    let plugin = ScriptPlugin::new("team-defaults", move |req, _| {
        let ns = req.parent["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let children = req
            .children
            .iter()
            .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        log.lock().unwrap().push((ns.clone(), children));
        Ok(response(vec![json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "team-defaults", "namespace": ns},
            "data": {"team": req.parent["metadata"]["labels"]["team"]}
        })]))
    });
    let path = env.plugin_file("team-defaults", plugin)?;
    env.create_controller(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1",
        "kind": "WasmController",
        "metadata": {"name": "team-defaults"},
        "spec": {
            "decorate": {
                "resource": {"apiVersion": "v1", "resource": "namespaces"},
                "labelSelector": {"matchLabels": {"team": "a"}}
            },
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {"path": path.display().to_string()},
            "resyncPeriodSeconds": 3600
        }
    }))
    .await?;
    env.start_manager();

    let cm = eventually("ConfigMap attached to n1", 20, || attachment(&env, "n1")).await?;
    let ns1: Namespace = Api::all(env.client.clone()).get("n1").await?;
    let owner = cm.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owner.len(), 1);
    assert_eq!(
        (owner[0].kind.as_str(), owner[0].name.as_str()),
        ("Namespace", "n1")
    );
    assert_eq!(Some(owner[0].uid.clone()), ns1.metadata.uid);
    assert_eq!(cm.data["data"]["team"], "a");
    // The plugin was called with the Namespace and, once it existed, its attachment.
    eventually("plugin saw n1's attachment", 20, || async {
        let s = seen.lock().unwrap();
        s.iter()
            .any(|(ns, c)| ns == "n1" && c == &["team-defaults"])
            .then_some(())
    })
    .await?;

    // Selected later: attached; never selected: never called, nothing attached.
    label(&env, "n2", Some("a")).await?;
    eventually("ConfigMap attached to n2", 20, || attachment(&env, "n2")).await?;
    assert!(attachment(&env, "n3").await.is_none());
    let called: BTreeSet<String> = seen.lock().unwrap().iter().map(|s| s.0.clone()).collect();
    assert_eq!(called, ["n1", "n2"].map(String::from).into());

    // No longer selected: its attachment goes.
    label(&env, "n1", Some("b")).await?;
    eventually("n1's ConfigMap removed", 20, || async {
        attachment(&env, "n1").await.is_none().then_some(())
    })
    .await?;
    assert!(attachment(&env, "n2").await.is_some());
    // Deletes carry no field manager; the test deletes nothing itself.
    let deleted: Vec<_> = env
        .writes("configmaps", None)
        .into_iter()
        .filter(|r| r.verb == "delete")
        .map(|r| r.namespace.unwrap_or_default())
        .collect();
    assert_eq!(deleted, ["n1"]);

    // The host never wrote a Namespace: not its spec, metadata or status.
    let requests = env.server.requests();
    assert!(
        !requests.iter().any(|r| r.is_write()
            && r.field_manager.as_deref() == Some(HOST)
            && r.resource == "namespaces"),
        "no Namespace write under the host's field manager"
    );
    let all_ns_writes = requests
        .iter()
        .filter(|r| r.is_write() && r.resource == "namespaces")
        .count();
    assert_eq!(
        all_ns_writes, 5,
        "the test's 3 creates and 2 label patches only"
    );
    env.stop_manager().await;
    Ok(())
}

/// With `finalize: true` the finalize protocol is the one of owned parents:
/// the host's finalizer goes on each selected object before its attachment
/// exists, a deleted object stays until the plugin reports `finalized`, and an
/// object that stops matching loses the finalizer and its attachment. Here
/// ConfigMaps selected by annotation each get a `<name>-shadow` ConfigMap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finalizing_decorator_puts_its_finalizer_only_on_selected_objects() -> Result<()> {
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let plugin = ScriptPlugin::new("cm-shadow", |req, _| {
        let name = req.parent["metadata"]["name"].as_str().unwrap_or("x");
        let mut r = response(vec![json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{name}-shadow")},
            "data": {"of": name}
        })]);
        r.finalized = req.finalizing;
        if req.finalizing {
            r.children.clear();
        }
        Ok(r)
    });
    let path = env.plugin_file("cm-shadow", plugin)?;
    env.create_controller(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1",
        "kind": "WasmController",
        "metadata": {"name": "cm-shadow"},
        "spec": {
            "decorate": {
                "resource": {"apiVersion": "v1", "kind": "ConfigMap"},
                "annotationSelector": {"matchAnnotations": {"example.com/shadow": "yes"}}
            },
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {"path": path.display().to_string()},
            "finalize": true,
            "resyncPeriodSeconds": 3600
        }
    }))
    .await?;
    env.start_manager();
    let cms = env.configmaps("ns1");
    let ns = env.ns("ns1");
    let make = |name: &str, selected: bool| {
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns}, "data": {"k": "v"}});
        if selected {
            cm["metadata"]["annotations"] = json!({"example.com/shadow": "yes"});
        }
        serde_json::from_value::<kube::api::DynamicObject>(cm)
    };
    cms.create(&PostParams::default(), &make("a", true)?)
        .await?;
    cms.create(&PostParams::default(), &make("b", false)?)
        .await?;
    let finalizer = "wasm-reconciler.dev/cm-shadow";
    let has_fin = |o: &kube::api::DynamicObject| {
        o.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|x| x == finalizer))
    };
    eventually("a decorated: finalizer and attachment", 20, || async {
        let a = cms.get("a").await.ok()?;
        let shadow = cms.get_opt("a-shadow").await.ok()??;
        (has_fin(&a) && shadow.data["data"]["of"] == "a").then_some(())
    })
    .await?;
    let b = cms.get("b").await?;
    assert!(!has_fin(&b), "an unselected object gets no finalizer");
    assert!(cms.get_opt("b-shadow").await?.is_none());
    // Never its data or status: the host's writes to `a` are the finalizer only.
    assert!(cms.get("a").await?.data.get("status").is_none());

    // No longer selected: finalizer and attachment go.
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"example.com/shadow": null}}})),
    )
    .await?;
    eventually("a released", 20, || async {
        let a = cms.get("a").await.ok()?;
        let shadow = cms.get_opt("a-shadow").await.ok()?;
        (!has_fin(&a) && shadow.is_none()).then_some(())
    })
    .await?;

    // Selected again, then deleted: it stays until the plugin finalized.
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"example.com/shadow": "yes"}}})),
    )
    .await?;
    eventually("a decorated again", 20, || async {
        let a = cms.get("a").await.ok()?;
        (has_fin(&a) && cms.get_opt("a-shadow").await.ok()?.is_some()).then_some(())
    })
    .await?;
    cms.delete("a", &Default::default()).await?;
    eventually("a finalized and gone", 20, || async {
        (cms.get_opt("a").await.ok()?.is_none()).then_some(())
    })
    .await?;
    env.stop_manager().await;
    Ok(())
}

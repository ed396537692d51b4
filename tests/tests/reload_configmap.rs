//! Hot reload of plugins from ConfigMaps (issue 5) against the embedded API
//! server: rollout to live parents, refused versions, chunked components,
//! automatic rollback. Plugins are native test plugins registered under the
//! bytes stored in the ConfigMap (so each "version" is a known function), plus
//! real components where the runtime itself must refuse them.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use wr_engine::PluginError;
use wr_tests::cluster::*;
use wr_tests::reload::*;

fn init_tracing() {
    wr_tests::logs::init();
}

/// (parent, version) of every plugin call, in the order the calls started.
type CallLog = Arc<Mutex<Vec<(String, &'static str)>>>;

/// Version `v` of the test logic: children `<parent>-a` and `<parent>-b`, both
/// stamped with the version (a reconcile that mixed versions would show two).
fn versioned(v: &'static str) -> Arc<ScriptPlugin> {
    versioned_logged(v, &CallLog::default())
}

/// [`versioned`], recording each call in `log`.
fn versioned_logged(v: &'static str, log: &CallLog) -> Arc<ScriptPlugin> {
    let log = log.clone();
    ScriptPlugin::new(v, move |req, _| {
        let name = req.parent["metadata"]["name"]
            .as_str()
            .unwrap_or("x")
            .to_string();
        log.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((name.clone(), v));
        let value = req.parent["spec"]["value"]
            .as_str()
            .unwrap_or("")
            .to_string();
        Ok(response(
            ["a", "b"]
                .iter()
                .map(|s| {
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": format!("{name}-{s}"), "labels": {"app": name}},
                       "data": {"value": value, "version": v}})
                })
                .collect(),
        ))
    })
}

fn bytes_of(v: &str) -> Vec<u8> {
    format!("native-plugin:{v}").into_bytes()
}

/// (version of child a, version of child b, uid of child a) per parent.
async fn children(env: &Env, ns: &str) -> Result<HashMap<String, (String, String, String)>> {
    let list = env
        .configmaps(ns)
        .list(&ListParams::default().labels("app"))
        .await?;
    let mut out: HashMap<String, (String, String, String)> = HashMap::new();
    for cm in list.items {
        let parent = cm
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .cloned()
            .unwrap_or_default();
        let v = cm.data["data"]["version"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let e = out.entry(parent).or_default();
        match cm.metadata.name.as_deref().unwrap_or("").ends_with("-a") {
            true => {
                e.0 = v;
                e.2 = cm.metadata.uid.clone().unwrap_or_default();
            }
            false => e.1 = v,
        }
    }
    Ok(out)
}

async fn cm_resource_version(env: &Env, ns: &str, name: &str) -> Result<Option<String>> {
    Ok(env
        .configmaps(ns)
        .get(name)
        .await?
        .metadata
        .resource_version)
}

fn timestamp(s: Option<&str>) -> Result<k8s_openapi::jiff::Timestamp> {
    let s = s.ok_or_else(|| anyhow::anyhow!("status.pluginLoadedAt missing"))?;
    Ok(s.parse()?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_with_200_live_parents_switches_every_parent_without_recreating_children()
-> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let log = CallLog::default();
    let (v1, v2) = (versioned_logged("v1", &log), versioned_logged("v2", &log));
    env.loader.register(&bytes_of("v1"), v1.clone());
    env.loader.register(&bytes_of("v2"), v2.clone());
    put_raw(&env, "ns1", "plugin", &bytes_of("v1")).await?;
    configmap_controller(&env, "widgets", "ns1", "plugin", json!({})).await?;
    env.start_manager();
    for i in 0..200 {
        env.create_widget("ns1", &format!("w{i:03}"), json!({"value": i.to_string()}))
            .await?;
    }
    eventually("all 200 parents on v1", 180, || async {
        let c = children(&env, "ns1").await.ok()?;
        (c.len() == 200 && c.values().all(|(a, b, _)| a == "v1" && b == "v1")).then_some(())
    })
    .await?;
    let before = children(&env, "ns1").await?;
    // The host writes the WasmController's status after it started the
    // controller, so the children can exist before the digest is reported.
    let v1_digest = eventually("status reports a digest", 20, || async {
        active_digest(&env, "widgets").await
    })
    .await?;
    assert_eq!(v1_digest, wr_engine::plugin_source::digest(&bytes_of("v1")));
    let st1 = controller(&env, "widgets")
        .await?
        .status
        .unwrap_or_default();
    let rv1 = cm_resource_version(&env, "ns1", "plugin").await?;
    assert_eq!(st1.plugin_source_resource_version, rv1);
    let loaded1 = timestamp(st1.plugin_loaded_at.as_deref())?;
    env.server.clear_requests();

    let put_at = k8s_openapi::jiff::Timestamp::now();
    put_raw(&env, "ns1", "plugin", &bytes_of("v2")).await?;
    eventually("all 200 parents on v2", 180, || async {
        let c = children(&env, "ns1").await.ok()?;
        (c.len() == 200 && c.values().all(|(a, b, _)| a == "v2" && b == "v2")).then_some(())
    })
    .await?;
    let after = children(&env, "ns1").await?;
    for (parent, (a, b, uid)) in &after {
        assert_eq!(a, b, "{parent}: one reconcile produced two versions");
        assert_eq!(
            Some(uid),
            before.get(parent).map(|x| &x.2),
            "{parent}: child recreated"
        );
    }
    let deletes: Vec<_> = env
        .server
        .requests()
        .into_iter()
        .filter(|r| r.resource == "configmaps" && r.verb == "delete")
        .collect();
    assert!(
        deletes.is_empty(),
        "children deleted during rollout: {deletes:?}"
    );
    // The old version is no longer called once the new one is active.
    eventually("status reports v2", 20, || async {
        (active_digest(&env, "widgets").await
            == Some(wr_engine::plugin_source::digest(&bytes_of("v2"))))
        .then_some(())
    })
    .await?;
    // Status: when the serving version was loaded, and from which resourceVersion.
    let st = controller(&env, "widgets")
        .await?
        .status
        .unwrap_or_default();
    let cm_rv = cm_resource_version(&env, "ns1", "plugin").await?;
    assert_ne!(cm_rv, rv1);
    assert_eq!(st.plugin_source_resource_version, cm_rv);
    let loaded2 = timestamp(st.plugin_loaded_at.as_deref())?;
    // The host rounds to whole seconds: allow one second of rounding.
    let earliest = put_at.checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(1))?;
    assert!(
        loaded2 >= loaded1 && loaded2 >= earliest,
        "pluginLoadedAt {loaded2} not after the update at {put_at} (v1 loaded at {loaded1})"
    );
    // Per parent, reconciles are serialised: once one used v2, none may use v1
    // again (the swap is atomic; a reconcile takes the plugin once).
    let calls = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut switched = std::collections::HashSet::new();
    for (parent, v) in &calls {
        match *v {
            "v2" => {
                switched.insert(parent.clone());
            }
            _ => assert!(
                !switched.contains(parent),
                "{parent}: v1 called after v2 had reconciled it"
            ),
        }
    }
    assert_eq!(switched.len(), 200, "parents reconciled by v2");
    // A change must reach v2 only. No pause first: every parent has been
    // reconciled by v2 and the reconciles of one parent are serial, so no v1
    // call is still running and v1's count is final.
    let v1_calls = v1.calls();
    env.widgets("ns1")
        .patch(
            "w000",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"value": "new"}})),
        )
        .await?;
    eventually("v2 reconciles the change", 20, || async {
        let cm = env.configmaps("ns1").get_opt("w000-a").await.ok()??;
        let data = &cm.data["data"];
        (data["value"] == "new" && data["version"] == "v2").then_some(())
    })
    .await?;
    assert_eq!(v1.calls(), v1_calls, "old version called after the swap");
    env.stop_manager().await;
    Ok(())
}

async fn wait_refused(env: &Env, wc: &str, reason: &str) -> Result<String> {
    eventually(&format!("PluginLoaded=False/{reason}"), 30, || async {
        let (s, r, m) = condition(env, wc, "PluginLoaded").await?;
        (s == "False" && r == reason).then_some(m)
    })
    .await?;
    wait_controller_event(env, wc, "Warning", reason, 10).await
}

/// The old version (v1) still serves: a parent change is reconciled by it.
async fn still_serving(env: &Env, v1: &ScriptPlugin, parent: &str, value: &str) -> Result<()> {
    serving(env, v1, "v1", parent, value).await
}

/// Version `version` (plugin `p`) serves: a parent change is reconciled by it.
async fn serving(
    env: &Env,
    p: &ScriptPlugin,
    version: &str,
    parent: &str,
    value: &str,
) -> Result<()> {
    let v1 = p;
    let before = v1.calls();
    env.widgets("ns1")
        .patch(
            parent,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"value": value}})),
        )
        .await?;
    eventually("old version reconciles", 20, || async {
        let cm = env
            .configmaps("ns1")
            .get_opt(&format!("{parent}-a"))
            .await
            .ok()??;
        (v1.calls() > before
            && cm.data["data"]["value"] == value
            && cm.data["data"]["version"] == version)
            .then_some(())
    })
    .await
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let _ = e.write_all(b);
    e.finish().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_versions_are_refused_and_the_old_one_keeps_running() -> Result<()> {
    init_tracing();
    let mut env = Env::start_with_wasm().await?;
    env.namespace("ns1").await?;
    let v1 = versioned("v1");
    env.loader.register(&bytes_of("v1"), v1.clone());
    put_raw(&env, "ns1", "plugin", &bytes_of("v1")).await?;
    configmap_controller(&env, "widgets", "ns1", "plugin", json!({})).await?;
    env.start_manager();
    env.create_widget("ns1", "w1", json!({"value": "0"}))
        .await?;
    let v1_digest = wr_engine::plugin_source::digest(&bytes_of("v1"));
    eventually("v1 active", 30, || async {
        (active_digest(&env, "widgets").await == Some(v1_digest.clone())).then_some(())
    })
    .await?;

    // Corrupt: looks like wasm, is not.
    put_raw(&env, "ns1", "plugin", b"\0asm\x01\x00\x00\x00garbage").await?;
    let m = wait_refused(&env, "widgets", "LoadFailed").await?;
    assert!(m.contains("previous version keeps running"), "{m}");
    assert_eq!(
        active_digest(&env, "widgets").await,
        Some(v1_digest.clone())
    );
    still_serving(&env, &v1, "w1", "1").await?;

    // Wrong world: a valid, empty component.
    put_raw(&env, "ns1", "plugin", b"\0asm\x0d\x00\x01\x00").await?;
    let (_, _, m) = eventually("world mismatch reported", 30, || async {
        let c = condition(&env, "widgets", "PluginLoaded").await?;
        c.2.contains("world").then_some(c)
    })
    .await?;
    assert!(m.contains("reconciler"), "{m}");
    eventually("Warning event about the world", 10, || async {
        controller_events(&env, "widgets")
            .await
            .into_iter()
            .find(|(t, r, m)| t == "Warning" && r == "LoadFailed" && m.contains("world"))
    })
    .await?;
    assert_eq!(
        active_digest(&env, "widgets").await,
        Some(v1_digest.clone())
    );
    still_serving(&env, &v1, "w1", "2").await?;

    // Gzip bomb: 200 MiB of zeros in ~200 KiB.
    put_raw(&env, "ns1", "plugin", &gzip(&vec![0u8; 200 << 20])).await?;
    let m = wait_refused(&env, "widgets", "TooLarge").await?;
    assert!(m.contains("exceeds"), "{m}");
    still_serving(&env, &v1, "w1", "3").await?;

    // Chunk set with one stale chunk: publish a big component, then overwrite one chunk.
    let big = inflate_component(b"\0asm\x0d\x00\x01\x00", 3 << 20);
    let cms = publish(&env, "ns1", "plugin", &big).await?;
    assert!(cms.len() > 3);
    let mut stale = cms[1].clone();
    stale.binary_data = Some(
        [(
            "chunk".to_string(),
            k8s_openapi::ByteString(b"stale".to_vec()),
        )]
        .into(),
    );
    stale.metadata.resource_version = None;
    apply_configmaps(&env, &[stale]).await?;
    let m = eventually("stale chunk reported", 30, || async {
        let (s, r, m) = condition(&env, "widgets", "PluginLoaded").await?;
        (s == "False" && r == "ChunkSetIncomplete" && m.contains("chunk 1")).then_some(m)
    })
    .await?;
    assert!(m.contains("manifest expects"), "{m}");
    wait_refused(&env, "widgets", "ChunkSetIncomplete").await?;
    assert_eq!(
        active_digest(&env, "widgets").await,
        Some(v1_digest.clone())
    );
    still_serving(&env, &v1, "w1", "4").await?;
    env.stop_manager().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sha256_pin_mismatch_is_refused_with_expected_and_actual() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let (v1, v2) = (versioned("v1"), versioned("v2"));
    env.loader.register(&bytes_of("v1"), v1.clone());
    env.loader.register(&bytes_of("v2"), v2.clone());
    put_raw(&env, "ns1", "plugin", &bytes_of("v1")).await?;
    let pin = wr_engine::plugin_source::digest(&bytes_of("v1"));
    configmap_controller(&env, "widgets", "ns1", "plugin", json!({"sha256": pin})).await?;
    env.start_manager();
    env.create_widget("ns1", "w1", json!({"value": "0"}))
        .await?;
    eventually("v1 active", 30, || async {
        (active_digest(&env, "widgets").await == Some(pin.clone())).then_some(())
    })
    .await?;
    put_raw(&env, "ns1", "plugin", &bytes_of("v2")).await?;
    let m = wait_refused(&env, "widgets", "DigestMismatch").await?;
    let actual = wr_engine::plugin_source::digest(&bytes_of("v2"));
    assert!(m.contains(&actual) && m.contains(&pin), "{m}");
    assert_eq!(v2.calls(), 0);
    still_serving(&env, &v1, "w1", "1").await?;
    env.stop_manager().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_loaded_controller_reconciles_nothing_and_says_why() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    put_raw(&env, "ns1", "plugin", &gzip(&vec![0u8; 100 << 20])).await?;
    configmap_controller(&env, "widgets", "ns1", "plugin", json!({})).await?;
    env.start_manager();
    env.create_widget("ns1", "w1", json!({"value": "0"}))
        .await?;
    wait_refused(&env, "widgets", "TooLarge").await?;
    let (s, r, _) = condition(&env, "widgets", "Ready")
        .await
        .unwrap_or_default();
    assert_eq!((s.as_str(), r.as_str()), ("False", "PluginNotLoaded"));
    assert!(env.configmaps("ns1").get_opt("w1-a").await?.is_none());
    // Fixing the ConfigMap starts the controller.
    let v1 = versioned("v1");
    env.loader.register(&bytes_of("v1"), v1.clone());
    put_raw(&env, "ns1", "plugin", &bytes_of("v1")).await?;
    eventually("child created by v1", 30, || async {
        env.configmaps("ns1")
            .get_opt("w1-a")
            .await
            .ok()?
            .map(|_| ())
    })
    .await?;
    env.stop_manager().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_faulty_version_is_rolled_back() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let v1 = versioned("v1");
    let bad = ScriptPlugin::new("bad", |_, _| {
        Err(PluginError::Fault {
            kind: wr_runtime::FaultKind::Trap,
            message: "unreachable".into(),
        })
    });
    env.loader.register(&bytes_of("v1"), v1.clone());
    env.loader.register(&bytes_of("bad"), bad.clone());
    put_raw(&env, "ns1", "plugin", &bytes_of("v1")).await?;
    configmap_controller(
        &env,
        "widgets",
        "ns1",
        "plugin",
        json!({"rollback": {"reconciles": 5, "maxFaultPercent": 40}}),
    )
    .await?;
    env.start_manager();
    for i in 0..10 {
        env.create_widget("ns1", &format!("w{i}"), json!({"value": "0"}))
            .await?;
    }
    eventually("10 parents on v1", 60, || async {
        let c = children(&env, "ns1").await.ok()?;
        (c.len() == 10 && c.values().all(|(a, _, _)| a == "v1")).then_some(())
    })
    .await?;
    put_raw(&env, "ns1", "plugin", &bytes_of("bad")).await?;
    let (s, r, cm) = eventually("RolledBack condition", 30, || async {
        let c = condition(&env, "widgets", "PluginLoaded").await?;
        (c.1 == "RolledBack").then_some(c)
    })
    .await?;
    assert_eq!(s, "False");
    assert_eq!(r, "RolledBack");
    assert!(
        cm.contains("rolled back to")
            && cm.contains(&wr_engine::plugin_source::digest(&bytes_of("v1"))),
        "{cm}"
    );
    let m = wait_controller_event(&env, "widgets", "Warning", "PluginRolledBack", 10).await?;
    assert!(m.contains("rolled back to"), "event: {m}");
    assert!(bad.calls() >= 5);
    assert_eq!(
        active_digest(&env, "widgets").await,
        Some(wr_engine::plugin_source::digest(&bytes_of("v1")))
    );
    // Every parent is healthy again under v1.
    let r = eventually("all parents Ready again", 30, || async {
        let l = env.widgets("ns1").list(&ListParams::default()).await.ok()?;
        l.items
            .iter()
            .all(|w| ready_of(w).map(|r| r.0 == "True").unwrap_or(false))
            .then_some(())
    })
    .await;
    if r.is_err() {
        let l = env.widgets("ns1").list(&ListParams::default()).await?;
        for w in l.items {
            eprintln!("{:?} {:?}", w.metadata.name, w.data.get("status"));
        }
    }
    r?;
    env.stop_manager().await;
    Ok(())
}

/// Bytes that start like a component (so `publish` takes them) and compress
/// well, registered as native plugin version `v`.
fn wasm_like(v: &str) -> Vec<u8> {
    let mut b = b"\0asm".to_vec();
    for _ in 0..2000 {
        b.extend_from_slice(format!("native-plugin:{v} ").as_bytes());
    }
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zstd_and_gzip_versions_load_and_zstd_bombs_and_broken_streams_are_refused() -> Result<()> {
    init_tracing();
    let mut env = Env::start_with_wasm().await?;
    env.namespace("ns1").await?;
    let (v1, v2, v3) = (versioned("v1"), versioned("v2"), versioned("v3"));
    env.loader.register(&bytes_of("v1"), v1.clone());
    env.loader.register(&wasm_like("v2"), v2.clone());
    env.loader.register(&bytes_of("v3"), v3.clone());
    put_raw(&env, "ns1", "plugin", &bytes_of("v1")).await?;
    configmap_controller(&env, "widgets", "ns1", "plugin", json!({})).await?;
    env.start_manager();
    env.create_widget("ns1", "w1", json!({"value": "0"}))
        .await?;
    // A new value: the same one would be a no-op patch, and if the first
    // reconcile already ran, no call would follow it.
    still_serving(&env, &v1, "w1", "initial").await?;

    // publish stores v2 zstd-compressed; the host decodes it and serves v2.
    let cms = publish(&env, "ns1", "plugin", &wasm_like("v2")).await?;
    let stored = cms
        .first()
        .and_then(|c| c.binary_data.as_ref())
        .and_then(|d| d.get("plugin.wasm"))
        .map(|b| b.0.clone())
        .unwrap_or_default();
    assert_eq!(cms.len(), 1);
    assert!(
        stored.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) && stored.len() < wasm_like("v2").len() / 10,
        "publish did not zstd-compress: {} bytes",
        stored.len()
    );
    let v2_digest = wr_engine::plugin_source::digest(&wasm_like("v2"));
    eventually("v2 active", 30, || async {
        (active_digest(&env, "widgets").await == Some(v2_digest.clone())).then_some(())
    })
    .await?;
    serving(&env, &v2, "v2", "w1", "1").await?;

    // zstd bomb: 256 MiB of zeros in ~8 KiB.
    let bomb = zstd_rle_bomb(256 << 20);
    assert!(bomb.len() < 16 << 10);
    // The frame is well-formed: a small one decodes to what it claims.
    assert_eq!(
        wr_engine::chunked::decode(zstd_rle_bomb(300 << 10), 1 << 20)?,
        vec![0u8; 300 << 10]
    );
    put_raw(&env, "ns1", "plugin", &bomb).await?;
    let m = wait_refused(&env, "widgets", "TooLarge").await?;
    assert!(m.contains("exceeds") && m.contains("keeps running"), "{m}");
    assert_eq!(
        active_digest(&env, "widgets").await,
        Some(v2_digest.clone())
    );
    serving(&env, &v2, "v2", "w1", "2").await?;

    // A truncated zstd stream.
    put_raw(&env, "ns1", "plugin", &stored[..stored.len() / 2]).await?;
    let m = wait_refused(&env, "widgets", "InvalidFormat").await?;
    assert!(m.contains("Zstd"), "{m}");
    assert_eq!(
        active_digest(&env, "widgets").await,
        Some(v2_digest.clone())
    );
    serving(&env, &v2, "v2", "w1", "3").await?;

    // gzip works as well.
    put_raw(&env, "ns1", "plugin", &gzip(&bytes_of("v3"))).await?;
    serving(&env, &v3, "v3", "w1", "4").await?;

    // A real component through publish (zstd) loads and is reported by digest.
    let real = wr_tests::plugins::plugin_bytes("static-site");
    let cms = publish(&env, "ns1", "plugin", &real).await?;
    assert_eq!(
        wr_engine::chunked::detect(&cms_blob(&cms)),
        wr_engine::chunked::Encoding::Zstd
    );
    let want = wr_engine::plugin_source::digest(&real);
    eventually("real component active", 60, || async {
        let (s, _, _) = condition(&env, "widgets", "PluginLoaded").await?;
        (s == "True" && active_digest(&env, "widgets").await == Some(want.clone())).then_some(())
    })
    .await?;
    env.stop_manager().await;
    Ok(())
}

/// The stored blob of a single-ConfigMap publish.
fn cms_blob(cms: &[k8s_openapi::api::core::v1::ConfigMap]) -> Vec<u8> {
    cms.first()
        .and_then(|c| c.binary_data.as_ref())
        .and_then(|d| d.get("plugin.wasm"))
        .map(|b| b.0.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_applied_before_its_chunks_is_refused_until_they_arrive() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let (v1, v2) = (versioned("v1"), versioned("v2"));
    // v2 is large and incompressible: publish chunks it.
    let big = inflate_component(b"\0asm\x0d\x00\x01\x00", 2 << 20);
    env.loader.register(&bytes_of("v1"), v1.clone());
    env.loader.register(&big, v2.clone());
    put_raw(&env, "ns1", "plugin", &bytes_of("v1")).await?;
    configmap_controller(&env, "widgets", "ns1", "plugin", json!({})).await?;
    env.start_manager();
    env.create_widget("ns1", "w1", json!({"value": "0"}))
        .await?;
    // A new value: the same one would be a no-op patch, and if the first
    // reconcile already ran, no call would follow it.
    still_serving(&env, &v1, "w1", "initial").await?;

    let cms = wr_engine::chunked::to_configmaps(
        &big,
        "plugin",
        &env.ns("ns1"),
        wr_engine::plugin_source::DEFAULT_KEY,
        wr_engine::chunked::PublishOptions::default(),
    )?;
    assert!(cms.len() >= 3, "{} ConfigMaps", cms.len());
    let (manifest, chunks) = cms
        .split_last()
        .ok_or_else(|| anyhow::anyhow!("no ConfigMaps"))?;
    // Half-applied set: the manifest first, then one chunk, the rest later.
    apply_configmaps(&env, std::slice::from_ref(manifest)).await?;
    let m = wait_refused(&env, "widgets", "ChunkSetIncomplete").await?;
    assert!(m.contains("chunk 0") && m.contains("missing"), "{m}");
    apply_configmaps(&env, &chunks[..1]).await?;
    eventually("chunk 1 reported missing", 30, || async {
        let (s, r, m) = condition(&env, "widgets", "PluginLoaded").await?;
        (s == "False" && r == "ChunkSetIncomplete" && m.contains("chunk 1 ")).then_some(())
    })
    .await?;
    assert_eq!(
        active_digest(&env, "widgets").await,
        Some(wr_engine::plugin_source::digest(&bytes_of("v1")))
    );
    still_serving(&env, &v1, "w1", "1").await?;
    assert_eq!(v2.calls(), 0);

    // The remaining chunks arrive: the host converges on v2 without another
    // change to the referenced ConfigMap (level-triggered).
    apply_configmaps(&env, &chunks[1..]).await?;
    let want = wr_engine::plugin_source::digest(&big);
    eventually("v2 active once complete", 30, || async {
        (active_digest(&env, "widgets").await == Some(want.clone())).then_some(())
    })
    .await?;
    serving(&env, &v2, "v2", "w1", "2").await?;
    env.stop_manager().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_18_mib_components_round_trip_through_publish_and_load() -> Result<()> {
    init_tracing();
    let mut env = Env::start_with_wasm().await?;
    env.namespace("ns1").await?;
    let real = wr_tests::plugins::plugin_bytes("static-site");
    // Mostly incompressible: ~21 chunks.
    let big = inflate_component(&real, 18 << 20);
    let cms = publish(&env, "ns1", "big-plugin", &big).await?;
    let first_set = cms.len();
    assert!(first_set >= 20, "{first_set} ConfigMaps");
    assert_eq!(manifest_of(&cms)?.size, big.len() as u64);
    configmap_controller(&env, "big", "ns1", "big-plugin", json!({})).await?;
    env.start_manager();
    let want = wr_engine::plugin_source::digest(&big);
    eventually("18 MiB component active", 120, || async {
        let (s, _, _) = condition(&env, "big", "PluginLoaded").await?;
        (s == "True" && active_digest(&env, "big").await == Some(want.clone())).then_some(())
    })
    .await?;
    // A second 18 MiB version that compresses (as real JavaScript/Python
    // components do): zstd, then chunked; hot-swapped in.
    let big2 = inflate_compressible(&real, 18 << 20);
    assert_eq!(big2.len(), big.len());
    let cms = publish(&env, "ns1", "big-plugin", &big2).await?;
    let m = manifest_of(&cms)?;
    assert_eq!(m.encoding, wr_engine::chunked::Encoding::Zstd);
    assert!(
        cms.len() >= 6 && cms.len() < first_set * 2 / 3,
        "{} ConfigMaps for the compressed version, {first_set} for the first",
        cms.len()
    );
    let want = wr_engine::plugin_source::digest(&big2);
    eventually("compressed 18 MiB component active", 120, || async {
        let (s, _, _) = condition(&env, "big", "PluginLoaded").await?;
        (s == "True" && active_digest(&env, "big").await == Some(want.clone())).then_some(())
    })
    .await?;
    env.stop_manager().await;
    Ok(())
}

fn manifest_of(
    cms: &[k8s_openapi::api::core::v1::ConfigMap],
) -> Result<wr_engine::chunked::Manifest> {
    let text = cms
        .last()
        .and_then(|c| c.data.as_ref())
        .and_then(|d| d.get(wr_engine::chunked::MANIFEST_KEY))
        .ok_or_else(|| anyhow::anyhow!("no manifest"))?;
    Ok(wr_engine::chunked::parse_manifest(text)?)
}

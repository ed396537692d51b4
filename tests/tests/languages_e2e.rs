//! The JavaScript, Python, C and Go ports of `static-site` reconciled end to end
//! by the real host (engine `Manager` + the production `WasmLoader`) against
//! the embedded API server, each loaded from ConfigMaps written by the
//! engine's `chunked::to_configmaps` (what `wasm-reconciler publish` writes;
//! the ~18 MB Python component does not fit one ConfigMap and is chunked;
//! the ~4 MB Go one fits one once compressed, or takes chunks when it does
//! not).
//!
//! One API server, one manager, five controllers: the Rust original (the
//! control) and the four ports, each with a parent kind of its own (the
//! example CRD under a per-language group) and a namespace of its own.
//! Twice, after creation and after a spec edit, each port must converge
//! (Ready=True for the current generation) to what the **Rust** component,
//! run in this test, answers for the same stored parent and observed
//! children: every field of its children is in the stored children (the API
//! server adds defaults), its status fields and conditions are on the parent,
//! and the edit raises its event. Then each port's stored children must equal
//! the Rust control's, defaults included, up to identity, namespace and
//! bookkeeping, so a field a port adds that Rust does not is caught too.
//!
//! Components come from `plugins/languages/build-all.sh`; the skip policy is
//! that of `languages_static_site` (`wr_tests::languages::components`).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use wr_engine::chunked::{self, MANIFEST_KEY, PublishOptions};
use wr_engine::diff::APPLIED_HASH_ANNOTATION;
use wr_engine::plugin_source::{DEFAULT_KEY, digest};
use wr_engine::wasm::WasmLoader;
use wr_engine::{Manager, WasmController};
use wr_runtime::{
    CallLimits, ConditionStatus, EventType, Plugin, PluginRuntime, ReconcileRequest,
    ReconcileResponse,
};
use wr_tests::cluster::{Env, eventually, install_crd, ready_of};
use wr_tests::languages::{Components, components, runtime_config};
use wr_tests::plugins::{plugin_bytes, workspace_root};

const PLUGIN: &str = "static-site";
/// Namespace of the plugin ConfigMaps.
const PLUGIN_NS: &str = "wr-plugins";
/// Name of every parent (each language has its own kind and namespace).
const SITE: &str = "web";
/// Seconds to wait for a controller's first Ready parent: covers a cold
/// compile of the Python component on a busy 2-core machine (tens of
/// seconds); the shared disk cache makes later runs fast.
const FIRST_READY_SECS: u64 = 300;
/// Seconds to wait for anything after the plugins are loaded.
const FOLLOW_SECS: u64 = 60;

fn init_tracing() {
    wr_tests::logs::init();
}

fn example(file: &str) -> Result<Value> {
    let path = workspace_root().join("examples/static-site").join(file);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// One language's controller, parent kind and component.
struct Port {
    lang: &'static str,
    bytes: Vec<u8>,
    /// Its namespace (`site-LANG`, mapped by `Env::ns` once the cluster runs).
    ns: String,
    /// Namespace of the plugin ConfigMaps (`PLUGIN_NS`, mapped likewise).
    plugin_ns: String,
}

impl Port {
    fn group(&self) -> String {
        format!("{}.examples.wasm-reconciler.dev", self.lang)
    }

    fn api_version(&self) -> String {
        format!("{}/v1alpha1", self.group())
    }

    fn new(lang: &'static str, bytes: Vec<u8>) -> Port {
        Port {
            lang,
            bytes,
            ns: format!("site-{lang}"),
            plugin_ns: PLUGIN_NS.into(),
        }
    }

    fn namespace(&self) -> String {
        self.ns.clone()
    }

    fn controller(&self) -> String {
        format!("static-site-{}", self.lang)
    }

    fn configmap(&self) -> String {
        format!("static-site-{}", self.lang)
    }

    fn site_ar(&self) -> ApiResource {
        ApiResource {
            group: self.group(),
            version: "v1alpha1".into(),
            api_version: self.api_version(),
            kind: "StaticSite".into(),
            plural: "staticsites".into(),
        }
    }

    fn sites(&self, env: &Env) -> Api<DynamicObject> {
        Api::namespaced_with(env.client.clone(), &self.namespace(), &self.site_ar())
    }

    /// The example CRD under this language's group.
    fn crd(&self) -> Result<Value> {
        let mut crd = example("crd.yaml")?;
        crd["metadata"]["name"] = json!(format!("staticsites.{}", self.group()));
        crd["spec"]["group"] = json!(self.group());
        Ok(crd)
    }

    /// The example WasmController, for this language's parent kind, loading
    /// the component from its ConfigMap. The example's limits stay, except a
    /// longer per-call timeout: the host under test is a debug build on a
    /// shared machine, and the point here is the result, not the speed.
    fn wasm_controller(&self) -> Result<Value> {
        let mut wc = example("controller.yaml")?;
        wc["metadata"]["name"] = json!(self.controller());
        wc["spec"]["parentResource"]["apiVersion"] = json!(self.api_version());
        wc["spec"]["plugin"]["configMap"] =
            json!({"name": self.configmap(), "namespace": self.plugin_ns, "key": DEFAULT_KEY});
        wc["spec"]["limits"]["timeoutMillis"] = json!(10_000);
        Ok(wc)
    }

    /// The example parent, as this language's kind in its namespace.
    fn site(&self) -> Result<DynamicObject> {
        let mut site = example("site.yaml")?;
        site["apiVersion"] = json!(self.api_version());
        site["metadata"]["namespace"] = json!(self.namespace());
        Ok(serde_json::from_value(site)?)
    }
}

/// Writes `cms` by server-side apply, in order (chunks before the manifest),
/// as `wasm-reconciler publish --apply` does.
async fn apply_configmaps(env: &Env, cms: &[ConfigMap]) -> Result<()> {
    let plugin_ns = env.ns(PLUGIN_NS);
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &plugin_ns);
    for cm in cms {
        let name = cm
            .metadata
            .name
            .clone()
            .context("ConfigMap without a name")?;
        api.patch(
            &name,
            &PatchParams::apply("wasm-reconciler-publish").force(),
            &Patch::Apply(cm),
        )
        .await
        .with_context(|| format!("applying ConfigMap {plugin_ns}/{name}"))?;
    }
    Ok(())
}

/// Publishes a port's component; returns how many ConfigMaps it took.
async fn publish(env: &Env, port: &Port) -> Result<usize> {
    let cms = chunked::to_configmaps(
        &port.bytes,
        &port.configmap(),
        &port.plugin_ns,
        DEFAULT_KEY,
        PublishOptions::default(),
    )
    .with_context(|| format!("{}: publishing", port.lang))?;
    let referenced = cms
        .iter()
        .find(|cm| cm.metadata.name.as_deref() == Some(port.configmap().as_str()))
        .context("no ConfigMap under the referenced name")?;
    let chunked = referenced
        .data
        .as_ref()
        .is_some_and(|d| d.contains_key(MANIFEST_KEY));
    ensure!(
        chunked == (cms.len() > 1),
        "{}: {} ConfigMaps but chunked={chunked}",
        port.lang,
        cms.len()
    );
    apply_configmaps(env, &cms).await?;
    Ok(cms.len())
}

fn child_apis(env: &Env, ns: &str) -> Vec<(Api<DynamicObject>, ApiResource)> {
    let ar = |group: &str, kind: &str, plural: &str| ApiResource {
        group: group.into(),
        version: "v1".into(),
        api_version: if group.is_empty() {
            "v1".into()
        } else {
            format!("{group}/v1")
        },
        kind: kind.into(),
        plural: plural.into(),
    };
    [
        ar("apps", "Deployment", "deployments"),
        ar("", "Service", "services"),
        ar("", "ConfigMap", "configmaps"),
    ]
    .into_iter()
    .map(|ar| (Api::namespaced_with(env.client.clone(), ns, &ar), ar))
    .collect()
}

/// The children of `parent` in the store (controller owner reference to its
/// uid), as JSON, keyed by (kind, name).
async fn stored_children(
    env: &Env,
    port: &Port,
    parent: &DynamicObject,
) -> Result<BTreeMap<(String, String), Value>> {
    let uid = parent.metadata.uid.clone().context("parent without uid")?;
    let mut out = BTreeMap::new();
    for (api, ar) in child_apis(env, &port.namespace()) {
        for mut obj in api.list(&ListParams::default()).await?.items {
            // A real API server leaves apiVersion/kind out of list items.
            obj.types.get_or_insert_with(|| kube::api::TypeMeta {
                api_version: ar.api_version.clone(),
                kind: ar.kind.clone(),
            });
            let controlled = obj
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.uid == uid && r.controller == Some(true));
            if controlled {
                let v = serde_json::to_value(&obj)?;
                out.insert(key_of(&v), v);
            }
        }
    }
    Ok(out)
}

fn key_of(obj: &Value) -> (String, String) {
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("").into();
    (s("/kind"), s("/metadata/name"))
}

/// True when every field of `want` is in `got` with the same value (arrays
/// element by element, same length). The API server fills in defaults
/// (`protocol: TCP`, a Deployment's `strategy`, ...) and the host adds
/// bookkeeping, so a stored child is a superset of what the plugin asked for.
fn contains(got: &Value, want: &Value) -> bool {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => w
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|gv| contains(gv, v))),
        (Value::Array(w), Value::Array(g)) => {
            w.len() == g.len() && w.iter().zip(g).all(|(wv, gv)| contains(gv, wv))
        }
        _ => want == got,
    }
}

/// A stored child without what differs between two parents' children that
/// are otherwise the same (identity, bookkeeping, owner references, the
/// namespace, an allocated cluster IP): what remains is what a plugin asked
/// for plus the API server's defaults. Comparing this for a port and for the
/// Rust control catches a field a port adds that Rust does not.
fn comparable(stored: &Value) -> Value {
    let mut v = stored.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
            "ownerReferences",
            "namespace",
        ] {
            meta.remove(k);
        }
        if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            // A hash of the applied object, which includes the namespace.
            annotations.remove(APPLIED_HASH_ANNOTATION);
            if annotations.is_empty() {
                meta.remove("annotations");
            }
        }
    }
    if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    v
}

/// What the Rust component answers for the stored parent and its stored
/// children, with the controller's config: the request the host builds.
async fn rust_answer(
    rust: &Plugin,
    config: &Value,
    parent: &DynamicObject,
    children: Vec<Value>,
) -> Result<ReconcileResponse> {
    let req = ReconcileRequest {
        parent: serde_json::to_value(parent)?,
        children,
        related: vec![],
        finalizing: false,
        config: Some(config.clone()),
        now: "2026-11-30T00:00:00Z".into(),
    };
    rust.reconcile(&req, &CallLimits::default())
        .await
        .map_err(|e| anyhow::anyhow!("the Rust plugin failed: {e}"))
}

/// Compares the port's parent and children in the store with the Rust
/// component's answer for them. `Ok(None)` when equal, else what differs.
async fn differences(
    env: &Env,
    port: &Port,
    rust: &Plugin,
    config: &Value,
) -> Result<Option<String>> {
    let parent = port.sites(env).get(SITE).await?;
    let stored = stored_children(env, port, &parent).await?;
    let want = rust_answer(rust, config, &parent, stored.values().cloned().collect()).await?;
    let mut diffs = Vec::new();

    let want_children: BTreeMap<_, _> = want.children.iter().map(|c| (key_of(c), c)).collect();
    for (key, want_child) in &want_children {
        match stored.get(key) {
            None => diffs.push(format!("child {key:?} missing")),
            Some(got) if !contains(got, want_child) => diffs.push(format!(
                "child {key:?}:\n  rust:   {want_child}\n  stored: {got}"
            )),
            Some(_) => {}
        }
    }
    for key in stored.keys().filter(|k| !want_children.contains_key(*k)) {
        diffs.push(format!("child {key:?} not desired by the Rust plugin"));
    }

    let status = parent.data.get("status").cloned().unwrap_or(Value::Null);
    for (k, v) in want
        .status
        .as_ref()
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if status.get(k) != Some(v) {
            diffs.push(format!("status.{k}: rust {v}, stored {:?}", status.get(k)));
        }
    }
    let conditions = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for c in &want.conditions {
        let want_status = match c.status {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        };
        let found = conditions.iter().any(|s| {
            s["type"] == c.type_.as_str()
                && s["status"] == want_status
                && s["reason"] == c.reason.as_str()
                && s["message"] == c.message.as_str()
        });
        if !found {
            diffs.push(format!(
                "condition {} {want_status} {}: {:?} not in {conditions:?}",
                c.type_, c.reason, c.message
            ));
        }
    }
    Ok((!diffs.is_empty()).then(|| diffs.join("\n")))
}

/// Waits until the port's parent is Ready=True for its current generation
/// and its store state equals the Rust answer; returns the parent.
async fn converged(
    env: &Env,
    port: &Port,
    rust: &Plugin,
    config: &Value,
    secs: u64,
) -> Result<DynamicObject> {
    let sites = port.sites(env);
    let mut last = String::from("never Ready");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Ok(site) = sites.get(SITE).await {
            match ready_of(&site) {
                Some((s, _, g)) if s == "True" && g.is_some() && g == site.metadata.generation => {
                    match differences(env, port, rust, config).await? {
                        None => return Ok(site),
                        Some(d) => last = d,
                    }
                }
                other => {
                    last = format!(
                        "Ready: {other:?}, generation {:?}",
                        site.metadata.generation
                    )
                }
            }
        }
        if tokio::time::Instant::now() > deadline {
            bail!(
                "{}: not converged to the Rust plugin's answer within {secs} s; last seen:\n{last}",
                port.lang
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The port's stored children, each reduced by [`comparable`].
async fn comparable_children(env: &Env, port: &Port) -> Result<BTreeMap<(String, String), Value>> {
    let parent = port.sites(env).get(SITE).await?;
    let stored = stored_children(env, port, &parent).await?;
    Ok(stored
        .into_iter()
        .map(|(k, v)| (k, comparable(&v)))
        .collect())
}

/// Checks that the port's children in the store equal those of the Rust
/// control's parent, up to [`comparable`]: same fields, same values, same
/// server defaults, nothing extra.
async fn same_as_control(env: &Env, port: &Port, control: &Port) -> Result<()> {
    let (mine, rust) = (
        comparable_children(env, port).await?,
        comparable_children(env, control).await?,
    );
    ensure!(
        mine.keys().eq(rust.keys()),
        "{}: children {:?}, the Rust control's {:?}",
        port.lang,
        mine.keys(),
        rust.keys()
    );
    for (key, want) in &rust {
        ensure!(
            mine.get(key) == Some(want),
            "{}: child {key:?} differs from the Rust control's:\n  rust: {want}\n  {}: {}",
            port.lang,
            port.lang,
            mine.get(key)
                .map_or_else(|| "missing".to_string(), Value::to_string)
        );
    }
    Ok(())
}

/// (type, reason, message) of the events about the port's parent.
async fn parent_events(env: &Env, port: &Port) -> Result<Vec<(String, String, String)>> {
    let api: Api<Event> = Api::namespaced(env.client.clone(), &port.namespace());
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some("StaticSite")
                && e.involved_object.name.as_deref() == Some(SITE)
        })
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default(),
            )
        })
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ports_reconcile_like_rust_through_the_host() -> Result<()> {
    init_tracing();
    let ports = match components(PLUGIN) {
        Components::Ready(ports) => ports,
        Components::Skipped(why) => {
            eprintln!("SKIPPED: {why}");
            return Ok(());
        }
    };
    let mut all = vec![Port::new("rust", plugin_bytes(PLUGIN))];
    all.extend(
        ports
            .into_iter()
            .map(|(lang, bytes)| Port::new(lang, bytes)),
    );

    // One runtime for the host and for the test's own Rust calls; its disk
    // cache is the one languages_static_site fills.
    let runtime = PluginRuntime::new(runtime_config()).context("runtime")?;
    let rust = runtime
        .load(&all[0].bytes)
        .context("loading the Rust plugin")?;
    let config = example("controller.yaml")?["spec"]["plugin"]["config"].clone();
    ensure!(
        config.is_object(),
        "the example controller has no plugin config"
    );

    let env = Env::start().await?;
    env.namespace(PLUGIN_NS).await?;
    for port in &mut all {
        port.ns = env.ns(&port.ns);
        port.plugin_ns = env.ns(PLUGIN_NS);
    }
    for port in &all {
        env.namespace(&port.namespace()).await?;
        install_crd(&env.client, port.crd()?).await?;
        let n = publish(&env, port).await?;
        eprintln!(
            "{}: {} bytes published as {n} ConfigMap(s)",
            port.lang,
            port.bytes.len()
        );
        if port.lang == "python" {
            assert!(
                n > 1,
                "the Python component ({} bytes) should need chunked ConfigMaps",
                port.bytes.len()
            );
        }
        env.create_controller(port.wasm_controller()?).await?;
    }

    let manager = Manager::new(
        env.engine_client.clone(),
        std::sync::Arc::new(WasmLoader::new(runtime.clone())),
        env.opts.clone(),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(manager.run(async move {
        let _ = stopped.await;
    }));

    // All parents at once: the components load (compile) concurrently.
    for port in &all {
        port.sites(&env)
            .create(&PostParams::default(), &port.site()?)
            .await
            .with_context(|| format!("{}: creating the parent", port.lang))?;
    }

    let wcs: Api<WasmController> = Api::all(env.client.clone());
    for port in &all {
        let site = converged(&env, port, &rust, &config, FIRST_READY_SECS).await?;
        assert_eq!(site.metadata.generation, Some(1), "{}", port.lang);
        // Proof that the host runs the component from the ConfigMap(s). The
        // host writes the WasmController's status after it started the
        // controller, so the parent can converge before the digest is there.
        let reported = eventually(
            &format!("{}: the controller's plugin digest", port.lang),
            FOLLOW_SECS,
            || async {
                wcs.get(&port.controller())
                    .await
                    .ok()?
                    .status?
                    .plugin_digest
            },
        )
        .await?;
        assert_eq!(
            reported,
            digest(&port.bytes),
            "{}: the controller does not run the published component",
            port.lang
        );
        eprintln!(
            "{}: converged, equal to the Rust plugin's answer",
            port.lang
        );
    }
    for port in &all[1..] {
        same_as_control(&env, port, &all[0]).await?;
    }

    // Edit every parent's spec: scale and change the content. The children
    // follow, and the content change raises the Rust plugin's event.
    let edit = json!({"spec": {
        "replicas": 3,
        "content": {"index.html": "<h1>edited</h1>", "about.html": "ünïcode €"}
    }});
    let mut want_events = Vec::new();
    for port in &all {
        let sites = port.sites(&env);
        let before = sites.get(SITE).await?;
        let observed: Vec<Value> = stored_children(&env, port, &before)
            .await?
            .into_values()
            .collect();
        let edited = sites
            .patch(SITE, &PatchParams::default(), &Patch::Merge(&edit))
            .await?;
        want_events.push(rust_answer(&rust, &config, &edited, observed).await?.events);
    }
    for (port, events) in all.iter().zip(&want_events) {
        let site = converged(&env, port, &rust, &config, FOLLOW_SECS).await?;
        assert_eq!(site.metadata.generation, Some(2), "{}", port.lang);
        let deployment = stored_children(&env, port, &site)
            .await?
            .remove(&("Deployment".into(), SITE.into()))
            .context("no Deployment")?;
        assert_eq!(deployment["spec"]["replicas"], 3, "{}", port.lang);
        assert!(
            !events.is_empty(),
            "the Rust plugin raises no event on a content change"
        );
        for e in events {
            let want = (
                match e.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_string(),
                e.reason.clone(),
                e.message.clone(),
            );
            eventually(
                &format!("{}: event {want:?}", port.lang),
                FOLLOW_SECS,
                || async {
                    parent_events(&env, port)
                        .await
                        .ok()?
                        .contains(&want)
                        .then_some(())
                },
            )
            .await?;
        }
        eprintln!("{}: followed the spec edit like the Rust plugin", port.lang);
    }
    for port in &all[1..] {
        same_as_control(&env, port, &all[0]).await?;
    }

    let _ = stop.send(());
    task.await
        .context("manager task")?
        .map_err(|e| anyhow::anyhow!("manager: {e}"))?;
    Ok(())
}

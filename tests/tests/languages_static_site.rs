//! The static-site plugin ported to JavaScript, Python, C and Go gives the same
//! answer as the Rust original on the same inputs: every fixture of
//! `tests/fixtures/static-site` plus edge cases that exercise the SDKs
//! (name hashing, validation messages, UTF-8 sizes, config errors).
//!
//! Outputs are compared as data (key order ignored). The components come
//! from `plugins/languages/build-all.sh`. A missing component skips the test
//! (printing why) on a developer machine without the toolchains, and fails it
//! under CI (`CI` set) or with `WR_REQUIRE_LANGUAGES=1` (see
//! `wr_tests::languages::components`).

use std::sync::OnceLock;

use serde_json::{Value, json};
use wr_runtime::{CallLimits, Plugin, PluginRuntime, ReconcileRequest};
use wr_tests::languages::{Components, DEFAULT_NOW, Outcome, components, fixtures, runtime_config};
use wr_tests::plugins::plugin_bytes;

const PLUGIN: &str = "static-site";

/// One runtime for both tests, so each component is compiled once per test
/// process; its disk cache (shared with `languages_e2e`) keeps reruns from
/// recompiling the 18 MB Python component at all.
fn runtime() -> PluginRuntime {
    static RUNTIME: OnceLock<PluginRuntime> = OnceLock::new();
    RUNTIME
        .get_or_init(|| PluginRuntime::new(runtime_config()).expect("runtime"))
        .clone()
}

/// Generous limits: the point here is equal answers, not speed (the
/// interpreters are slow in an unoptimised test build of the host).
fn limits() -> CallLimits {
    CallLimits {
        timeout: std::time::Duration::from_secs(30),
        max_memory_bytes: 256 << 20,
        ..CallLimits::default()
    }
}

async fn call(plugin: &Plugin, req: &ReconcileRequest) -> Outcome {
    plugin.reconcile(req, &limits()).await.into()
}

fn parent(name: &str, namespace: Option<&str>, spec: Value) -> Value {
    let mut metadata = json!({ "name": name, "generation": 2 });
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    json!({ "apiVersion": "examples.wasm-reconciler.dev/v1alpha1", "kind": "StaticSite", "metadata": metadata, "spec": spec })
}

fn request(parent: Value, children: Vec<Value>, config: Option<Value>) -> ReconcileRequest {
    ReconcileRequest {
        parent,
        children,
        related: vec![],
        finalizing: false,
        config,
        now: DEFAULT_NOW.into(),
    }
}

/// Inputs beyond the fixtures, chosen where a port most easily diverges.
fn edge_cases() -> Vec<(&'static str, ReconcileRequest)> {
    let site = |spec: Value| request(parent("web", Some("demo"), spec), vec![], None);
    let deployment = |available: Value| json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "web", "namespace": "demo" }, "status": { "availableReplicas": available } });
    let hash_cm = |hash: &str| json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "web-content", "annotations": { "static-site.examples.wasm-reconciler.dev/content-hash": hash } } });
    vec![
        (
            "long name is cut and hashed",
            request(
                parent(&"a".repeat(70), Some("demo"), json!({ "image": "x" })),
                vec![],
                None,
            ),
        ),
        (
            "invalid characters are hashed",
            request(
                parent("My.Site_ü", Some("demo"), json!({ "image": "x" })),
                vec![],
                None,
            ),
        ),
        (
            "cluster-scoped parent",
            request(
                parent("web", None, json!({ "image": "x", "port": 81 })),
                vec![],
                None,
            ),
        ),
        (
            "no metadata.name",
            request(
                json!({ "kind": "StaticSite", "spec": { "image": "x" } }),
                vec![],
                None,
            ),
        ),
        (
            "unicode content",
            site(
                json!({ "image": "x", "content": { "b.html": "héllo €", "a.txt": "\u{1F600}\n", "Z.css": "" } }),
            ),
        ),
        (
            "content over the limit",
            site(json!({ "image": "x", "content": { "a.html": "€".repeat(349_526) } })),
        ),
        ("blank image", site(json!({ "image": " \t " }))),
        ("image not a string", site(json!({ "image": 3 }))),
        (
            "replicas not an integer",
            site(json!({ "image": "x", "replicas": 1.5 })),
        ),
        (
            "replicas a string",
            site(json!({ "image": "x", "replicas": "two" })),
        ),
        (
            "replicas a boolean",
            site(json!({ "image": "x", "replicas": true })),
        ),
        (
            "port too large",
            site(json!({ "image": "x", "port": 70000 })),
        ),
        (
            "bad file name",
            site(json!({ "image": "x", "content": { "ok.html": "", "a/b\"c": "" } })),
        ),
        (
            "file not a string",
            site(json!({ "image": "x", "content": { "a.html": [1] } })),
        ),
        (
            "content not a map",
            site(json!({ "image": "x", "content": "index.html" })),
        ),
        (
            "spec not an object",
            request(parent("web", Some("demo"), json!("nope")), vec![], None),
        ),
        (
            "scaled to zero",
            request(
                parent("web", Some("demo"), json!({ "image": "x", "replicas": 0 })),
                vec![deployment(json!(0))],
                None,
            ),
        ),
        (
            "all replicas available",
            request(
                parent("web", Some("demo"), json!({ "image": "x", "replicas": 3 })),
                vec![deployment(json!(5))],
                None,
            ),
        ),
        (
            "availableReplicas not a number",
            request(
                parent("web", Some("demo"), json!({ "image": "x", "replicas": 3 })),
                vec![deployment(json!("3"))],
                None,
            ),
        ),
        (
            "same content observed",
            request(
                parent("web", Some("demo"), json!({ "image": "x" })),
                vec![hash_cm(
                    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                )],
                None,
            ),
        ),
        (
            "changed content observed",
            request(
                parent("web", Some("demo"), json!({ "image": "x" })),
                vec![hash_cm("old")],
                None,
            ),
        ),
        (
            "config null",
            request(
                parent("web", Some("demo"), json!({ "image": "x" })),
                vec![],
                Some(Value::Null),
            ),
        ),
        (
            "config unknown field",
            request(
                parent("web", Some("demo"), json!({ "image": "x" })),
                vec![],
                Some(json!({ "clusterDomain": "a", "extra": 1 })),
            ),
        ),
        (
            "config wrong type",
            request(
                parent("web", Some("demo"), json!({ "image": "x" })),
                vec![],
                Some(json!({ "clusterDomain": false })),
            ),
        ),
        (
            "config not an object",
            request(
                parent("web", Some("demo"), json!({ "image": "x" })),
                vec![],
                Some(json!("domain")),
            ),
        ),
        (
            "config an integer",
            request(
                parent("web", Some("demo"), json!({ "image": "x" })),
                vec![],
                Some(json!(7)),
            ),
        ),
        (
            "config an empty sequence",
            request(
                parent("web", Some("demo"), json!({ "image": "x" })),
                vec![],
                Some(json!([])),
            ),
        ),
        (
            "config a sequence",
            request(
                parent("web", Some("demo"), json!({ "image": "x" })),
                vec![],
                Some(json!(["seq.local"])),
            ),
        ),
        (
            "config a long sequence",
            request(
                parent("web", Some("demo"), json!({ "image": "x" })),
                vec![],
                Some(json!(["a", "b"])),
            ),
        ),
        (
            "config a sequence of the wrong type",
            request(
                parent("web", Some("demo"), json!({ "image": "x" })),
                vec![],
                Some(json!([1.5])),
            ),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn ports_match_the_rust_plugin() {
    let ports = match components(PLUGIN) {
        Components::Ready(ports) => ports,
        Components::Skipped(why) => {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
    let rt = runtime();
    let rust = rt
        .load(&plugin_bytes(PLUGIN))
        .expect("load the Rust plugin");
    let mut cases: Vec<(String, ReconcileRequest)> = fixtures(PLUGIN)
        .into_iter()
        .map(|f| (format!("fixture {}", f.name), f.request))
        .collect();
    assert!(
        cases.len() >= 3,
        "expected the static-site fixtures, found {}",
        cases.len()
    );
    cases.extend(edge_cases().into_iter().map(|(n, r)| (n.to_string(), r)));

    let mut expected = Vec::new();
    for (name, req) in &cases {
        let outcome = call(&rust, req).await;
        assert!(
            !matches!(outcome, Outcome::Fault(_)),
            "{name}: the Rust plugin faulted: {outcome:?}"
        );
        expected.push(outcome);
    }
    let mut mismatches = Vec::new();
    for (lang, bytes) in &ports {
        let plugin = rt
            .load(bytes)
            .unwrap_or_else(|e| panic!("{lang}: the host cannot load the {PLUGIN} component: {e}"));
        for ((name, req), want) in cases.iter().zip(&expected) {
            let got = call(&plugin, req).await;
            if &got != want {
                mismatches.push(format!(
                    "{lang} / {name}:\n  rust: {want:?}\n  {lang}: {got:?}"
                ));
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

/// Beyond agreeing with Rust, each port matches the hand-written expected
/// outputs of the fixtures directly (guards against a broken Rust build
/// making every comparison vacuous).
#[tokio::test(flavor = "multi_thread")]
async fn ports_match_the_fixture_expectations() {
    let ports = match components(PLUGIN) {
        Components::Ready(ports) => ports,
        Components::Skipped(why) => {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
    let rt = runtime();
    for (lang, bytes) in &ports {
        let plugin = rt.load(bytes).unwrap_or_else(|e| panic!("{lang}: {e}"));
        for fixture in fixtures(PLUGIN) {
            let result = plugin.reconcile(&fixture.request, &limits()).await;
            let where_ = format!("{lang} / fixture {}", fixture.name);
            if let Ok(text) = std::fs::read_to_string(fixture.dir.join("expected.yaml")) {
                let want: wr_runtime::ReconcileResponse = serde_yaml::from_str(&text)
                    .unwrap_or_else(|e| panic!("{where_}: expected.yaml: {e}"));
                match result {
                    Ok(got) => assert_eq!(got, want, "{where_}"),
                    Err(e) => panic!("{where_}: expected a response, got {e}"),
                }
            } else {
                let text = std::fs::read_to_string(fixture.dir.join("expected-error.txt"))
                    .unwrap_or_else(|e| panic!("{where_}: {e}"));
                let mut lines = text.lines();
                let code: u8 = lines
                    .next()
                    .and_then(|l| l.trim().parse().ok())
                    .unwrap_or_else(|| panic!("{where_}: bad exit code line"));
                let needle = lines.next().unwrap_or_default().trim();
                match result {
                    Ok(got) => panic!("{where_}: expected an error, got {got:?}"),
                    Err(e) => {
                        assert_eq!(e.exit_code(), code, "{where_}: {e}");
                        assert!(
                            e.to_string().contains(needle),
                            "{where_}: {e:?} does not contain {needle:?}"
                        );
                    }
                }
            }
        }
    }
}

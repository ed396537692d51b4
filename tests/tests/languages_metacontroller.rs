//! Existing Metacontroller hooks run unchanged (issue 18 item 7): the
//! `noticeboard` example hook, written in Metacontroller's sync/finalize hook
//! shapes, built as a component in JavaScript and Python with the SDKs'
//! Metacontroller wrapper, gives the hand-written expected responses of
//! `tests/fixtures/noticeboard` when the host calls it. The fixtures are
//! chosen so that each field of the mapping shows in the answer:
//!
//! - request: `controller` (its name labels the children, its hook version
//!   picks the keys), `children` keyed by `Kind.apiVersion` then by name (v1)
//!   or namespace/name (v2) and present when empty, `related` keyed the same
//!   way (the default message), `finalizing` (the finalize hook runs);
//! - response: `children`, `status` (minus `conditions`), `status.conditions`
//!   → conditions, `resyncAfterSeconds` 1.5 → requeue 2 s (0 → none),
//!   `finalized`.
//!
//! A missing component skips (printing why) on a developer machine and fails
//! under CI, as in `languages_static_site`.

use std::sync::OnceLock;

use wr_runtime::{CallLimits, PluginRuntime, ReconcileResponse};
use wr_tests::languages::{Components, components_in, fixtures, runtime_config};

const PLUGIN: &str = "noticeboard";

fn runtime() -> PluginRuntime {
    static RUNTIME: OnceLock<PluginRuntime> = OnceLock::new();
    RUNTIME
        .get_or_init(|| PluginRuntime::new(runtime_config()).expect("runtime"))
        .clone()
}

/// Generous limits: the interpreters are slow in an unoptimised test build.
fn limits() -> CallLimits {
    CallLimits {
        timeout: std::time::Duration::from_secs(30),
        max_memory_bytes: 256 << 20,
        ..CallLimits::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn hooks_in_metacontroller_shape_give_the_expected_responses() {
    let ports = match components_in(PLUGIN, &["js", "python"]) {
        Components::Ready(ports) => ports,
        Components::Skipped(why) => {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
    let cases = fixtures(PLUGIN);
    assert!(cases.len() >= 5, "expected the noticeboard fixtures");
    let rt = runtime();
    let mut mismatches = Vec::new();
    for (lang, bytes) in &ports {
        let plugin = rt
            .load(bytes)
            .unwrap_or_else(|e| panic!("{lang}: the host cannot load the {PLUGIN} component: {e}"));
        for case in &cases {
            let text = std::fs::read_to_string(case.dir.join("expected.yaml"))
                .unwrap_or_else(|e| panic!("{}: {e}", case.dir.display()));
            let want: ReconcileResponse = serde_yaml::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: expected.yaml: {e}", case.name));
            match plugin.reconcile(&case.request, &limits()).await {
                Ok(got) if got == want => {}
                Ok(got) => mismatches.push(format!(
                    "{lang} / {}:\n  want: {want:?}\n  got:  {got:?}",
                    case.name
                )),
                Err(e) => mismatches.push(format!("{lang} / {}: error {e}", case.name)),
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

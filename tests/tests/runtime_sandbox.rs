//! Adversarial plugins against the runtime: every misbehaviour is stopped and
//! classified, the host survives, and the next call on a good plugin works.

use std::time::Duration;

use serde_json::{Value, json};
use wr_runtime::{
    CallError, CallLimits, FaultKind, LoadError, Plugin, PluginRuntime, ReconcileRequest,
    RuntimeConfig,
};
use wr_tests::plugins::plugin_bytes;

fn runtime() -> PluginRuntime {
    PluginRuntime::new(RuntimeConfig {
        cache_dir: None,
        max_instances: 8,
        max_memory_bytes: 128 << 20,
    })
    .unwrap()
}

fn request(config: Value) -> ReconcileRequest {
    ReconcileRequest {
        parent: json!({ "apiVersion": "v1", "kind": "Thing", "metadata": { "name": "p", "namespace": "ns" } }),
        children: vec![],
        related: vec![],
        finalizing: false,
        config: Some(config),
        now: "2026-01-15T12:00:00Z".into(),
    }
}

/// Limits for calls whose outcome is not about time. The timeout is wide: a
/// debug-built host that copies 3 MB of capped log lines, or a 2 MB response,
/// took over 500 ms on a loaded 2-core machine, and the call was then
/// reported as a Timeout instead of what the test looks at.
fn limits() -> CallLimits {
    CallLimits {
        timeout: Duration::from_secs(30),
        max_memory_bytes: 32 << 20,
        fuel: None,
        max_response_bytes: 1 << 20,
    }
}

/// A good plugin still answers correctly.
async fn assert_good_plugin_works(good: &Plugin) {
    let req = ReconcileRequest {
        parent: json!({
            "apiVersion": "examples.wasm-reconciler.dev/v1alpha1", "kind": "StaticSite",
            "metadata": { "name": "web", "namespace": "demo" },
            "spec": { "image": "nginx:1.27" },
        }),
        ..request(Value::Null)
    };
    let req = ReconcileRequest {
        config: None,
        ..req
    };
    let resp = good.reconcile(&req, &CallLimits::default()).await.unwrap();
    assert_eq!(resp.children.len(), 3);
}

/// [`limits`] with a short timeout, for plugins that loop until stopped.
fn timing_out() -> CallLimits {
    CallLimits {
        timeout: Duration::from_millis(500),
        ..limits()
    }
}

fn fault_kind(result: Result<wr_runtime::ReconcileResponse, CallError>) -> (FaultKind, String) {
    match result {
        Err(CallError::Fault { kind, message }) => (kind, message),
        other => panic!("expected a fault, got {other:?}"),
    }
}

#[tokio::test]
async fn misbehaving_plugins_are_stopped_and_classified() {
    let rt = runtime();
    let bad = rt.load(&plugin_bytes("adversarial")).unwrap();
    let good = rt.load(&plugin_bytes("static-site")).unwrap();

    let cases: Vec<(Value, CallLimits, FaultKind, &str)> = vec![
        (
            json!({"mode": "loop"}),
            timing_out(),
            FaultKind::Timeout,
            "timeout",
        ),
        (
            json!({"mode": "loop"}),
            CallLimits {
                fuel: Some(5_000_000),
                timeout: Duration::from_secs(30),
                ..limits()
            },
            FaultKind::FuelExhausted,
            "fuel",
        ),
        (
            json!({"mode": "oom"}),
            limits(),
            FaultKind::MemoryLimit,
            "memory",
        ),
        (json!({"mode": "panic"}), limits(), FaultKind::Trap, "trap"),
        (json!({"mode": "stack"}), limits(), FaultKind::Trap, "trap"),
        (
            json!({"mode": "bad-json"}),
            limits(),
            FaultKind::InvalidOutput,
            "children[0]",
        ),
        (
            json!({"mode": "not-object"}),
            limits(),
            FaultKind::InvalidOutput,
            "status",
        ),
        (
            json!({"mode": "huge", "bytes": 2_000_000}),
            limits(),
            FaultKind::ResponseTooLarge,
            "over the cap",
        ),
    ];
    for (config, call_limits, want, needle) in cases {
        let (kind, message) =
            fault_kind(bad.reconcile(&request(config.clone()), &call_limits).await);
        assert_eq!(kind, want, "{config}: {message}");
        assert!(
            message.contains(needle),
            "{config}: {message:?} lacks {needle:?}"
        );
        assert_good_plugin_works(&good).await;
    }
}

#[tokio::test]
async fn plugin_errors_pass_through() {
    let rt = runtime();
    let bad = rt.load(&plugin_bytes("adversarial")).unwrap();
    match bad
        .reconcile(&request(json!({"mode": "permanent"})), &limits())
        .await
    {
        Err(CallError::Permanent { reason, .. }) => assert_eq!(reason, "InvalidSpec"),
        other => panic!("{other:?}"),
    }
    match bad
        .reconcile(&request(json!({"mode": "transient"})), &limits())
        .await
    {
        Err(CallError::Transient { reason, .. }) => assert_eq!(reason, "NotReady"),
        other => panic!("{other:?}"),
    }
}

async fn probe(mode: &str) -> Value {
    let rt = runtime();
    let bad = rt.load(&plugin_bytes("adversarial")).unwrap();
    let resp = bad
        .reconcile(&request(json!({ "mode": mode })), &limits())
        .await
        .unwrap();
    resp.status.unwrap()
}

#[tokio::test]
async fn files_are_not_reachable() {
    let status = probe("read-file").await;
    assert!(status["file"]["error"].is_string(), "{status}");
    assert!(status["file"].get("read").is_none(), "{status}");
    assert!(status["dir"]["error"].is_string(), "{status}");
}

#[tokio::test]
async fn environment_and_arguments_are_empty() {
    let status = probe("read-env").await;
    assert_eq!(status["vars"], json!([]), "{status}");
    assert_eq!(status["args"], json!([]), "{status}");
    assert_eq!(status["home"], Value::Null, "{status}");
}

#[tokio::test]
async fn clocks_are_frozen_and_randomness_is_constant() {
    let a = probe("read-clock").await;
    let b = probe("read-clock").await;
    // 2000-01-01T00:00:00Z: the documented fixed instant, not the real time.
    assert_eq!(a["wallSeconds"], json!(946_684_800u64), "{a}");
    assert_eq!(a["monotonicNanos"], json!(0), "{a}");
    assert_eq!(
        a["randomHash"], b["randomHash"],
        "random keys differ between calls"
    );
}

/// A fresh instance per call, even though the host reuses one memory slot
/// and resets only the pages a call dirtied (`PAGEMAP_SCAN` where the kernel
/// has it): statics a call changed are back to their initial values.
#[tokio::test]
async fn nothing_a_call_writes_survives_into_the_next() {
    // One instance slot: every call reuses the same memory.
    let rt = PluginRuntime::new(RuntimeConfig {
        cache_dir: None,
        max_instances: 1,
        max_memory_bytes: 128 << 20,
    })
    .unwrap();
    let plugin = rt.load(&plugin_bytes("adversarial")).unwrap();
    for call in 0..5 {
        let status = plugin
            .reconcile(&request(json!({ "mode": "remember" })), &limits())
            .await
            .unwrap()
            .status
            .unwrap();
        assert_eq!(status, json!({ "calls": 0, "mark": 0x5eed }), "call {call}");
    }
}

#[tokio::test]
async fn log_and_output_floods_are_capped_not_fatal() {
    let status = probe("log-spam").await;
    assert_eq!(status["spammed"], json!(true));
}

#[tokio::test]
async fn components_that_do_not_fit_the_world_are_rejected_at_load() {
    let rt = runtime();
    let unknown_import = r#"(component
        (import "evil:net/socket@1.0.0" (instance (export "connect" (func))))
    )"#;
    match rt.load(unknown_import.as_bytes()) {
        Err(LoadError::UnknownImport { import, .. }) => assert_eq!(import, "evil:net/socket@1.0.0"),
        other => panic!("{other:?}"),
    }

    // What a default componentize-js (StarlingMonkey) build imports for fetch():
    // refused with the import named and the documented fix.
    let wasi_http = r#"(component
        (import "wasi:http/outgoing-handler@0.2.3" (instance (export "handle" (func))))
    )"#;
    let err = rt.load(wasi_http.as_bytes()).unwrap_err();
    assert!(
        matches!(&err, LoadError::UnknownImport { import, .. } if import == "wasi:http/outgoing-handler@0.2.3"),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("disableFeatures")
            && text.contains("\"http\"")
            && text.contains("\"fetch-event\""),
        "{text}"
    );

    let no_export = r#"(component (core module $m) (core instance (instantiate $m)))"#;
    let err = rt.load(no_export.as_bytes()).unwrap_err();
    assert!(matches!(err, LoadError::WorldMismatch { .. }), "{err:?}");
    assert!(
        err.to_string().contains("missing export `reconcile"),
        "{err}"
    );

    let wrong_type = r#"(component
        (core module $m (func (export "f")))
        (core instance $i (instantiate $m))
        (func (export "reconcile") (canon lift (core func $i "f")))
    )"#;
    let err = rt.load(wrong_type.as_bytes()).unwrap_err();
    assert!(matches!(err, LoadError::WorldMismatch { .. }), "{err:?}");
    assert!(err.to_string().contains("wrong type"), "{err}");
    assert!(
        std::error::Error::source(&err).is_some(),
        "wasmtime's type error is the source: {err:?}"
    );

    let core_module = b"\0asm\x01\0\0\0";
    let Err(err) = rt.load(core_module) else {
        panic!("a core module must not load")
    };
    assert!(matches!(err, LoadError::Compile(_)), "{err:?}");
    // wasmtime's error is kept as the source, and its text is in the message.
    let source = std::error::Error::source(&err).expect("Compile has a source");
    assert!(err.to_string().contains(&source.to_string()), "{err}");

    let good = rt.load(&plugin_bytes("static-site")).unwrap();
    assert_good_plugin_works(&good).await;
}

#[tokio::test]
async fn concurrent_calls_share_one_plugin() {
    let rt = runtime();
    let bad = rt.load(&plugin_bytes("adversarial")).unwrap();
    let good = rt.load(&plugin_bytes("static-site")).unwrap();
    let mut tasks = Vec::new();
    for i in 0..6 {
        let (bad, good) = (bad.clone(), good.clone());
        tasks.push(tokio::spawn(async move {
            if i % 2 == 0 {
                let r = bad
                    .reconcile(&request(json!({"mode": "loop"})), &timing_out())
                    .await;
                assert!(
                    matches!(
                        r,
                        Err(CallError::Fault {
                            kind: FaultKind::Timeout,
                            ..
                        })
                    ),
                    "{r:?}"
                );
            } else {
                assert_good_plugin_works(&good).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// A plugin that loops does not hold the executor thread: on a single-threaded
/// tokio runtime another task keeps running while the loop burns its budget
/// (the call yields at every epoch tick), and the loop is still stopped as a
/// timeout. Before cooperative yielding the other task could not run at all
/// until the call ended.
#[tokio::test(flavor = "current_thread")]
async fn a_looping_plugin_does_not_starve_other_tasks() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    let rt = runtime();
    let bad = rt.load(&plugin_bytes("adversarial")).unwrap();
    let ticks = Arc::new(AtomicU32::new(0));
    let ticker = {
        let ticks = Arc::clone(&ticks);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                ticks.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // Let the ticker start.
    tokio::task::yield_now().await;
    let looping = CallLimits {
        timeout: Duration::from_secs(1),
        ..limits()
    };
    let (kind, _) = fault_kind(
        bad.reconcile(&request(json!({"mode": "loop"})), &looping)
            .await,
    );
    let during = ticks.load(Ordering::Relaxed);
    ticker.abort();
    assert_eq!(kind, FaultKind::Timeout);
    // ~100 ticks of 10 ms fit in the 1 s budget; 0 or 1 would mean the loop
    // held the thread. 5 leaves room for a heavily loaded machine.
    assert!(
        during >= 5,
        "the other task ran only {during} times during a 1 s looping call"
    );
}

/// More calls than instance slots wait for one instead of failing: with one
/// slot, a plugin that loops until its timeout holds it while three other
/// calls queue behind it, and all three then succeed. (Without the runtime's
/// slot semaphore the pooling allocator refused them as faults.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beyond_the_instance_pool_wait_for_a_slot() {
    let rt = PluginRuntime::new(RuntimeConfig {
        cache_dir: None,
        max_instances: 1,
        max_memory_bytes: 128 << 20,
    })
    .unwrap();
    let plugin = rt.load(&plugin_bytes("adversarial")).unwrap();
    let looping = {
        let plugin = plugin.clone();
        tokio::spawn(async move {
            let limits = CallLimits {
                timeout: Duration::from_millis(300),
                ..limits()
            };
            plugin
                .reconcile(&request(json!({"mode": "loop"})), &limits)
                .await
        })
    };
    // Give the looping call the slot first (ordering only, nothing is timed).
    tokio::time::sleep(Duration::from_millis(50)).await;
    let waiting: Vec<_> = (0..3)
        .map(|i| {
            let plugin = plugin.clone();
            tokio::spawn(async move {
                plugin
                    .reconcile(
                        &request(json!({"mode": "ok", "name": format!("c{i}")})),
                        &limits(),
                    )
                    .await
            })
        })
        .collect();
    let (kind, _) = fault_kind(looping.await.unwrap());
    assert_eq!(kind, FaultKind::Timeout);
    for w in waiting {
        let answer = w.await.unwrap();
        assert!(
            answer.is_ok(),
            "a call waiting for a slot failed: {answer:?}"
        );
    }
}

/// An abandoned call (its reconcile cancelled by shutdown, a lost lease or a
/// caller's own timeout) is aborted on the runtime's call pool and frees its
/// instance slot: with one slot, a looping call with a 600 s budget is
/// dropped, and the next call gets the slot instead of waiting out that
/// budget. (Calls run on a pool task since issue 15; without aborting it on
/// drop, the loop would keep the slot for the whole budget.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_call_frees_its_instance_slot() {
    let rt = PluginRuntime::new(RuntimeConfig {
        cache_dir: None,
        max_instances: 1,
        max_memory_bytes: 128 << 20,
    })
    .unwrap();
    let bad = rt.load(&plugin_bytes("adversarial")).unwrap();
    let good = rt.load(&plugin_bytes("static-site")).unwrap();
    let for_ages = CallLimits {
        timeout: Duration::from_secs(600),
        ..limits()
    };
    let looping = request(json!({"mode": "loop"}));
    // Drop the looping call once it runs (it cannot finish on its own).
    let abandoned = tokio::time::timeout(
        Duration::from_millis(300),
        bad.reconcile(&looping, &for_ages),
    )
    .await;
    assert!(
        abandoned.is_err(),
        "the looping call returned: {abandoned:?}"
    );
    // A bound so that a slot still held fails the test instead of hanging it.
    tokio::time::timeout(Duration::from_secs(120), assert_good_plugin_works(&good))
        .await
        .expect("the abandoned call still holds the only instance slot");
}

//! A plugin that misbehaves on purpose, for the runtime's acceptance tests.
//! `config.mode` picks the behaviour:
//!
//! | mode | behaviour |
//! | --- | --- |
//! | `ok` | one ConfigMap named after the parent, status `{"ok": true}` |
//! | `loop` | spins forever (stopped by the timeout or fuel) |
//! | `oom` | allocates 1 MiB blocks until memory runs out |
//! | `stack` | unbounded recursion |
//! | `panic` | panics (a trap, since plugins build with `panic = "abort"`) |
//! | `bad-json` | returns a child that is not JSON |
//! | `not-object` | returns a status that is JSON but not an object |
//! | `huge` | returns one child of `config.bytes` bytes (default 8 MiB) |
//! | `read-file` | tries to read `/etc/passwd` and list `/`; reports what it got |
//! | `read-env` | reports the environment variables and arguments it sees |
//! | `read-clock` | reports wall-clock seconds, a monotonic delta and a random-keyed hash |
//! | `log-spam` | logs and prints a lot (more than the host's caps) |
//! | `permanent` / `transient` | returns that error |
//! | `flaky` | the chaos suite's healthy logic: one ConfigMap per `spec.keys`, transient failure on `config.failPercent` % of calls ([`chaos`]) |
//! | `hostile` | the chaos suite's hostile logic: per call one of loop, memory bomb, trap, oversized or invalid output, or a plain child |
//! | `remember` | reports, then changes, a zero-initialised and a non-zero-initialised static: a later call that sees the change would break "a fresh instance per call" |
//! | `echo` | returns the parent's `spec.response` as is (children, conditions, status): the shared invalid-output fixtures (`tests/fixtures/invalid-output`) |
//!
//! It implements the generated `Guest` trait directly (not the SDK's
//! `Reconciler`) so that it can return output the SDK would never produce.

pub mod chaos;

use std::hash::{BuildHasher, Hasher};

use wr_plugin_sdk::bindings::{self, ReconcileError, ReconcileRequest, ReconcileResponse};
use wr_plugin_sdk::{LogLevel, Value, json, log};

use bindings::wasm_reconciler::plugin::types::ErrorDetail;

/// The plugin.
pub struct Adversarial;

impl bindings::Guest for Adversarial {
    // Several modes put `now` into their output.
    fn info() -> bindings::PluginInfo {
        bindings::PluginInfo { reads_now: true }
    }

    fn reconcile(request: ReconcileRequest) -> Result<ReconcileResponse, ReconcileError> {
        run(&request)
    }
}

fn response(children: Vec<String>, status: Option<Value>) -> ReconcileResponse {
    ReconcileResponse {
        children,
        conditions: Vec::new(),
        status: status.map(|s| s.to_string()),
        requeue_after_seconds: None,
        events: Vec::new(),
        finalized: false,
    }
}

fn detail(reason: &str, message: &str) -> ErrorDetail {
    ErrorDetail {
        reason: reason.into(),
        message: message.into(),
    }
}

/// Dispatches on `config.mode`.
pub fn run(request: &ReconcileRequest) -> Result<ReconcileResponse, ReconcileError> {
    let config: Value = request
        .config
        .as_deref()
        .and_then(|c| serde_json::from_str(c).ok())
        .unwrap_or(Value::Null);
    let mode = config.get("mode").and_then(Value::as_str).unwrap_or("ok");
    match mode {
        "ok" => {
            let parent: Value = serde_json::from_str(&request.parent).unwrap_or(Value::Null);
            let name = parent
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("unnamed");
            let child = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name }, "data": { "now": request.now } });
            Ok(response(
                vec![child.to_string()],
                Some(json!({ "ok": true })),
            ))
        }
        "loop" => {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        "oom" => {
            let mut blocks: Vec<Vec<u8>> = Vec::new();
            loop {
                blocks.push(std::hint::black_box(vec![1u8; 1 << 20]));
            }
        }
        "stack" => Ok(response(vec![], Some(json!({ "depth": recurse(0) })))),
        "panic" => panic!("adversarial plugin panics on purpose"),
        "bad-json" => Ok(response(
            vec!["{\"kind\": \"ConfigMap\", oops".into()],
            None,
        )),
        "not-object" => Ok(ReconcileResponse {
            status: Some("[1, 2, 3]".into()),
            ..response(vec![], None)
        }),
        "huge" => {
            let bytes = config
                .get("bytes")
                .and_then(Value::as_u64)
                .unwrap_or(8 << 20) as usize;
            let child = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "huge" }, "data": { "x": "a".repeat(bytes) } });
            Ok(response(vec![child.to_string()], None))
        }
        "read-file" => {
            let file = match std::fs::read_to_string("/etc/passwd") {
                Ok(text) => json!({ "read": text.len() }),
                Err(e) => json!({ "error": e.to_string() }),
            };
            let dir = match std::fs::read_dir("/") {
                Ok(entries) => json!({ "entries": entries.count() }),
                Err(e) => json!({ "error": e.to_string() }),
            };
            let cwd = std::env::current_dir()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            Ok(response(
                vec![],
                Some(json!({ "file": file, "dir": dir, "cwd": cwd })),
            ))
        }
        "read-env" => {
            let vars: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
            let args: Vec<String> = std::env::args().collect();
            Ok(response(
                vec![],
                Some(json!({ "vars": vars, "args": args, "home": std::env::var("HOME").ok() })),
            ))
        }
        "read-clock" => {
            let wall = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            let start = std::time::Instant::now();
            let mut spin: u64 = 0;
            for i in 0..1_000_000u64 {
                spin = std::hint::black_box(spin.wrapping_add(i));
            }
            let elapsed = start.elapsed().as_nanos() as u64;
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u64(42);
            Ok(response(
                vec![],
                Some(
                    json!({ "wallSeconds": wall, "monotonicNanos": elapsed, "randomHash": hasher.finish().to_string() }),
                ),
            ))
        }
        "log-spam" => {
            let line = "x".repeat(1000);
            for _ in 0..1000 {
                log(LogLevel::Info, &line);
                println!("{line}");
                eprintln!("{line}");
            }
            Ok(response(vec![], Some(json!({ "spammed": true }))))
        }
        "permanent" => Err(ReconcileError::Permanent(detail(
            "InvalidSpec",
            "spec.x: bad",
        ))),
        "transient" => Err(ReconcileError::Transient(detail("NotReady", "try later"))),
        "flaky" => chaos::flaky(request, &config),
        "hostile" => chaos::hostile(request, &config),
        "remember" => {
            use std::sync::atomic::{AtomicU64, Ordering};
            // One in .bss, one in .data (the memory image): both must read
            // their initial values in every call, however often the host
            // reuses the memory slot.
            static CALLS: AtomicU64 = AtomicU64::new(0);
            static MARK: AtomicU64 = AtomicU64::new(0x5eed);
            let calls = CALLS.fetch_add(1, Ordering::Relaxed);
            let mark = MARK.swap(calls + 1, Ordering::Relaxed);
            Ok(response(
                vec![],
                Some(json!({ "calls": calls, "mark": mark })),
            ))
        }
        "echo" => Ok(echo(request)),
        other => Err(ReconcileError::Permanent(detail(
            "UnknownMode",
            &format!("unknown mode {other:?}"),
        ))),
    }
}

/// The parent's `spec.response` (`children`: objects, `conditions`:
/// `{type, status, reason, message}`, `status`: any JSON) as the response,
/// whatever it says: output only a contract-breaking plugin would produce.
fn echo(request: &ReconcileRequest) -> ReconcileResponse {
    use bindings::wasm_reconciler::plugin::types::{Condition, ConditionStatus};
    let parent: Value = serde_json::from_str(&request.parent).unwrap_or(Value::Null);
    let spec = parent
        .pointer("/spec/response")
        .cloned()
        .unwrap_or(Value::Null);
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let children = spec
        .get("children")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(Value::to_string).collect())
        .unwrap_or_default();
    let conditions = spec
        .get("conditions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| Condition {
                    type_: text(c, "type"),
                    status: match c.get("status").and_then(Value::as_str) {
                        Some("True") => ConditionStatus::True,
                        Some("False") => ConditionStatus::False,
                        _ => ConditionStatus::Unknown,
                    },
                    reason: text(c, "reason"),
                    message: text(c, "message"),
                })
                .collect()
        })
        .unwrap_or_default();
    ReconcileResponse {
        conditions,
        ..response(children, spec.get("status").cloned())
    }
}

#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let deeper = std::hint::black_box(depth + 1);
    if deeper == 0 {
        return 0;
    }
    recurse(deeper) + 1
}

wr_plugin_sdk::bindings::__export_reconciler_world!(Adversarial with_types_in wr_plugin_sdk::bindings);

#[cfg(test)]
mod tests {
    use super::*;

    fn req(config: &str) -> ReconcileRequest {
        ReconcileRequest {
            parent: r#"{"metadata":{"name":"p"}}"#.into(),
            children: vec![],
            related: vec![],
            finalizing: false,
            config: Some(config.into()),
            now: "2026-01-01T00:00:00Z".into(),
        }
    }

    #[test]
    fn remember_mode_sees_what_an_earlier_call_in_the_same_process_wrote() {
        // Natively nothing resets the statics: the second call sees the
        // first one's writes, which is what the mode detects in a component.
        let status = |out: ReconcileResponse| -> Value {
            serde_json::from_str(out.status.as_deref().unwrap()).unwrap()
        };
        let first = status(run(&req(r#"{"mode":"remember"}"#)).unwrap());
        let second = status(run(&req(r#"{"mode":"remember"}"#)).unwrap());
        assert_eq!(first, json!({ "calls": 0, "mark": 0x5eed }));
        assert_eq!(second, json!({ "calls": 1, "mark": 1 }));
    }

    #[test]
    fn ok_mode_names_the_child_after_the_parent() {
        let out = run(&req(r#"{"mode":"ok"}"#)).unwrap();
        assert_eq!(
            out.children,
            vec![r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p"},"data":{"now":"2026-01-01T00:00:00Z"}}"#.to_string()]
        );
    }

    #[test]
    fn bad_json_mode_really_returns_invalid_json() {
        let out = run(&req(r#"{"mode":"bad-json"}"#)).unwrap();
        assert!(serde_json::from_str::<Value>(&out.children[0]).is_err());
    }

    #[test]
    fn error_modes() {
        assert!(matches!(
            run(&req(r#"{"mode":"permanent"}"#)),
            Err(ReconcileError::Permanent(_))
        ));
        assert!(matches!(
            run(&req(r#"{"mode":"transient"}"#)),
            Err(ReconcileError::Transient(_))
        ));
    }
}

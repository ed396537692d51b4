//! The chaos suite's modes (issue 7): `flaky`, a healthy controller's logic
//! that fails transiently on a deterministic fraction of calls, and `hostile`,
//! which picks a misbehaviour per call.
//!
//! Both are pure: every decision is a hash of the request (parent uid,
//! resourceVersion, the frozen `now`), so a replayed request behaves the same.
//! The hash is FNV-1a, not `RandomState`, which is seeded per instance.

use wr_plugin_sdk::bindings::{ReconcileError, ReconcileRequest, ReconcileResponse};
use wr_plugin_sdk::{Value, json};

use crate::{detail, response};

/// The version this component reports in its children and status. The chaos
/// harness makes "version 2" of the plugin by rewriting the last two bytes of
/// this marker in the built component (same length, so the binary stays
/// valid): a different digest whose output differs observably.
pub static VERSION_MARKER: &str = "wr-chaos-plugin-version:v1";

/// Label on every child: the parent's name.
pub const PARENT_LABEL: &str = "chaos.wasm-reconciler.dev/parent";
/// Label on every child: the plugin version that wrote it.
pub const VERSION_LABEL: &str = "chaos.wasm-reconciler.dev/version";

/// FNV-1a over the parts, with a separator so ("ab","c") != ("a","bc").
pub fn fnv1a(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0xff)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// The version suffix of [`VERSION_MARKER`] (`v1` unless the bytes were rewritten).
pub fn version() -> String {
    // black_box: the compiler must read the bytes at run time, so a rewrite
    // of the data segment is what the plugin reports.
    let marker: &str = std::hint::black_box(VERSION_MARKER);
    marker.rsplit(':').next().unwrap_or("unknown").to_string()
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// `flaky`: for a parent `{spec: {keys: [k...], value: v}}`, one ConfigMap
/// `<parent>-<k>` per key with `data {key, value, version}` and the two labels;
/// status `{children, pluginVersion}`. Fails transiently when
/// `hash(uid, resourceVersion, now) % 100 < config.failPercent`. Finalizes at once.
pub fn flaky(
    request: &ReconcileRequest,
    config: &Value,
) -> Result<ReconcileResponse, ReconcileError> {
    let parent: Value = serde_json::from_str(&request.parent)
        .map_err(|e| ReconcileError::Permanent(detail("BadParent", &e.to_string())))?;
    let fail_percent = config
        .get("failPercent")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let roll = fnv1a(&[
        str_at(&parent, "/metadata/uid"),
        str_at(&parent, "/metadata/resourceVersion"),
        &request.now,
    ]) % 100;
    if roll < fail_percent {
        return Err(ReconcileError::Transient(detail(
            "ChaosFlake",
            "injected transient failure",
        )));
    }
    if request.finalizing {
        return Ok(ReconcileResponse {
            finalized: true,
            ..response(vec![], None)
        });
    }
    let name = str_at(&parent, "/metadata/name");
    let value = str_at(&parent, "/spec/value");
    let version = version();
    let keys: Vec<&str> = parent
        .pointer("/spec/keys")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let children: Vec<String> = keys
        .iter()
        .map(|key| {
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": format!("{name}-{key}"),
                    "labels": { PARENT_LABEL: name, VERSION_LABEL: version },
                },
                "data": { "key": key, "value": value, "version": version },
            })
            .to_string()
        })
        .collect();
    let status = json!({ "children": children.len(), "pluginVersion": version });
    Ok(response(children, Some(status)))
}

/// What `hostile` does on one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misbehaviour {
    Loop,
    MemoryBomb,
    Trap,
    Oversized,
    InvalidJson,
    Ok,
}

/// The misbehaviour for a request: a hash of parent name, resourceVersion and `now`.
pub fn pick(parent: &Value, now: &str) -> Misbehaviour {
    let h = fnv1a(&[
        str_at(parent, "/metadata/name"),
        str_at(parent, "/metadata/resourceVersion"),
        now,
    ]);
    match h % 6 {
        0 => Misbehaviour::Loop,
        1 => Misbehaviour::MemoryBomb,
        2 => Misbehaviour::Trap,
        3 => Misbehaviour::Oversized,
        4 => Misbehaviour::InvalidJson,
        _ => Misbehaviour::Ok,
    }
}

/// `hostile`: an infinite loop, a memory bomb, a trap, an oversized child
/// (`config.bytes`, default 8 MiB), invalid JSON, or a plain ConfigMap
/// named after the parent — chosen per call by [`pick`].
pub fn hostile(
    request: &ReconcileRequest,
    config: &Value,
) -> Result<ReconcileResponse, ReconcileError> {
    let parent: Value = serde_json::from_str(&request.parent).unwrap_or(Value::Null);
    let name = str_at(&parent, "/metadata/name").to_string();
    match pick(&parent, &request.now) {
        Misbehaviour::Loop => {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        Misbehaviour::MemoryBomb => {
            let mut blocks: Vec<Vec<u8>> = Vec::new();
            loop {
                blocks.push(std::hint::black_box(vec![1u8; 1 << 20]));
            }
        }
        Misbehaviour::Trap => panic!("hostile plugin traps on purpose"),
        Misbehaviour::Oversized => {
            let bytes = config
                .get("bytes")
                .and_then(Value::as_u64)
                .unwrap_or(8 << 20) as usize;
            let child = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name }, "data": { "x": "a".repeat(bytes) } });
            Ok(response(vec![child.to_string()], None))
        }
        Misbehaviour::InvalidJson => Ok(response(
            vec!["{\"kind\": \"ConfigMap\", oops".into()],
            None,
        )),
        Misbehaviour::Ok => {
            let child = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name }, "data": { "ok": "true" } });
            Ok(response(
                vec![child.to_string()],
                Some(json!({ "ok": true })),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(parent: Value, now: &str, finalizing: bool) -> ReconcileRequest {
        ReconcileRequest {
            parent: parent.to_string(),
            children: vec![],
            related: vec![],
            finalizing,
            config: None,
            now: now.into(),
        }
    }

    fn parent(rv: &str) -> Value {
        json!({"metadata": {"name": "p1", "uid": "u-1", "resourceVersion": rv},
               "spec": {"keys": ["a", "c"], "value": "x"}})
    }

    #[test]
    fn flaky_without_failures_builds_one_configmap_per_key() {
        let out = flaky(&req(parent("5"), "2026-01-01T00:00:00Z", false), &json!({})).unwrap();
        let kids: Vec<Value> = out
            .children
            .iter()
            .map(|c| serde_json::from_str(c).unwrap())
            .collect();
        assert_eq!(kids.len(), 2);
        assert_eq!(kids[0]["metadata"]["name"], "p1-a");
        assert_eq!(kids[1]["metadata"]["name"], "p1-c");
        assert_eq!(kids[1]["data"]["value"], "x");
        assert_eq!(kids[1]["data"]["version"], "v1");
        assert_eq!(kids[0]["metadata"]["labels"][PARENT_LABEL], "p1");
        assert_eq!(version(), "v1");
    }

    #[test]
    fn flaky_failures_are_deterministic_and_near_the_rate() {
        let cfg = json!({"failPercent": 30});
        let mut failed = 0;
        for i in 0..1000 {
            let r = req(parent(&i.to_string()), "2026-01-01T00:00:00Z", false);
            let a = flaky(&r, &cfg).is_err();
            assert_eq!(a, flaky(&r, &cfg).is_err(), "same request, same outcome");
            failed += usize::from(a);
        }
        assert!(
            (200..400).contains(&failed),
            "{failed} of 1000 failed at 30%"
        );
        assert!(flaky(&req(parent("1"), "t", false), &json!({"failPercent": 100})).is_err());
    }

    #[test]
    fn flaky_finalizes_at_once() {
        let out = flaky(&req(parent("1"), "t", true), &json!({})).unwrap();
        assert!(out.finalized && out.children.is_empty());
    }

    #[test]
    fn hostile_picks_every_misbehaviour() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..200 {
            seen.insert(format!("{:?}", pick(&parent(&i.to_string()), "t")));
        }
        assert_eq!(seen.len(), 6, "{seen:?}");
    }
}

//! Helpers for the hot-reload tests: plugin ConfigMaps, WasmControllers that
//! reference them, and reading what the host reports (status, events).

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use wr_engine::WasmController;

use crate::cluster::{Env, TEST_GROUP, eventually};

/// Server-side applies `cms` in order (as `wasm-reconciler publish --apply` does).
pub async fn apply_configmaps(env: &Env, cms: &[ConfigMap]) -> Result<()> {
    for cm in cms {
        let ns = cm.metadata.namespace.clone().context("namespace")?;
        let name = cm.metadata.name.clone().context("name")?;
        let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
        api.patch(
            &name,
            &PatchParams::apply("publish").force(),
            &Patch::Apply(cm),
        )
        .await
        .with_context(|| format!("applying ConfigMap {ns}/{name}"))?;
    }
    Ok(())
}

/// Publishes `component` as ConfigMap(s) `name` in `ns` (compressing/chunking as needed).
pub async fn publish(env: &Env, ns: &str, name: &str, component: &[u8]) -> Result<Vec<ConfigMap>> {
    let cms = wr_engine::chunked::to_configmaps(
        component,
        name,
        &env.ns(ns),
        wr_engine::plugin_source::DEFAULT_KEY,
        wr_engine::chunked::PublishOptions::default(),
    )?;
    apply_configmaps(env, &cms).await?;
    Ok(cms)
}

/// Writes raw `bytes` (no checks, no compression) into `binaryData["plugin.wasm"]`.
pub async fn put_raw(env: &Env, ns: &str, name: &str, bytes: &[u8]) -> Result<()> {
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": env.ns(ns)},
        "binaryData": {"plugin.wasm": base64_encode(bytes)}
    }))?;
    apply_configmaps(env, &[cm]).await
}

fn base64_encode(b: &[u8]) -> String {
    // k8s-openapi's ByteString serialises as base64; reuse it rather than a crate.
    serde_json::to_value(k8s_openapi::ByteString(b.to_vec()))
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A Widget controller whose plugin comes from ConfigMap `ns/cm`; `extra` is
/// merged into `spec.plugin` (sha256 pin, rollback policy).
pub async fn configmap_controller(
    env: &Env,
    name: &str,
    ns: &str,
    cm: &str,
    extra: Value,
) -> Result<()> {
    let mut plugin = json!({"configMap": {"name": cm, "namespace": env.ns(ns)}});
    if let (Some(p), Some(e)) = (plugin.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            p.insert(k.clone(), v.clone());
        }
    }
    env.create_controller(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1",
        "kind": "WasmController",
        "metadata": {"name": name},
        "spec": {
            "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": plugin,
            "resyncPeriodSeconds": 3600,
            "maxConcurrentReconciles": 8
        }
    }))
    .await
}

/// The WasmController `name`.
pub async fn controller(env: &Env, name: &str) -> Result<WasmController> {
    let api: Api<WasmController> = Api::all(env.client.clone());
    Ok(api.get(name).await?)
}

/// (status, reason, message) of condition `type_` of WasmController `name`.
pub async fn condition(env: &Env, name: &str, type_: &str) -> Option<(String, String, String)> {
    let wc = controller(env, name).await.ok()?;
    let c = wc
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status, c.reason, c.message))
}

/// `status.pluginDigest` of WasmController `name`.
pub async fn active_digest(env: &Env, name: &str) -> Option<String> {
    controller(env, name).await.ok()?.status?.plugin_digest
}

/// Events about WasmController `name` (they live in `default`: it is
/// cluster-scoped), of this very object (by uid: on a shared real cluster an
/// earlier test's controller of the same name left its events there too).
pub async fn controller_events(env: &Env, name: &str) -> Vec<(String, String, String)> {
    let uid = controller(env, name)
        .await
        .ok()
        .and_then(|c| c.metadata.uid);
    let api: Api<Event> = Api::namespaced(env.client.clone(), "default");
    api.list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter(|e| {
                    e.involved_object.kind.as_deref() == Some("WasmController")
                        && e.involved_object.name.as_deref() == Some(name)
                        && e.involved_object.uid == uid
                })
                .map(|e| {
                    (
                        e.type_.unwrap_or_default(),
                        e.reason.unwrap_or_default(),
                        e.message.unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A valid component made `target` bytes large by appending a custom section of
/// incompressible filler (custom sections are legal anywhere in a component and
/// ignored by the runtime) — stands in for a JavaScript/Python component.
pub fn inflate_component(component: &[u8], target: usize) -> Vec<u8> {
    let name = b"wr-test-filler";
    let filler_len = target.saturating_sub(component.len() + name.len() + 12);
    let mut payload = Vec::with_capacity(name.len() + 1 + filler_len);
    payload.push(name.len() as u8);
    payload.extend_from_slice(name);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..filler_len {
        // xorshift: cheap bytes that compression cannot shrink.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        payload.push((x >> 24) as u8);
    }
    let mut out = component.to_vec();
    out.push(0); // custom section id
    leb128(&mut out, payload.len() as u64);
    out.extend_from_slice(&payload);
    out
}

fn leb128(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Like [`inflate_component`] but with filler zstd can shrink to about half
/// (random bytes from a 16-symbol alphabet), so `publish` stores it
/// zstd-compressed — real JavaScript/Python components compress similarly.
pub fn inflate_compressible(component: &[u8], target: usize) -> Vec<u8> {
    let mut out = inflate_component(component, target);
    let start = out
        .len()
        .saturating_sub(target.saturating_sub(component.len() + 64));
    for b in &mut out[start..] {
        *b = b'a' + (*b & 0x0f);
    }
    out
}

/// A zstd frame that decodes to `size` zero bytes, a few bytes per 128 KiB
/// (RLE blocks, RFC 8878 §3.1.1.2): a compression bomb no zstd encoder
/// library is needed to build.
pub fn zstd_rle_bomb(size: usize) -> Vec<u8> {
    const BLOCK: usize = 128 << 10;
    // Magic, frame header descriptor (no content size, no checksum, no
    // dictionary, not single-segment), window descriptor 2^(10+7) = 128 KiB.
    let mut out = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 7 << 3];
    let mut left = size.max(1);
    while left > 0 {
        let n = left.min(BLOCK);
        left -= n;
        let last = u32::from(left == 0);
        // Block header: last-block bit, block type 1 (RLE), block size = repeat count.
        let header = ((n as u32) << 3) | (1 << 1) | last;
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.push(0); // the repeated byte
    }
    out
}

/// Waits (up to `secs`) for an event of `type_` and `reason` about
/// WasmController `name` and returns its message. The host records events
/// after the condition they go with, so a test that waited for the condition
/// must still wait for the event (a single read loses that race on a real
/// kube-apiserver).
pub async fn wait_controller_event(
    env: &Env,
    name: &str,
    type_: &str,
    reason: &str,
    secs: u64,
) -> Result<String> {
    eventually(
        &format!("{type_} event {reason} on {name}"),
        secs,
        || async {
            controller_events(env, name)
                .await
                .into_iter()
                .find(|(t, r, _)| t == type_ && r == reason)
                .map(|(_, _, m)| m)
        },
    )
    .await
}

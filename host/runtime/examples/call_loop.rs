//! Calls a plugin component N times on the runtime bench's request
//! (static-site, parent + 10 observed children; `benches/plugin_runtime.rs`):
//! a harness for instruction counts of one call under valgrind, which the
//! bench (thousands of calls) is too long for.
//!
//!     cargo build -p wr-runtime --example call_loop
//!     valgrind --tool=callgrind --smc-check=all \
//!         --toggle-collect='*call_loop::calls*' \
//!         target/debug/examples/call_loop static_site.wasm 20
//!
//! One warm-up call runs outside `calls` (the compile and first-call set-up
//! are not the call); `WR_CALL_LOOP_CACHE=<dir>` keeps the compiled component
//! between runs, so the one under valgrind does not compile it.

#[path = "../benches/common/mod.rs"]
mod common;

use common::request;
use wr_runtime::{CallLimits, Plugin, PluginRuntime, ReconcileRequest, RuntimeConfig};

/// The counted calls; returns the number of children answered.
#[inline(never)]
fn calls(
    rt: &tokio::runtime::Runtime,
    plugin: &Plugin,
    req: &ReconcileRequest,
    n: usize,
) -> Result<usize, String> {
    let limits = CallLimits::default();
    let mut children = 0;
    for _ in 0..n {
        let resp = rt
            .block_on(plugin.reconcile(req, &limits))
            .map_err(|e| format!("call: {e}"))?;
        children += resp.children.len();
    }
    Ok(children)
}

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: call_loop COMPONENT.wasm [CALLS]")?;
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let bytes = std::fs::read(&path).map_err(|e| format!("reading {path}: {e}"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio: {e}"))?;
    // One instance slot: the pooling allocator's address-space reservation
    // must fit in what valgrind can map.
    let runtime = PluginRuntime::new(RuntimeConfig {
        max_instances: 1,
        max_memory_bytes: 64 << 20,
        cache_dir: std::env::var_os("WR_CALL_LOOP_CACHE").map(Into::into),
    })
    .map_err(|e| format!("runtime: {e}"))?;
    let plugin = runtime.load(&bytes).map_err(|e| format!("load: {e}"))?;
    let req = request();
    rt.block_on(plugin.reconcile(&req, &CallLimits::default()))
        .map_err(|e| format!("warm-up call: {e}"))?;
    let children = calls(&rt, &plugin, &req, n)?;
    println!("{n} calls, {children} children");
    Ok(())
}

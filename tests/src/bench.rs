//! Small helpers the bench binaries share: memory figures from `/proc` and the
//! example StaticSite resource they all drive.

use kube::api::{ApiResource, GroupVersionKind};

/// A `Vm*:` field (e.g. `"VmRSS:"`, `"VmHWM:"`) of `/proc/<pid>/status`
/// (`None`: this process) in KiB; 0 when unreadable.
pub fn status_kib(pid: Option<u32>, field: &str) -> u64 {
    let path = pid.map_or_else(
        || "/proc/self/status".to_string(),
        |p| format!("/proc/{p}/status"),
    );
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Resident set size of this process, KiB.
pub fn rss_kib() -> u64 {
    status_kib(None, "VmRSS:")
}

/// Peak resident set size of this process, KiB.
pub fn hwm_kib() -> u64 {
    status_kib(None, "VmHWM:")
}

/// The example StaticSite parent resource (`examples/static-site/crd.yaml`).
pub fn static_site_ar() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("examples.wasm-reconciler.dev", "v1alpha1", "StaticSite"),
        "staticsites",
    )
}

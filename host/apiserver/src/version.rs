//! The Kubernetes version this server implements and reports on `/version`.
//!
//! It is the version k8s-openapi is built for (the workspace's `v1_NN`
//! feature), so the types that decode, validate and describe built-in
//! objects and the version clients see cannot drift apart. The referee
//! kube-apiserver (`tests/kube`) is built at the same minor version.

macro_rules! implemented {
    ($minor:literal, $patch:literal, $previous:literal) => {
        /// Minor version, as in `/version`'s `minor`.
        pub const KUBERNETES_MINOR: &str = $minor;
        /// The oldest minor this one is compatible with (`minCompatibilityMinor`).
        pub const KUBERNETES_MIN_COMPATIBILITY_MINOR: &str = $previous;
        /// `gitVersion` on `/version`: a plain release version, so version
        /// dispatchers (kubectl wrappers pick a client within the supported
        /// skew) and `kubectl version` treat it like a real cluster. The patch
        /// level is the one the generated tables (`go_json.txt`,
        /// `patch_hints.txt`, the protobuf descriptors) and the referee in
        /// `tests/kube` are pinned to.
        pub const KUBERNETES_VERSION: &str = concat!("v1.", $minor, ".", $patch);
    };
}

k8s_openapi::k8s_if_1_33! { implemented!("33", "0", "32"); }
k8s_openapi::k8s_if_1_34! { implemented!("34", "0", "33"); }
k8s_openapi::k8s_if_1_35! { implemented!("35", "0", "34"); }
k8s_openapi::k8s_if_1_36! { implemented!("36", "0", "35"); }
k8s_openapi::k8s_if_1_37! { implemented!("37", "2", "36"); }

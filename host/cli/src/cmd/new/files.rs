//! The files `new` writes: templates (`host/cli/templates/`) and the SDKs
//! and WIT of this repository, compiled into the binary so that `new` works
//! offline from any directory. `tests::embedded_sdks_are_complete` fails when
//! an SDK gains a file that is not listed here.

/// (path in the project, contents); `{{...}}` placeholders are filled by `new`.
pub type Files = &'static [(&'static str, &'static str)];

/// Every project: README, controller, example, golden tests, the WIT.
pub const COMMON: Files = &[
    (
        "README.md",
        include_str!("../../../templates/common/README.md"),
    ),
    (
        ".gitignore",
        include_str!("../../../templates/common/gitignore"),
    ),
    (
        "controller.yaml",
        include_str!("../../../templates/common/controller.yaml"),
    ),
    (
        "example.yaml",
        include_str!("../../../templates/common/example.yaml"),
    ),
    (
        "tests/hello/parent.yaml",
        include_str!("../../../templates/common/tests/hello/parent.yaml"),
    ),
    (
        "tests/hello/expected.yaml",
        include_str!("../../../templates/common/tests/hello/expected.yaml"),
    ),
    (
        "tests/invalid-spec/parent.yaml",
        include_str!("../../../templates/common/tests/invalid-spec/parent.yaml"),
    ),
    (
        "tests/invalid-spec/expected.yaml",
        include_str!("../../../templates/common/tests/invalid-spec/expected.yaml"),
    ),
    (
        "wit/reconciler.wit",
        include_str!("../../../../../wit/reconciler.wit"),
    ),
];

/// Rust: a cdylib crate and the vendored SDK crate (contract 0.2.0).
pub const RUST: Files = &[
    (
        "wit/0.2.0/reconciler.wit",
        include_str!("../../../../../wit/0.2.0/reconciler.wit"),
    ),
    (
        "Cargo.toml",
        include_str!("../../../templates/rust/Cargo.toml"),
    ),
    ("build.sh", include_str!("../../../templates/rust/build.sh")),
    (
        "src/lib.rs",
        include_str!("../../../templates/rust/src/lib.rs"),
    ),
    (
        "sdk/Cargo.toml",
        include_str!("../../../templates/rust/sdk-Cargo.toml"),
    ),
    (
        "sdk/src/__private.rs",
        include_str!("../../../../../plugins/sdk/src/__private.rs"),
    ),
    (
        "sdk/src/alloc.rs",
        include_str!("../../../../../plugins/sdk/src/alloc.rs"),
    ),
    (
        "sdk/src/customize.rs",
        include_str!("../../../../../plugins/sdk/src/customize.rs"),
    ),
    (
        "sdk/src/error.rs",
        include_str!("../../../../../plugins/sdk/src/error.rs"),
    ),
    (
        "sdk/src/lib.rs",
        include_str!("../../../../../plugins/sdk/src/lib.rs"),
    ),
    (
        "sdk/src/log.rs",
        include_str!("../../../../../plugins/sdk/src/log.rs"),
    ),
    (
        "sdk/src/names.rs",
        include_str!("../../../../../plugins/sdk/src/names.rs"),
    ),
    (
        "sdk/src/object.rs",
        include_str!("../../../../../plugins/sdk/src/object.rs"),
    ),
    (
        "sdk/src/request.rs",
        include_str!("../../../../../plugins/sdk/src/request.rs"),
    ),
    (
        "sdk/src/response.rs",
        include_str!("../../../../../plugins/sdk/src/response.rs"),
    ),
];

/// JavaScript (componentize-qjs): sources, the vendored SDK, the toolchain pin.
pub const JS: Files = &[
    (
        "package.json",
        include_str!("../../../templates/js/package.json"),
    ),
    ("build.sh", include_str!("../../../templates/js/build.sh")),
    (
        "src/plugin.js",
        include_str!("../../../templates/js/src/plugin.js"),
    ),
    (
        "src/component.js",
        include_str!("../../../templates/js/src/component.js"),
    ),
    (
        "src/plugin.test.js",
        include_str!("../../../templates/js/src/plugin.test.js"),
    ),
    (
        "tools/package.json",
        include_str!("../../../../../plugins/js/package.json"),
    ),
    (
        "tools/package-lock.json",
        include_str!("../../../../../plugins/js/package-lock.json"),
    ),
    (
        "sdk/errors.js",
        include_str!("../../../../../plugins/js/sdk/errors.js"),
    ),
    (
        "sdk/export.js",
        include_str!("../../../../../plugins/js/sdk/export.js"),
    ),
    (
        "sdk/index.js",
        include_str!("../../../../../plugins/js/sdk/index.js"),
    ),
    (
        "sdk/metacontroller.js",
        include_str!("../../../../../plugins/js/sdk/metacontroller.js"),
    ),
    (
        "sdk/names.js",
        include_str!("../../../../../plugins/js/sdk/names.js"),
    ),
    (
        "sdk/object.js",
        include_str!("../../../../../plugins/js/sdk/object.js"),
    ),
    (
        "sdk/request.js",
        include_str!("../../../../../plugins/js/sdk/request.js"),
    ),
    (
        "sdk/response.js",
        include_str!("../../../../../plugins/js/sdk/response.js"),
    ),
    (
        "sdk/rust.js",
        include_str!("../../../../../plugins/js/sdk/rust.js"),
    ),
    (
        "sdk/sha256.js",
        include_str!("../../../../../plugins/js/sdk/sha256.js"),
    ),
    (
        "sdk/utf8.js",
        include_str!("../../../../../plugins/js/sdk/utf8.js"),
    ),
];

/// Python (componentize-py): sources, the vendored SDK, the toolchain pin.
pub const PYTHON: Files = &[
    (
        "build.sh",
        include_str!("../../../templates/python/build.sh"),
    ),
    (
        "src/plugin.py",
        include_str!("../../../templates/python/src/plugin.py"),
    ),
    (
        "src/app.py",
        include_str!("../../../templates/python/src/app.py"),
    ),
    (
        "src/test_plugin.py",
        include_str!("../../../templates/python/src/test_plugin.py"),
    ),
    (
        "tools/requirements.txt",
        include_str!("../../../../../plugins/python/requirements.txt"),
    ),
    (
        "sdk/wr_plugin/__init__.py",
        include_str!("../../../../../plugins/python/sdk/wr_plugin/__init__.py"),
    ),
    (
        "sdk/wr_plugin/errors.py",
        include_str!("../../../../../plugins/python/sdk/wr_plugin/errors.py"),
    ),
    (
        "sdk/wr_plugin/export.py",
        include_str!("../../../../../plugins/python/sdk/wr_plugin/export.py"),
    ),
    (
        "sdk/wr_plugin/metacontroller.py",
        include_str!("../../../../../plugins/python/sdk/wr_plugin/metacontroller.py"),
    ),
    (
        "sdk/wr_plugin/names.py",
        include_str!("../../../../../plugins/python/sdk/wr_plugin/names.py"),
    ),
    (
        "sdk/wr_plugin/objects.py",
        include_str!("../../../../../plugins/python/sdk/wr_plugin/objects.py"),
    ),
    (
        "sdk/wr_plugin/request.py",
        include_str!("../../../../../plugins/python/sdk/wr_plugin/request.py"),
    ),
    (
        "sdk/wr_plugin/response.py",
        include_str!("../../../../../plugins/python/sdk/wr_plugin/response.py"),
    ),
    (
        "sdk/wr_plugin/rust.py",
        include_str!("../../../../../plugins/python/sdk/wr_plugin/rust.py"),
    ),
];

/// C (clang + wasi-libc): sources, the vendored SDK with its generated bindings, the wasm-tools pin.
pub const C: Files = &[
    ("build.sh", include_str!("../../../templates/c/build.sh")),
    (
        "src/plugin.h",
        include_str!("../../../templates/c/src/plugin.h"),
    ),
    (
        "src/plugin.c",
        include_str!("../../../templates/c/src/plugin.c"),
    ),
    (
        "src/component.c",
        include_str!("../../../templates/c/src/component.c"),
    ),
    (
        "src/test_plugin.c",
        include_str!("../../../templates/c/src/test_plugin.c"),
    ),
    (
        "tools/requirements.txt",
        include_str!("../../../../../plugins/c/requirements.txt"),
    ),
    (
        "sdk/include/wr_export.h",
        include_str!("../../../../../plugins/c/sdk/include/wr_export.h"),
    ),
    (
        "sdk/include/wr_json.h",
        include_str!("../../../../../plugins/c/sdk/include/wr_json.h"),
    ),
    (
        "sdk/include/wr_plugin.h",
        include_str!("../../../../../plugins/c/sdk/include/wr_plugin.h"),
    ),
    (
        "sdk/src/arena.c",
        include_str!("../../../../../plugins/c/sdk/src/arena.c"),
    ),
    (
        "sdk/src/export.c",
        include_str!("../../../../../plugins/c/sdk/src/export.c"),
    ),
    (
        "sdk/src/format.c",
        include_str!("../../../../../plugins/c/sdk/src/format.c"),
    ),
    (
        "sdk/src/json.c",
        include_str!("../../../../../plugins/c/sdk/src/json.c"),
    ),
    (
        "sdk/src/log_native.c",
        include_str!("../../../../../plugins/c/sdk/src/log_native.c"),
    ),
    (
        "sdk/src/names.c",
        include_str!("../../../../../plugins/c/sdk/src/names.c"),
    ),
    (
        "sdk/src/plugin.c",
        include_str!("../../../../../plugins/c/sdk/src/plugin.c"),
    ),
    (
        "sdk/src/sha256.c",
        include_str!("../../../../../plugins/c/sdk/src/sha256.c"),
    ),
    (
        "sdk/bindings/component_type.c",
        include_str!("../../../../../plugins/c/sdk/bindings/component_type.c"),
    ),
    (
        "sdk/bindings/reconciler.c",
        include_str!("../../../../../plugins/c/sdk/bindings/reconciler.c"),
    ),
    (
        "sdk/bindings/reconciler.h",
        include_str!("../../../../../plugins/c/sdk/bindings/reconciler.h"),
    ),
    (
        "sdk/bindings/wit.key",
        include_str!("../../../../../plugins/c/sdk/bindings/wit.key"),
    ),
];

/// Go (standard Go, wasip1): sources, the vendored SDK (standard library only),
/// the WASI stub adapter, the wasm-tools and Wizer pins.
pub const GO: Files = &[
    ("go.mod", include_str!("../../../templates/go/go.mod")),
    ("build.sh", include_str!("../../../templates/go/build.sh")),
    (
        "src/main.go",
        include_str!("../../../templates/go/src/main.go"),
    ),
    (
        "src/plugin.go",
        include_str!("../../../templates/go/src/plugin.go"),
    ),
    (
        "src/plugin_test.go",
        include_str!("../../../templates/go/src/plugin_test.go"),
    ),
    (
        "tools/package.json",
        include_str!("../../../templates/go/tools/package.json"),
    ),
    (
        "tools/package-lock.json",
        include_str!("../../../templates/go/tools/package-lock.json"),
    ),
    (
        "tools/requirements.txt",
        include_str!("../../../../../plugins/c/requirements.txt"),
    ),
    (
        "wasi/wasi_snapshot_preview1.wat",
        include_str!("../../../../../plugins/go/wasi/wasi_snapshot_preview1.wat"),
    ),
    (
        "wasi/world.wit",
        include_str!("../../../../../plugins/go/wasi/world.wit"),
    ),
    (
        "sdk/abi_wasip1.go",
        include_str!("../../../../../plugins/go/sdk/abi_wasip1.go"),
    ),
    (
        "sdk/doc.go",
        include_str!("../../../../../plugins/go/sdk/doc.go"),
    ),
    (
        "sdk/errors.go",
        include_str!("../../../../../plugins/go/sdk/errors.go"),
    ),
    (
        "sdk/export.go",
        include_str!("../../../../../plugins/go/sdk/export.go"),
    ),
    (
        "sdk/json.go",
        include_str!("../../../../../plugins/go/sdk/json.go"),
    ),
    (
        "sdk/json_test.go",
        include_str!("../../../../../plugins/go/sdk/json_test.go"),
    ),
    (
        "sdk/log.go",
        include_str!("../../../../../plugins/go/sdk/log.go"),
    ),
    (
        "sdk/log_native.go",
        include_str!("../../../../../plugins/go/sdk/log_native.go"),
    ),
    (
        "sdk/names.go",
        include_str!("../../../../../plugins/go/sdk/names.go"),
    ),
    (
        "sdk/object.go",
        include_str!("../../../../../plugins/go/sdk/object.go"),
    ),
    (
        "sdk/request.go",
        include_str!("../../../../../plugins/go/sdk/request.go"),
    ),
    (
        "sdk/response.go",
        include_str!("../../../../../plugins/go/sdk/response.go"),
    ),
    (
        "sdk/rust.go",
        include_str!("../../../../../plugins/go/sdk/rust.go"),
    ),
    (
        "sdk/sdk_test.go",
        include_str!("../../../../../plugins/go/sdk/sdk_test.go"),
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of each SDK directory is embedded (a new SDK file must be
    /// added to the lists above, or generated projects would not build).
    #[test]
    fn embedded_sdks_are_complete() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for (files, prefix, dir) in [
            (RUST, "sdk/src/", "plugins/sdk/src"),
            (JS, "sdk/", "plugins/js/sdk"),
            (PYTHON, "sdk/wr_plugin/", "plugins/python/sdk/wr_plugin"),
            (C, "sdk/include/", "plugins/c/sdk/include"),
            (C, "sdk/src/", "plugins/c/sdk/src"),
            (C, "sdk/bindings/", "plugins/c/sdk/bindings"),
            (GO, "sdk/", "plugins/go/sdk"),
            (GO, "wasi/", "plugins/go/wasi"),
        ] {
            let mut on_disk: Vec<String> = std::fs::read_dir(root.join(dir))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.') && n != "__pycache__")
                .collect();
            on_disk.sort();
            let mut embedded: Vec<String> = files
                .iter()
                .filter_map(|(p, _)| p.strip_prefix(prefix))
                .filter(|p| !p.contains('/'))
                .map(str::to_string)
                .collect();
            embedded.sort();
            assert_eq!(embedded, on_disk, "{dir}");
        }
    }
}

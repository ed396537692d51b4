//! Builds the plugin components once per test process and hands out their paths.
//!
//! The build runs `cargo build --target wasm32-wasip2 --profile plugin` into
//! `target/plugins`, a target dir of its own so the nested cargo never waits
//! on the lock held by the outer `cargo test`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Every plugin crate the tests use; built together in one cargo invocation.
pub const PLUGINS: &[&str] = &[
    "static-site",
    "tombstone",
    "team-config",
    "namespace-defaults",
    "adversarial",
];

/// The workspace root (parent of this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// Target dir of the plugin builds: `plugins/` under the main target dir
/// (`$CARGO_TARGET_DIR` when set, as CI does, else `<workspace>/target`), the
/// same place `plugins/build.sh` builds into.
pub fn plugin_target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
        .join("plugins")
}

/// Path of the component of `name` (one of [`PLUGINS`]), building all plugins
/// on first use. Panics with the build output if the build fails, and with
/// instructions if the `wasm32-wasip2` target is not installed.
pub fn plugin_path(name: &str) -> PathBuf {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    assert!(
        PLUGINS.contains(&name),
        "unknown plugin {name:?}; known: {PLUGINS:?}"
    );
    if let Err(msg) = BUILT.get_or_init(build_all) {
        panic!("{msg}");
    }
    plugin_target_dir()
        .join("wasm32-wasip2")
        .join("plugin")
        .join(format!("{}.wasm", name.replace('-', "_")))
}

/// The bytes of the component of `name`.
pub fn plugin_bytes(name: &str) -> Vec<u8> {
    let path = plugin_path(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn build_all() -> Result<(), String> {
    check_target_installed()?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.current_dir(workspace_root())
        .args(["build", "--target", "wasm32-wasip2", "--profile", "plugin"])
        .arg("--target-dir")
        .arg(plugin_target_dir())
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS");
    for p in PLUGINS {
        cmd.args(["-p", p]);
    }
    let output = cmd
        .output()
        .map_err(|e| format!("cannot run {cargo}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "building plugins failed ({:?}):\n{}",
            cmd,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(())
}

fn check_target_installed() -> Result<(), String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("cannot run {rustc}: {e}"))?;
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
    let lib = Path::new(&sysroot).join("lib/rustlib/wasm32-wasip2");
    if lib.is_dir() {
        Ok(())
    } else {
        Err(format!(
            "the wasm32-wasip2 target is not installed (no {}); run `rustup target add wasm32-wasip2`",
            lib.display()
        ))
    }
}

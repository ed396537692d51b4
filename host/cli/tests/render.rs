//! `wasm-reconciler render` end to end: the real binary on the fixture
//! inputs in `tests/fixtures/<plugin>/<case>/`, compared with hand-written
//! expected outputs; and the exit codes for plugin errors and faults.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use wr_tests::plugins::{plugin_path, workspace_root};

fn fixtures() -> PathBuf {
    workspace_root().join("tests").join("fixtures")
}

/// Runs `wasm-reconciler render` with a private cache dir.
fn render(cache: &Path, args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasm-reconciler"))
        .arg("render")
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .output()
        .expect("cannot run wasm-reconciler")
}

fn yaml_file(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Render every case of `plugin` and compare with its expectation.
fn check_plugin_fixtures(plugin: &str) {
    let wasm = plugin_path(plugin);
    let cache = tempfile::tempdir().unwrap();
    let dir = fixtures().join(plugin);
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no fixtures in {}", dir.display());
    for case in cases {
        let mut args = vec![
            format!("--plugin={}", wasm.display()),
            format!("--parent={}", case.join("parent.yaml").display()),
        ];
        for (file, flag) in [
            ("observed.yaml", "--observed"),
            ("related.yaml", "--related"),
            ("config.json", "--config"),
        ] {
            if case.join(file).exists() {
                args.push(format!("{flag}={}", case.join(file).display()));
            }
        }
        if let Ok(extra) = std::fs::read_to_string(case.join("args")) {
            args.extend(
                extra
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(str::to_string),
            );
        }
        if !args.iter().any(|a| a.starts_with("--now")) {
            args.push("--now=2026-01-15T12:00:00Z".to_string());
        }
        let out = render(cache.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let name = case.display();
        if case.join("expected.yaml").exists() {
            assert!(out.status.success(), "{name}: render failed: {stderr}");
            let got: Value = serde_yaml::from_slice(&out.stdout).unwrap();
            let want = yaml_file(&case.join("expected.yaml"));
            assert_eq!(
                got,
                want,
                "{name}: output differs\n--- got ---\n{}",
                String::from_utf8_lossy(&out.stdout)
            );
        } else {
            let expected = std::fs::read_to_string(case.join("expected-error.txt"))
                .unwrap_or_else(|e| panic!("{name}: no expected.yaml or expected-error.txt: {e}"));
            let mut lines = expected.lines();
            let code: i32 = lines.next().unwrap().trim().parse().unwrap();
            let message = lines.next().unwrap_or("").trim();
            assert_eq!(out.status.code(), Some(code), "{name}: stderr: {stderr}");
            assert!(
                stderr.contains(message),
                "{name}: {stderr:?} lacks {message:?}"
            );
            assert!(
                stderr.contains(&wasm.display().to_string()),
                "{name}: error does not name the plugin: {stderr}"
            );
            assert!(out.stdout.is_empty(), "{name}: printed output on error");
        }
    }
}

#[test]
fn static_site_fixtures() {
    check_plugin_fixtures("static-site");
}

#[test]
fn tombstone_fixtures() {
    check_plugin_fixtures("tombstone");
}

/// A parent + config file pair for the adversarial plugin in `dir`.
fn adversarial_args(dir: &Path, mode: &str) -> Vec<String> {
    let parent = dir.join("parent.yaml");
    std::fs::write(
        &parent,
        "apiVersion: v1\nkind: Thing\nmetadata:\n  name: p\n",
    )
    .unwrap();
    let config = dir.join(format!("{mode}.json"));
    std::fs::write(&config, format!("{{\"mode\":\"{mode}\"}}")).unwrap();
    vec![
        format!("--plugin={}", plugin_path("adversarial").display()),
        format!("--parent={}", parent.display()),
        format!("--config={}", config.display()),
        "--now=2026-01-15T12:00:00Z".into(),
        "--timeout-ms=300".into(),
    ]
}

#[test]
fn exit_codes_distinguish_permanent_transient_and_fault() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = plugin_path("adversarial").display().to_string();
    for (mode, code, needle) in [
        ("ok", 0, ""),
        ("permanent", 3, "InvalidSpec"),
        ("transient", 4, "NotReady"),
        ("loop", 5, "timeout"),
        ("panic", 5, "trap"),
        ("bad-json", 5, "not valid JSON"),
    ] {
        let out = render(dir.path(), &adversarial_args(dir.path(), mode));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{mode}: {stderr}");
        assert!(stderr.contains(needle), "{mode}: {stderr}");
        if code != 0 {
            assert!(
                stderr.contains(&wasm),
                "{mode}: error does not name the plugin: {stderr}"
            );
        }
    }
}

#[test]
fn json_output_and_repeatable_results() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = adversarial_args(dir.path(), "ok");
    args.push("-o".into());
    args.push("json".into());
    let first = render(dir.path(), &args);
    let second = render(dir.path(), &args);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!(first.stdout, second.stdout);
    let value: Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(value["children"][0]["data"]["now"], "2026-01-15T12:00:00Z");
}

#[test]
fn bad_inputs_name_the_file_and_document() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = adversarial_args(dir.path(), "ok");
    let observed = dir.path().join("observed.yaml");
    std::fs::write(
        &observed,
        "apiVersion: v1\nkind: A\nmetadata: {name: a}\n---\nkind: B\n",
    )
    .unwrap();
    args.push(format!("--observed={}", observed.display()));
    let out = render(dir.path(), &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("observed.yaml document 2"), "{stderr}");
    assert!(stderr.contains("apiVersion"), "{stderr}");
}

#[test]
fn a_file_that_is_not_a_component_is_a_fault() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = adversarial_args(dir.path(), "ok");
    let bogus = dir.path().join("bogus.wasm");
    std::fs::write(&bogus, b"\0asm\x01\0\0\0").unwrap();
    args[0] = format!("--plugin={}", bogus.display());
    let out = render(dir.path(), &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("bogus.wasm"), "{stderr}");
    assert!(stderr.contains("cannot load plugin"), "{stderr}");
}

/// The committed 0.1.0 static-site and the one built from this tree render
/// the same document; the YAML output's first line names each one's contract.
#[test]
fn yaml_output_names_the_plugin_contract() {
    let cache = tempfile::tempdir().unwrap();
    let case = fixtures().join("static-site").join("rollout");
    let old = fixtures().join("contract-0.1.0").join("static_site.wasm");
    let mut outputs = Vec::new();
    for (wasm, want) in [
        (
            old,
            "# plugin contract: wasm-reconciler:plugin/reconciler@0.1.0",
        ),
        (
            plugin_path("static-site"),
            "# plugin contract: wasm-reconciler:plugin/reconciler@0.2.0",
        ),
    ] {
        let args = vec![
            format!("--plugin={}", wasm.display()),
            format!("--parent={}", case.join("parent.yaml").display()),
            format!("--observed={}", case.join("observed.yaml").display()),
            format!("--config={}", case.join("config.json").display()),
            "--now=2026-01-15T12:00:00Z".to_string(),
        ];
        let out = render(cache.path(), &args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(stdout.lines().next(), Some(want), "{stdout}");
        outputs.push(serde_yaml::from_str::<Value>(&stdout).unwrap());
    }
    assert_eq!(outputs[0], outputs[1]);
}

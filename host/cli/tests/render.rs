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

/// Runs `wasm-reconciler test` (with a private cache dir).
fn golden(cache: &Path, args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasm-reconciler"))
        .arg("test")
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .output()
        .expect("cannot run wasm-reconciler")
}

/// Every case of `plugin`'s fixtures through `wasm-reconciler test`: all
/// listed as passed, exit 0.
fn check_plugin_fixtures(plugin: &str) {
    let wasm = plugin_path(plugin);
    let cache = tempfile::tempdir().unwrap();
    let dir = fixtures().join(plugin);
    let out = golden(
        cache.path(),
        &[
            dir.display().to_string(),
            format!("--plugin={}", wasm.display()),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    let cases = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().join("parent.yaml").exists())
        .count();
    assert!(cases > 0, "no fixtures in {}", dir.display());
    assert!(
        stdout.contains(&format!("{cases} passed, 0 failed")),
        "{stdout}"
    );
}

/// A copy of a fixture case in a temp dir.
fn copy_case(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
    }
}

#[test]
fn golden_test_reports_a_field_diff_and_update_accepts_the_output() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = tmp.path().join("cases");
    copy_case(&fixtures().join("static-site/fresh"), &cases.join("fresh"));
    copy_case(
        &fixtures().join("static-site/invalid"),
        &cases.join("invalid"),
    );
    let expected = cases.join("fresh/expected.yaml");
    let text = std::fs::read_to_string(&expected).unwrap();
    std::fs::write(&expected, text.replacen("replicas: 1", "replicas: 7", 1)).unwrap();
    let plugin = format!("--plugin={}", plugin_path("static-site").display());
    let run = |extra: &[&str]| {
        let mut args = vec![cases.display().to_string(), plugin.clone()];
        args.extend(extra.iter().map(|s| s.to_string()));
        golden(tmp.path(), &args)
    };
    let out = run(&[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL   fresh"), "{stdout}");
    assert!(stdout.contains("ok     invalid"), "{stdout}");
    assert!(
        stdout.contains("children[1].spec.replicas: expected 7, got 1"),
        "{stdout}"
    );
    assert!(stdout.contains("1 passed, 1 failed"), "{stdout}");

    let out = run(&["--update"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = run(&[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("2 passed, 0 failed"), "{stdout}");
    // The accepted output is the plugin's, which the hand-written original had.
    let accepted: Value = yaml_file(&expected);
    assert_eq!(
        accepted,
        yaml_file(&fixtures().join("static-site/fresh/expected.yaml"))
    );
}

#[test]
fn golden_error_expectations_and_controller_rules() {
    // The invalid-output fixtures expect `error: {class: InvalidOutput, ...}`
    // and take their rules from the directory's controller.yaml.
    let tmp = tempfile::tempdir().unwrap();
    let dir = fixtures().join("invalid-output");
    let out = golden(
        tmp.path(),
        &[
            dir.display().to_string(),
            format!("--plugin={}", plugin_path("adversarial").display()),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without the controller's declared kinds the Secret child is accepted,
    // so that case must fail against its expectation.
    let other = tmp.path().join("controller.yaml");
    std::fs::write(
        &other,
        std::fs::read_to_string(dir.join("controller.yaml"))
            .unwrap()
            .replace("resource: configmaps}", "resource: secrets}"),
    )
    .unwrap();
    let out = golden(
        tmp.path(),
        &[
            dir.join("undeclared-kind").display().to_string(),
            format!("--plugin={}", plugin_path("adversarial").display()),
            format!("--controller={}", other.display()),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("expected a InvalidOutput error, got a response"),
        "{stdout}"
    );
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
        // Namespaced: the plugin's ConfigMap child takes the parent's namespace
        // (a cluster-scoped parent's namespaced child must name one).
        "apiVersion: v1\nkind: Thing\nmetadata:\n  name: p\n  namespace: default\n",
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

/// The JavaScript, Python and C ports pass the static-site golden tests with
/// `wasm-reconciler test`, as the Rust plugin does (built by
/// `plugins/languages/build-all.sh`; skipped with the reason when not built,
/// except under CI).
#[test]
fn language_ports_pass_the_static_site_golden_tests() {
    use wr_tests::languages::{Components, components, lang_out_dir};
    match components("static-site") {
        Components::Skipped(why) => eprintln!("skipped: {why}"),
        Components::Ready(ready) => {
            let cache = tempfile::tempdir().unwrap();
            for (lang, _) in ready {
                let wasm = lang_out_dir().join(lang).join("static-site.wasm");
                let out = golden(
                    cache.path(),
                    &[
                        fixtures().join("static-site").display().to_string(),
                        format!("--plugin={}", wasm.display()),
                    ],
                );
                assert!(
                    out.status.success(),
                    "{lang}: {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

/// Session 8 trial: `wasm-reconciler test` in a project of `new` (no DIR:
/// `tests`, rules from `../controller.yaml`, plugin from its
/// `spec.plugin.path`) names the plugin as the project does, `build/x.wasm`,
/// not `tests/../build/x.wasm`.
#[test]
fn golden_test_in_a_project_names_the_plugin_path_as_written() {
    let project = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    copy_case(
        &fixtures().join("static-site/fresh"),
        &project.path().join("tests/fresh"),
    );
    std::fs::create_dir_all(project.path().join("build")).unwrap();
    std::fs::copy(
        plugin_path("static-site"),
        project.path().join("build/site.wasm"),
    )
    .unwrap();
    std::fs::write(
        project.path().join("controller.yaml"),
        "apiVersion: wasm-reconciler.dev/v1alpha1\nkind: WasmController\n\
         metadata: {name: site}\nspec:\n  \
         parentResource: {apiVersion: examples.wasm-reconciler.dev/v1alpha1, resource: staticsites}\n  \
         childResources:\n  - {apiVersion: apps/v1, resource: deployments}\n  \
         - {apiVersion: v1, resource: services}\n  - {apiVersion: v1, resource: configmaps}\n  \
         plugin: {path: build/site.wasm}\n---\n"
            .to_string()
            + &std::fs::read_to_string(workspace_root().join("examples/static-site/crd.yaml")).unwrap(),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_wasm-reconciler"))
        .current_dir(project.path())
        .arg("test")
        .arg("--cache-dir")
        .arg(cache.path())
        .output()
        .expect("cannot run wasm-reconciler");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("1 passed, 0 failed (build/site.wasm)"),
        "{stdout}"
    );
}

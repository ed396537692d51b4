//! `wasm-reconciler import metacontroller` end to end: the real binary on the
//! CompositeController fixtures of `tests/fixtures/metacontroller/<case>/`
//! (written for these tests), compared with hand-written expected
//! WasmControllers — the YAML as data, the comment listing what was not
//! mapped line by line, and the same list on stderr — and every printed
//! WasmController is accepted by the API server (server-side apply with
//! strict field validation, read back unchanged).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::Value;
use wr_engine::WasmController;
use wr_tests::cluster::Env;
use wr_tests::languages::yaml_docs;
use wr_tests::plugins::workspace_root;

fn cases_dir() -> PathBuf {
    workspace_root().join("tests/fixtures/metacontroller")
}

fn import(file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasm-reconciler"))
        .args(["import", "metacontroller", "-f"])
        .arg(file)
        .output()
        .expect("cannot run wasm-reconciler")
}

/// Cases with an `expected.yaml`, sorted.
fn mapped_cases() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .expect("fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("expected.yaml").is_file())
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 2,
        "expected the import fixtures, found {cases:?}"
    );
    cases
}

fn comment_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with('#')).collect()
}

/// The `#   field: reason` lines of an expected file, as (field, reason).
fn unmapped(comments: &[&str]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in comments {
        if line.starts_with("# Not mapped") {
            inside = true;
        } else if inside && let Some(item) = line.strip_prefix("#   ") {
            let (field, reason) = item.split_once(": ").expect("field: reason");
            out.push((field.to_string(), reason.to_string()));
        } else {
            inside = false;
        }
    }
    out
}

#[test]
fn printed_controllers_match_the_expected_files() {
    for case in mapped_cases() {
        let out = import(&case.join("compositecontroller.yaml"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {stderr}", case.display());
        let expected = std::fs::read_to_string(case.join("expected.yaml")).expect("expected");
        assert_eq!(
            yaml_docs(&stdout),
            yaml_docs(&expected),
            "{}: printed WasmController differs",
            case.display()
        );
        assert_eq!(
            comment_lines(&stdout),
            comment_lines(&expected),
            "{}: the comment differs",
            case.display()
        );
        let want = unmapped(&comment_lines(&expected));
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("warning:"))
            .collect();
        assert_eq!(warnings.len(), want.len(), "{}: {stderr}", case.display());
        for (field, reason) in &want {
            assert!(
                warnings
                    .iter()
                    .any(|w| w.contains(&format!(" {field} not mapped: {reason}"))),
                "{}: no warning for {field} on stderr:\n{stderr}",
                case.display()
            );
        }
    }
}

#[test]
fn a_decorator_controller_is_refused_by_kind() {
    let case = cases_dir().join("decorator");
    let out = import(&case.join("compositecontroller.yaml"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let want = std::fs::read_to_string(case.join("expected-error.txt")).expect("expected");
    assert!(!out.status.success(), "a DecoratorController was imported");
    assert!(
        out.stdout.is_empty(),
        "printed something for a DecoratorController"
    );
    assert!(stderr.contains(want.trim()), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn printed_controllers_are_accepted_by_the_api_server() {
    let env = Env::start().await.expect("API server");
    let api: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &ApiResource::erase::<WasmController>(&()),
    );
    for case in mapped_cases() {
        let out = import(&case.join("compositecontroller.yaml"));
        assert!(out.status.success(), "{}", case.display());
        let docs = yaml_docs(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(docs.len(), 1, "{}", case.display());
        let printed = &docs[0];
        let name = printed["metadata"]["name"].as_str().expect("name");
        let obj: DynamicObject = serde_json::from_value(printed.clone()).expect("object");
        let pp = PatchParams::apply("import-test").validation_strict();
        api.patch(name, &pp, &Patch::Apply(&obj))
            .await
            .unwrap_or_else(|e| panic!("{}: the API server refused it: {e}", case.display()));
        let stored = api.get(name).await.expect("read back");
        let stored_spec: Value = stored.data["spec"].clone();
        assert_eq!(
            stored_spec,
            printed["spec"],
            "{}: the API server changed the spec (pruned or defaulted fields)",
            case.display()
        );
        api.delete(name, &Default::default()).await.expect("delete");
    }
}

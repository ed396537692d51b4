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

/// Session 8 trial: a file holding a CompositeController and a
/// DecoratorController (as Metacontroller's examples do) printed nothing at
/// all; the CompositeController is now printed, the DecoratorController
/// refused on stderr, and the exit code is non-zero.
#[test]
fn a_decorator_controller_beside_a_composite_one_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mixed = dir.path().join("mixed.yaml");
    let read = |case: &str| {
        std::fs::read_to_string(cases_dir().join(case).join("compositecontroller.yaml")).unwrap()
    };
    std::fs::write(
        &mixed,
        format!(
            "{}\n---\n{}",
            read("decorator"),
            read("rolling-and-customize")
        ),
    )
    .unwrap();
    let out = import(&mixed);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a DecoratorController was imported");
    assert!(
        stdout.contains("kind: WasmController"),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let want = std::fs::read_to_string(cases_dir().join("decorator/expected-error.txt")).unwrap();
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

/// The whole migration through the host: the noticeboard CompositeController
/// imported with `--plugin-path`, its hook (Metacontroller shapes, wrapped by
/// the JavaScript SDK) as the component, run by the engine against the API
/// server. The children appear with the hook's labels, the parent's status is
/// exactly the hook's plus the host's fields (`statusMode: Replace`), and on
/// delete the finalize hook tears the copies down until it reports
/// `finalized` and the parent goes. Skips (saying why) when the JavaScript
/// component is not built, except under CI.
#[tokio::test(flavor = "multi_thread")]
async fn an_imported_controller_runs_its_hook_through_the_host() {
    use wr_tests::cluster::{eventually, install_crd};
    use wr_tests::languages::{Components, components_in};

    let bytes = match components_in("noticeboard", &["js"]) {
        Components::Ready(mut ports) => ports.remove(0).1,
        Components::Skipped(why) => {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
    let mut env = Env::start_with_wasm().await.expect("API server");
    let file = workspace_root().join("tests/fixtures/noticeboard/compositecontroller.yaml");
    let crd = yaml_docs(&std::fs::read_to_string(&file).expect("fixture"))
        .into_iter()
        .find(|d| d["kind"] == "CustomResourceDefinition")
        .expect("the Notice CRD");
    install_crd(&env.client, crd).await.expect("Notice CRD");
    let component = env.dir.path().join("noticeboard.wasm");
    std::fs::write(&component, &bytes).expect("component");

    let out = Command::new(env!("CARGO_BIN_EXE_wasm-reconciler"))
        .args(["import", "metacontroller", "-f"])
        .arg(&file)
        .arg("--plugin-path")
        .arg(&component)
        .output()
        .expect("cannot run wasm-reconciler");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = yaml_docs(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(printed.len(), 1);
    env.create_controller(printed[0].clone())
        .await
        .expect("create the imported WasmController");
    env.namespace("board").await.expect("namespace");
    env.start_manager();

    let notices = Api::<DynamicObject>::namespaced_with(
        env.client.clone(),
        &env.ns("board"),
        &ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("noticeboard.example.com", "v1", "Notice"),
            "notices",
        ),
    );
    let notice: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "noticeboard.example.com/v1", "kind": "Notice",
        "metadata": {"name": "hello", "namespace": env.ns("board")},
        "spec": {"copies": 2, "message": "hi"}
    }))
    .expect("notice");
    notices
        .create(&Default::default(), &notice)
        .await
        .expect("create Notice");

    let configmaps = env.configmaps("board");
    let status = eventually("both copies posted and reported", 60, || {
        let notices = notices.clone();
        let configmaps = configmaps.clone();
        async move {
            let mut copies = Vec::new();
            for name in ["hello-0", "hello-1"] {
                copies.push(configmaps.get(name).await.ok()?);
            }
            let posted = copies.iter().all(|c| {
                c.data["data"]["message"] == "hi"
                    && c.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get("noticeboard.example.com/controller"))
                        .map(String::as_str)
                        == Some("noticeboards")
            });
            let n = notices.get("hello").await.ok()?;
            let status = n.data.get("status")?.clone();
            (posted && status["upToDate"] == 2).then_some(status)
        }
    })
    .await
    .expect("the hook's children and status");
    let mut keys: Vec<&str> = status
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort();
    assert_eq!(
        keys,
        [
            "conditions",
            "observedCopies",
            "observedGeneration",
            "upToDate"
        ],
        "{status}"
    );
    let posted = status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Posted"))
        .expect("Posted condition");
    assert_eq!(posted["status"], "True", "{status}");
    assert_eq!(posted["reason"], "AllCopiesPosted", "{status}");

    notices
        .delete("hello", &Default::default())
        .await
        .expect("delete Notice");
    eventually("ordered teardown finished and the Notice gone", 60, || {
        let notices = notices.clone();
        let configmaps = configmaps.clone();
        async move {
            let gone =
                matches!(notices.get("hello").await, Err(kube::Error::Api(e)) if e.code == 404);
            let copies_gone = configmaps.get("hello-0").await.is_err()
                && configmaps.get("hello-1").await.is_err();
            (gone && copies_gone).then_some(())
        }
    })
    .await
    .expect("finalize hook ran to `finalized`");
    env.stop_manager().await;
    let controllers: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &ApiResource::erase::<WasmController>(&()),
    );
    controllers
        .delete("noticeboards", &Default::default())
        .await
        .expect("delete the WasmController");
}

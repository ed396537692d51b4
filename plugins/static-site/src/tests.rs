//! Native unit tests of the plugin logic (no wasm involved).

use super::*;

fn parent(spec: Value) -> Value {
    json!({
        "apiVersion": "examples.wasm-reconciler.dev/v1alpha1",
        "kind": "StaticSite",
        "metadata": { "name": "web", "namespace": "demo", "generation": 1 },
        "spec": spec,
    })
}

fn run(req: &Request) -> Result<Response, Error> {
    StaticSite::reconcile(req)
}

fn kinds(resp: &Response) -> Vec<(String, String)> {
    resp.children
        .iter()
        .map(|c| (c.kind().unwrap().to_string(), c.name().unwrap().to_string()))
        .collect()
}

#[test]
fn yields_configmap_deployment_service() {
    let req = Request::new(parent(
        json!({ "image": "nginx:1.27", "content": { "index.html": "hi" } }),
    ));
    let resp = run(&req).unwrap();
    assert_eq!(
        kinds(&resp),
        vec![
            ("ConfigMap".into(), "web-content".into()),
            ("Deployment".into(), "web".into()),
            ("Service".into(), "web".into()),
        ]
    );
    let deployment = &resp.children[1];
    assert_eq!(deployment["spec"]["replicas"], json!(1));
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
        json!(80)
    );
    assert_eq!(resp.children[0]["data"], json!({ "index.html": "hi" }));
    assert_eq!(resp.children[0].namespace(), Some("demo"));
    let status = resp.status.unwrap();
    assert_eq!(status["url"], json!("http://web.demo.svc.cluster.local/"));
    assert_eq!(resp.conditions[0].status, ConditionStatus::Unknown);
}

#[test]
fn content_change_changes_the_pod_template_and_emits_an_event() {
    let a = run(&Request::new(parent(
        json!({ "image": "x", "content": { "a.html": "1" } }),
    )))
    .unwrap();
    let mut req = Request::new(parent(
        json!({ "image": "x", "content": { "a.html": "2" } }),
    ));
    req.children = vec![a.children[0].clone()].into();
    let b = run(&req).unwrap();
    let hash = |r: &Response| {
        r.children[1]["spec"]["template"]["metadata"]["annotations"][CONTENT_HASH_ANNOTATION]
            .clone()
    };
    assert_ne!(hash(&a), hash(&b));
    assert_eq!(b.events.len(), 1);
    assert_eq!(b.events[0].reason, "ContentChanged");
    // Same content observed again: no event.
    req.children = vec![b.children[0].clone()].into();
    assert!(run(&req).unwrap().events.is_empty());
}

#[test]
fn availability_follows_the_observed_deployment() {
    let mut req = Request::new(parent(json!({ "image": "x", "replicas": 2 })));
    req.children = vec![
        json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "web" }, "status": { "availableReplicas": 1 } }),
    ]
    .into();
    let resp = run(&req).unwrap();
    assert_eq!(resp.conditions[0].status, ConditionStatus::False);
    assert_eq!(resp.conditions[0].message, "1/2 replicas available");
    req.children[0]["status"]["availableReplicas"] = json!(2);
    let resp = run(&req).unwrap();
    assert_eq!(resp.conditions[0].status, ConditionStatus::True);
    assert_eq!(resp.status.unwrap()["availableReplicas"], json!(2));
}

#[test]
fn invalid_specs_are_permanent_errors_naming_the_field() {
    let cases = [
        (json!({}), "spec.image"),
        (json!({ "image": "x", "replicas": -1 }), "spec.replicas"),
        (json!({ "image": "x", "replicas": "two" }), "spec.replicas"),
        (json!({ "image": "x", "port": 0 }), "spec.port"),
        (
            json!({ "image": "x", "content": { "a/b": "" } }),
            "spec.content[\"a/b\"]",
        ),
    ];
    for (spec, field) in cases {
        let err = run(&Request::new(parent(spec.clone()))).unwrap_err();
        assert!(err.is_permanent(), "{spec}");
        assert_eq!(err.reason(), "InvalidSpec");
        assert!(
            err.message().starts_with(field),
            "{spec}: {}",
            err.message()
        );
    }
}

#[test]
fn config_sets_the_cluster_domain() {
    let mut req = Request::new(parent(json!({ "image": "x", "port": 8080 })));
    req.config = Some(json!({ "clusterDomain": "example.internal" }));
    let status = run(&req).unwrap().status.unwrap();
    assert_eq!(
        status["url"],
        json!("http://web.demo.svc.example.internal:8080/")
    );
    req.config = Some(json!({ "nope": 1 }));
    assert_eq!(run(&req).unwrap_err().reason(), "InvalidConfig");
}

#[test]
fn content_hash_matches_the_documented_formula() {
    let spec = SiteSpec::parse(&parent(
        json!({ "image": "x", "content": { "index.html": "hi" } }),
    ))
    .unwrap();
    // printf 'index.html\0hi\0' | sha256sum
    assert_eq!(spec.content_hash(), EXPECTED_INDEX_HI_HASH);
}

const EXPECTED_INDEX_HI_HASH: &str =
    "91060b282a73cb28480f87cd3654ce9941bfee159fc0068c853984453bfc1939";

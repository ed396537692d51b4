"""Unit tests of the static-site port: the cases of plugins/static-site/src/tests.rs."""

import pytest

import static_site
from static_site.spec import parse_spec
from wr_plugin import PluginError, Request


def parent(spec):
    return {
        "apiVersion": "examples.wasm-reconciler.dev/v1alpha1",
        "kind": "StaticSite",
        "metadata": {"name": "web", "namespace": "demo", "generation": 1},
        "spec": spec,
    }


def failure(req):
    with pytest.raises(PluginError) as err:
        static_site.reconcile(req)
    return err.value


def test_yields_configmap_deployment_service():
    resp = static_site.reconcile(Request(parent({"image": "nginx:1.27", "content": {"index.html": "hi"}})))
    assert [(c["kind"], c["metadata"]["name"]) for c in resp.children] == [
        ("ConfigMap", "web-content"),
        ("Deployment", "web"),
        ("Service", "web"),
    ]
    deployment = resp.children[1]
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] == 80
    assert resp.children[0]["data"] == {"index.html": "hi"}
    assert resp.status["url"] == "http://web.demo.svc.cluster.local/"
    assert resp.conditions[0].status == "Unknown"


def test_content_change_changes_the_pod_template_and_emits_an_event():
    a = static_site.reconcile(Request(parent({"image": "x", "content": {"a.html": "1"}})))
    req = Request(parent({"image": "x", "content": {"a.html": "2"}}), children=[a.children[0]])
    b = static_site.reconcile(req)

    def digest(r):
        return r.children[1]["spec"]["template"]["metadata"]["annotations"][static_site.CONTENT_HASH_ANNOTATION]

    assert digest(a) != digest(b)
    assert [e.reason for e in b.events] == ["ContentChanged"]
    req.children = [b.children[0]]
    assert static_site.reconcile(req).events == []


def test_availability_follows_the_observed_deployment():
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "status": {"availableReplicas": 1}}
    req = Request(parent({"image": "x", "replicas": 2}), children=[deployment])
    resp = static_site.reconcile(req)
    assert resp.conditions[0].status == "False"
    assert resp.conditions[0].message == "1/2 replicas available"
    deployment["status"]["availableReplicas"] = 2
    resp = static_site.reconcile(req)
    assert resp.conditions[0].status == "True"
    assert resp.status["availableReplicas"] == 2


@pytest.mark.parametrize(
    "spec,field",
    [
        ({}, "spec.image"),
        ({"image": " "}, "spec.image"),
        ({"image": 3}, "spec.image"),
        ({"image": "x", "replicas": -1}, "spec.replicas"),
        ({"image": "x", "replicas": "two"}, "spec.replicas"),
        ({"image": "x", "replicas": True}, "spec.replicas"),
        ({"image": "x", "replicas": 2.0}, "spec.replicas"),
        ({"image": "x", "port": 0}, "spec.port"),
        ({"image": "x", "content": {"a/b": ""}}, 'spec.content["a/b"]'),
        ({"image": "x", "content": {"a.html": 1}}, 'spec.content["a.html"]'),
        ({"image": "x", "content": []}, "spec.content"),
    ],
)
def test_invalid_specs_are_permanent_errors_naming_the_field(spec, field):
    err = failure(Request(parent(spec)))
    assert err.is_permanent and err.reason == "InvalidSpec"
    assert err.message.startswith(field), err.message


def test_content_over_the_limit_is_counted_in_utf8_bytes():
    err = failure(Request(parent({"image": "x", "content": {"a.html": "€" * 349526}})))
    assert err.message == "spec.content: 1048584 bytes is over the limit of 1044480"


def test_config_sets_the_cluster_domain_and_rejects_unknown_fields():
    req = Request(parent({"image": "x", "port": 8080}), config={"clusterDomain": "example.internal"})
    assert static_site.reconcile(req).status["url"] == "http://web.demo.svc.example.internal:8080/"
    req.config = {"nope": 1}
    err = failure(req)
    assert (err.reason, err.message) == ("InvalidConfig", "config: unknown field `nope`, expected `clusterDomain`")
    req.config = {"clusterDomain": 5}
    assert failure(req).message == "config: invalid type: integer `5`, expected a string"


def test_content_hash_matches_the_documented_formula():
    spec = parse_spec(parent({"image": "x", "content": {"index.html": "hi"}}))
    # printf 'index.html\0hi\0' | sha256sum
    assert spec.content_hash() == "91060b282a73cb28480f87cd3654ce9941bfee159fc0068c853984453bfc1939"

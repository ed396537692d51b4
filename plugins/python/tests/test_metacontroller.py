"""The Metacontroller hook wrapper maps every field both ways: the host's
request to the sync-hook request (controller, parent, children and related
keyed by Kind.apiVersion then name / namespace/name, finalizing) and the
hook's response to the host's (children, status, status.conditions,
resyncAfterSeconds -> requeue, finalized); plus the noticeboard example hook
run through it. Expected values are written by hand."""

import pytest

import noticeboard
from wr_plugin import (
    Condition,
    PluginError,
    Request,
    from_hook_response,
    metacontroller_hook,
    object_key,
    to_hook_request,
)

CONTROLLER = {"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController", "metadata": {"name": "boards"}}


def cm(ns, name, data=None):
    meta = {"name": name}
    if ns is not None:
        meta["namespace"] = ns
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {}}


def deploy(ns, name):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns}}


def parent(ns):
    meta = {"name": "hello"}
    if ns is not None:
        meta["namespace"] = ns
    return {"apiVersion": "example.com/v1", "kind": "Notice", "metadata": meta, "spec": {}}


def config(version, child_types=("ConfigMap.v1", "Deployment.apps/v1", "Secret.v1")):
    return {"metacontroller": {"hookVersion": version, "childTypes": list(child_types), "controller": CONTROLLER}}


def test_request_groups_by_kind_api_version_and_keys_by_name_v1():
    req = Request(
        parent=parent("ns1"),
        children=[cm("ns1", "a"), deploy("ns1", "web")],
        related=[cm("ns1", "defaults"), cm("other", "shared")],
        finalizing=True,
        config=config("v1"),
    )
    h = to_hook_request(req)
    assert h["controller"] == CONTROLLER
    assert h["parent"] is req.parent
    assert h["finalizing"] is True
    assert sorted(h["children"]) == ["ConfigMap.v1", "Deployment.apps/v1", "Secret.v1"]
    assert h["children"]["ConfigMap.v1"]["a"] is req.children[0]
    assert h["children"]["Deployment.apps/v1"]["web"] is req.children[1]
    assert h["children"]["Secret.v1"] == {}, "a declared type with no child has an empty entry"
    assert list(h["related"]) == ["ConfigMap.v1"]
    assert h["related"]["ConfigMap.v1"]["defaults"] is req.related[0]
    assert h["related"]["ConfigMap.v1"]["other/shared"] is req.related[1]


def test_v2_keys_by_namespace_and_name_and_v1_under_a_cluster_scoped_parent():
    v2 = to_hook_request(Request(parent=parent("ns1"), children=[cm("ns1", "a")], config=config("v2")))
    assert list(v2["children"]["ConfigMap.v1"]) == ["ns1/a"]
    cluster = to_hook_request(Request(parent=parent(None), children=[cm("ns2", "a"), cm(None, "x")], config=config("v1")))
    assert sorted(cluster["children"]["ConfigMap.v1"]) == ["ns2/a", "x"]
    assert object_key(cm("ns1", "a"), "v2", "ns1") == "ns1/a"
    assert object_key(cm(None, "n"), "v2", "ns1") == "n"


def test_defaults_without_config_and_bad_config():
    h = to_hook_request(Request(parent=parent("ns"), children=[cm("ns", "a")]))
    assert h["controller"] == {}
    assert list(h["children"]) == ["ConfigMap.v1"]
    assert h["finalizing"] is False
    with pytest.raises(PluginError) as e:
        to_hook_request(Request(parent=parent("ns"), config={"metacontroller": {"hookVersion": "v3"}}))
    assert e.value.reason == "InvalidConfig" and "hookVersion" in e.value.message


def test_response_fields_map_to_the_hosts():
    child = cm(None, "c")
    r = from_hook_response({
        "children": [child],
        "status": {"phase": "Up", "conditions": [
            {"type": "Posted", "status": "False", "reason": "Pending", "message": "1/2", "lastTransitionTime": "x"},
            {"type": "Seen", "status": "Unknown"},
        ]},
        "resyncAfterSeconds": 1.2,
        "finalized": True,
    })
    assert r.children == [child]
    assert r.status == {"phase": "Up"}
    assert r.conditions == [Condition.false("Posted", "Pending", "1/2"), Condition.unknown("Seen", "Unspecified", "")]
    assert r.requeue_after_seconds == 2, "fractions round up"
    assert r.finalized is True

    empty = from_hook_response({})
    assert (empty.children, empty.status, empty.requeue_after_seconds, empty.finalized) == ([], None, None, False)
    assert from_hook_response({"resyncAfterSeconds": 0}).requeue_after_seconds is None
    assert from_hook_response({"resyncAfterSeconds": 30}).requeue_after_seconds == 30


@pytest.mark.parametrize("resp, needle", [
    (None, "must return an object"),
    ({"children": {}}, "children:"),
    ({"status": []}, "status:"),
    ({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, "status.conditions[0]: type Ready is owned by the host"),
    ({"status": {"conditions": [{"type": "X", "status": "yes"}]}}, "status.conditions[0].status"),
    ({"resyncAfterSeconds": "5"}, "resyncAfterSeconds:"),
    ({"resyncAfterSeconds": True}, "resyncAfterSeconds:"),
    ({"finalized": "true"}, "finalized:"),
])
def test_malformed_answers_are_permanent_errors_naming_the_field(resp, needle):
    with pytest.raises(PluginError) as e:
        from_hook_response(resp)
    assert e.value.is_permanent and needle in e.value.message


def test_finalize_hook_replaces_sync_while_deleting():
    calls = []
    reconcile = metacontroller_hook(
        lambda r: calls.append(("sync", r["finalizing"])) or {},
        finalize=lambda r: calls.append(("finalize", r["finalizing"])) or {"finalized": True},
    )
    assert reconcile(Request(parent=parent("n"))).finalized is False
    assert reconcile(Request(parent=parent("n"), finalizing=True)).finalized is True
    assert calls == [("sync", False), ("finalize", True)]
    shared = metacontroller_hook(lambda r: {"finalized": r["finalizing"]})
    assert shared(Request(parent=parent("n"), finalizing=True)).finalized is True


def test_noticeboard_through_the_wrapper():
    reconcile = metacontroller_hook(noticeboard.sync, finalize=noticeboard.finalize)
    notice = dict(parent("ns"), spec={"copies": 2})
    cfg = {"metacontroller": {"hookVersion": "v1", "childTypes": ["ConfigMap.v1"], "controller": {"metadata": {"name": "boards"}, "spec": {}}}}
    first = reconcile(Request(parent=notice, related=[cm("ns", "noticeboard-defaults", {"message": "hi"})], config=cfg))
    assert [c["metadata"]["name"] for c in first.children] == ["hello-0", "hello-1"]
    assert first.children[1]["data"]["message"] == "hi"
    assert first.children[0]["metadata"]["labels"]["noticeboard.example.com/controller"] == "boards"
    assert first.status == {"observedCopies": 0, "upToDate": 0}
    assert first.conditions == [Condition.false("Posted", "CopiesPending", "0/2 copies posted")]
    assert first.requeue_after_seconds == 2

    posted = [cm("ns", "hello-0", {"message": "hi", "index": "0"}), cm("ns", "hello-1", {"message": "hi", "index": "1"})]
    done = reconcile(Request(parent=dict(notice, spec={"copies": 2, "message": "hi"}), children=posted, config=cfg))
    assert done.status == {"observedCopies": 2, "upToDate": 2}
    assert done.conditions[0].status == "True"
    assert done.requeue_after_seconds is None

    tearing = reconcile(Request(parent=notice, children=posted, finalizing=True, config=cfg))
    assert [c["metadata"]["name"] for c in tearing.children] == ["hello-0"]
    assert tearing.finalized is False
    gone = reconcile(Request(parent=notice, finalizing=True, config=cfg))
    assert gone.children == [] and gone.finalized is True
    assert gone.status == {"observedCopies": 0, "tearingDown": True}

"""Unit tests of the reconcile logic (pytest, natively)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "sdk"))

import pytest  # noqa: E402

import plugin  # noqa: E402
from wr_plugin import PluginError, Request  # noqa: E402


def parent(spec):
    return {
        "apiVersion": "{{group}}/v1alpha1",
        "kind": "{{kind}}",
        "metadata": {"name": "a", "namespace": "ns"},
        "spec": spec,
    }


def test_one_config_map_with_the_message():
    resp = plugin.reconcile(Request(parent({"message": "hi"})))
    assert [c["metadata"]["name"] for c in resp.children] == ["a-greeting"]
    assert resp.children[0]["data"] == {"message": "hi"}


def test_a_message_that_is_not_a_string_is_invalid():
    with pytest.raises(PluginError) as err:
        plugin.reconcile(Request(parent({"message": 1})))
    assert err.value.reason == "InvalidSpec"

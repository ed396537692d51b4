"""Unit tests of the Python SDK. Expected hashes come from sha256sum."""

import types as pytypes
from dataclasses import dataclass
from enum import Enum
from typing import Any, List, Optional

import pytest

from wr_plugin import (
    Condition,
    PluginError,
    Request,
    Response,
    annotate,
    child_name,
    content_hash,
    debug_quote,
    dispatch,
    find,
    invalid_spec,
    is_blank,
    is_dns1123_label,
    label,
    new_object,
)


def test_child_names_match_the_rust_sdk():
    assert child_name("web", "config") == "web-config"
    assert child_name("web", "") == "web"
    long = child_name("a" * 70, "svc")
    assert len(long) == 63 and long.startswith("a" * 52 + "-") and is_dns1123_label(long)
    assert long != child_name("a" * 70, "cfg")
    odd = child_name("My.Site", "web")
    assert odd.startswith("my-site-web-") and len(odd) == len("my-site-web-") + 10
    assert child_name("my-site", "web") == "my-site-web"
    assert len(child_name("---", "")) == 10


def test_content_hash_is_sha256_hex():
    assert content_hash(b"abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    # printf 'é%.0s' {1..100} | sha256sum
    assert content_hash("é" * 100) == "f42ec48e1e4b487e590e0b3d4e58437c8327efa855d769709f4942a4f73a7eb6"


def test_objects_are_built_and_found():
    cm = new_object("v1", "ConfigMap", "ns", "c")
    label(cm, "app", "web")
    annotate(cm, "a", "b")
    assert cm == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ns", "labels": {"app": "web"}, "annotations": {"a": "b"}},
    }
    assert "namespace" not in new_object("v1", "Service", None, "c")["metadata"]
    assert find([cm], "ConfigMap", "c") is cm
    assert find([cm], "Secret", "c") is None


def test_rust_compatible_helpers():
    assert is_blank(" \t\n\u3000")
    assert not is_blank("\ufeff")
    assert not is_blank("\x1c"), "Python's strip() removes U+001C, Rust's trim() does not"
    assert debug_quote('a/b"\n\x1b') == '"a/b\\"\\n\\u{1b}"'


# Stand-ins for the bindings componentize-py generates (wit_world.imports.types).
class _Status(Enum):
    TRUE = 0
    FALSE = 1
    UNKNOWN = 2


class _EventType(Enum):
    NORMAL = 0
    WARNING = 1


class _Level(Enum):
    ERROR = 4


@dataclass
class _Record:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


@dataclass(frozen=True)
class _Err(Exception):
    value: Any


@dataclass
class _Variant:
    value: Any


class _Permanent(_Variant):
    pass


class _Transient(_Variant):
    pass


FAKE_TYPES = pytypes.SimpleNamespace(
    ConditionStatus=_Status,
    EventType=_EventType,
    LogLevel=_Level,
    Condition=_Record,
    Event=_Record,
    ReconcileResponse=_Record,
    ErrorDetail=_Record,
    ReconcileError_Permanent=_Permanent,
    ReconcileError_Transient=_Transient,
    Err=_Err,
)


@dataclass
class WitRequest:
    parent: str
    children: List[str]
    related: List[str]
    finalizing: bool
    config: Optional[str]
    now: str


def _plugin(req: Request) -> Response:
    if req.finalizing:
        raise PluginError("transient", "Later", "not yet")
    if req.parent.get("boom"):
        raise KeyError("bug")
    return (
        Response()
        .child({"kind": "ConfigMap", "b": 1, "é": "ü"})
        .condition(Condition.false("Available", "Nope", "m"))
        .set_status({"seen": len(req.children)})
    )


def test_dispatch_maps_responses_errors_and_bugs():
    logs = []
    log = lambda level, message: logs.append((level, message))  # noqa: E731
    wit = lambda parent, finalizing=False: WitRequest(parent, ["{}"], [], finalizing, None, "x")  # noqa: E731
    out = dispatch(_plugin, wit("{}"), FAKE_TYPES, log)
    assert out.children == ['{"kind":"ConfigMap","b":1,"é":"ü"}']
    assert out.status == '{"seen":1}'
    assert out.requeue_after_seconds is None
    assert out.conditions[0].status is _Status.FALSE
    with pytest.raises(_Err) as err:
        dispatch(_plugin, wit("{}", True), FAKE_TYPES, log)
    assert isinstance(err.value.value, _Transient) and err.value.value.value.reason == "Later"
    with pytest.raises(_Err) as err:
        dispatch(_plugin, wit("{nope"), FAKE_TYPES, log)
    assert isinstance(err.value.value, _Permanent) and err.value.value.value.reason == "InvalidRequest"
    with pytest.raises(KeyError):
        dispatch(_plugin, wit('{"boom": 1}'), FAKE_TYPES, log)
    assert len(logs) == 1 and logs[0][0] is _Level.ERROR


def test_request_accessors():
    req = Request(parent={"metadata": {"namespace": "n"}})
    with pytest.raises(PluginError) as err:
        req.name()
    assert err.value.reason == "InvalidParent"
    assert req.namespace() == "n"
    e = invalid_spec("spec.x", "bad")
    assert e.message == "spec.x: bad" and e.is_permanent

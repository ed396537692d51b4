"""Runs a Metacontroller sync hook unchanged as a plugin: the host's request
is turned into Metacontroller's sync-hook request and the hook's response
into the host's response.

- request ``{controller, parent, children, related, finalizing}``, children
  and related keyed by ``"Kind.apiVersion"``, then by name (hook version
  v1) or namespace/name (v2);
- response ``{status, children, resyncAfterSeconds, finalized}``.

The settings the wrapper needs come from the WasmController's
``spec.plugin.config.metacontroller`` (written by ``wasm-reconciler import
metacontroller``): ``hookVersion`` (v1 or v2), ``childTypes`` (the
``"Kind.apiVersion"`` keys that always have an entry in ``children``, empty
or not, as Metacontroller sends them) and ``controller`` (the object sent as
``controller``). See docs/migrating-from-metacontroller.md.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable, Dict, List, Optional

from .errors import permanent
from .objects import kind_of, name_of, namespace_of
from .request import Request
from .response import Condition, Response

#: Reason given to a hook condition that has none (the host requires one).
DEFAULT_CONDITION_REASON = "Unspecified"
_MAX_U32 = 4294967295

Hook = Callable[[Dict[str, Any]], Any]


def metacontroller_hook(sync: Hook, finalize: Optional[Hook] = None) -> Callable[[Request], Response]:
    """Wraps Metacontroller hooks as a reconcile function (``Request -> Response``)
    for :func:`wr_plugin.dispatch`. ``finalize`` is called instead of ``sync``
    when the parent is being deleted (Metacontroller's finalize hook); without
    it ``sync`` is called with ``finalizing: True``, as when both hooks share
    a handler."""

    def reconcile(req: Request) -> Response:
        hook_request = to_hook_request(req)
        hook = finalize if (req.finalizing and finalize is not None) else sync
        return from_hook_response(hook(hook_request))

    return reconcile


def settings(config: Any) -> Dict[str, Any]:
    """The wrapper's settings from ``config.metacontroller`` (defaults: v1, no child types, ``{}``)."""
    mc = config.get("metacontroller") if isinstance(config, dict) else None
    mc = mc if isinstance(mc, dict) else {}
    version = mc.get("hookVersion", "v1")
    if version not in ("v1", "v2"):
        raise permanent(
            "InvalidConfig",
            f"config.metacontroller.hookVersion: must be v1 or v2, found {json.dumps(version)}",
        )
    child_types = mc.get("childTypes", [])
    if not isinstance(child_types, list) or any(not isinstance(t, str) for t in child_types):
        raise permanent("InvalidConfig", "config.metacontroller.childTypes: must be a list of Kind.apiVersion strings")
    controller = mc.get("controller")
    return {"version": version, "child_types": child_types, "controller": {} if controller is None else controller}


def to_hook_request(req: Request) -> Dict[str, Any]:
    """Metacontroller's sync-hook request for a host :class:`Request`."""
    s = settings(req.config)
    parent_ns = namespace_of(req.parent)
    children: Dict[str, Dict[str, Any]] = {t: {} for t in s["child_types"]}
    _group(children, req.children, s["version"], parent_ns, "children")
    related = _group({}, req.related, s["version"], parent_ns, "related")
    return {
        "controller": s["controller"],
        "parent": req.parent,
        "children": children,
        "related": related,
        "finalizing": req.finalizing,
    }


def object_key(obj: Any, version: str, parent_namespace: Optional[str]) -> str:
    """The key of ``obj`` in its group: v1 the name (namespace/name when the
    object is in another namespace than the parent, e.g. under a
    cluster-scoped parent); v2 namespace/name for every namespaced object."""
    name = name_of(obj)
    ns = namespace_of(obj)
    if ns is None or (version == "v1" and ns == parent_namespace):
        return name
    return f"{ns}/{name}"


def _group(into: Dict[str, Dict[str, Any]], objects: List[Any], version: str, parent_ns: Optional[str], what: str):
    for i, obj in enumerate(objects):
        kind = kind_of(obj)
        api_version = obj.get("apiVersion") if isinstance(obj, dict) else None
        if kind is None or not isinstance(api_version, str) or name_of(obj) is None:
            raise permanent("InvalidRequest", f"{what}[{i}]: apiVersion, kind or metadata.name missing")
        into.setdefault(f"{kind}.{api_version}", {})[object_key(obj, version, parent_ns)] = obj
    return into


def from_hook_response(hook_response: Any) -> Response:
    """The host :class:`Response` for a Metacontroller hook response."""
    if not isinstance(hook_response, dict):
        raise permanent("InvalidHookResponse", "the hook must return an object")
    response = Response()

    children = hook_response.get("children")
    children = [] if children is None else children
    if not isinstance(children, list):
        raise permanent("InvalidHookResponse", "children: must be a list")
    for c in children:
        response.child(c)

    status = hook_response.get("status")
    if status is not None:
        if not isinstance(status, dict):
            raise permanent("InvalidHookResponse", "status: must be an object")
        rest = dict(status)
        conditions = rest.pop("conditions", None)
        if conditions is not None:
            if not isinstance(conditions, list):
                raise permanent("InvalidHookResponse", "status.conditions: must be a list")
            for i, c in enumerate(conditions):
                response.condition(_condition(c, i))
        response.set_status(rest)

    resync = hook_response.get("resyncAfterSeconds")
    if resync is not None:
        if isinstance(resync, bool) or not isinstance(resync, (int, float)) or not math.isfinite(resync):
            raise permanent("InvalidHookResponse", "resyncAfterSeconds: must be a number")
        # Metacontroller accepts fractions; the host counts whole seconds, so
        # round up (never sooner than asked). Zero or less asks for nothing.
        if resync > 0:
            response.requeue_after(min(math.ceil(resync), _MAX_U32))

    finalized = hook_response.get("finalized")
    finalized = False if finalized is None else finalized
    if not isinstance(finalized, bool):
        raise permanent("InvalidHookResponse", "finalized: must be a boolean")
    response.set_finalized(finalized)
    return response


def _condition(c: Any, i: int) -> Condition:
    # A condition in the hook's status becomes a host condition (the host
    # adds observedGeneration and lastTransitionTime; the hook's are not kept).
    field = f"status.conditions[{i}]"
    if not isinstance(c, dict) or not isinstance(c.get("type"), str) or c["type"] == "":
        raise permanent("InvalidHookResponse", f"{field}: must be an object with a type")
    if c["type"] == "Ready":
        raise permanent(
            "InvalidHookResponse",
            f"{field}: type Ready is owned by the host (it reports whether the reconcile succeeded); "
            "give the hook's condition another type",
        )
    reason = c.get("reason")
    reason = reason if isinstance(reason, str) and reason != "" else DEFAULT_CONDITION_REASON
    message = c.get("message")
    message = message if isinstance(message, str) else ""
    status = c.get("status")
    if status not in ("True", "False", "Unknown"):
        raise permanent(
            "InvalidHookResponse",
            f'{field}.status: must be "True", "False" or "Unknown", found {json.dumps(status)}',
        )
    return Condition(c["type"], status, reason, message)

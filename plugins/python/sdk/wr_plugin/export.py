"""Glue between a plugin function and the component's ``reconcile`` export.

The component's entry module (``app.py``) passes in the WIT bindings that
componentize-py generates (``wit_world.imports.types`` and the host ``log``),
so this module never imports them and is unit-tested natively with stand-ins.
"""

from __future__ import annotations

import json
import traceback
from typing import Any, Callable

from .errors import PluginError
from .request import Request
from .response import Response

_STATUS = {"True": "TRUE", "False": "FALSE", "Unknown": "UNKNOWN"}
_EVENT = {"Normal": "NORMAL", "Warning": "WARNING"}


def to_json(value: Any) -> str:
    """Compact JSON text, non-ASCII kept as is (the host parses it as JSON)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def dispatch(
    reconcile: Callable[[Request], Response],
    wit_request: Any,
    types: Any,
    log: Callable[[Any, str], None],
) -> Any:
    """Runs ``reconcile`` on a WIT request and returns the WIT response.

    A :class:`PluginError` becomes ``Err(reconcile-error)``. Any other
    exception is a bug: it is logged and re-raised, so the call traps and the
    host reports a plugin fault, like a Rust panic.
    """
    try:
        response = reconcile(Request.from_wit(wit_request))
        return _to_wit_response(response, types)
    except PluginError as e:
        variant = types.ReconcileError_Permanent if e.is_permanent else types.ReconcileError_Transient
        raise types.Err(variant(types.ErrorDetail(reason=e.reason, message=e.message))) from None
    except Exception:
        log(types.LogLevel.ERROR, "uncaught exception: " + traceback.format_exc())
        raise


def _to_wit_response(resp: Response, types: Any) -> Any:
    return types.ReconcileResponse(
        children=[to_json(c) for c in resp.children],
        conditions=[
            types.Condition(
                type=c.type,
                status=getattr(types.ConditionStatus, _STATUS[c.status]),
                reason=c.reason,
                message=c.message,
            )
            for c in resp.conditions
        ],
        status=None if resp.status is None else to_json(resp.status),
        requeue_after_seconds=resp.requeue_after_seconds,
        events=[
            types.Event(type=getattr(types.EventType, _EVENT[e.type]), reason=e.reason, message=e.message)
            for e in resp.events
        ],
        finalized=resp.finalized,
    )

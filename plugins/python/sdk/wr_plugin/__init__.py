"""Python SDK for wasm-reconciler plugins.

A plugin is a plain function from a :class:`Request` to a :class:`Response`::

    from wr_plugin import Request, Response, child_name, new_object

    def reconcile(req: Request) -> Response:
        cm = new_object("v1", "ConfigMap", req.namespace(), child_name(req.name(), "config"))
        return Response().child(cm)

The component's entry module wires it to the WIT export (see
``plugins/python/static-site/app.py``). Everything here is plain Python, so
the logic is unit-tested natively with pytest.
"""

from .errors import PluginError, invalid_spec, permanent, transient
from .export import dispatch, to_json
from .metacontroller import (
    DEFAULT_CONDITION_REASON,
    from_hook_response,
    metacontroller_hook,
    object_key,
    to_hook_request,
)
from .names import MAX_LABEL_LEN, child_name, content_hash, is_dns1123_label
from .objects import (
    annotate,
    annotation_of,
    find,
    get,
    kind_of,
    label,
    label_of,
    name_of,
    namespace_of,
    new_object,
)
from .request import Request
from .response import Condition, Event, Response
from .rust import as_i64, debug_quote, is_blank, utf8_len

__all__ = [
    "PluginError", "invalid_spec", "permanent", "transient",
    "dispatch", "to_json",
    "DEFAULT_CONDITION_REASON", "from_hook_response", "metacontroller_hook", "object_key", "to_hook_request",
    "MAX_LABEL_LEN", "child_name", "content_hash", "is_dns1123_label",
    "annotate", "annotation_of", "find", "get", "kind_of", "label", "label_of",
    "name_of", "namespace_of", "new_object",
    "Request", "Condition", "Event", "Response",
    "as_i64", "debug_quote", "is_blank", "utf8_len",
]

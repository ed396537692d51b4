"""{{name}}: the reconcile logic for ``{{kind}}`` objects. A plain function
from a Request to a Response (raises PluginError), unit tested with pytest
(src/test_plugin.py) and built into the component by ../build.sh."""

from wr_plugin import Condition, Request, Response, invalid_spec, label, new_object


def reconcile(req: Request) -> Response:
    name = req.name()
    spec = req.parent.get("spec") or {}
    message = spec.get("message")
    if message is None:
        message = "hello"
    if not isinstance(message, str):
        raise invalid_spec("spec.message", "must be a string")

    config_map = new_object("v1", "ConfigMap", req.namespace(), f"{name}-greeting")
    label(config_map, "app.kubernetes.io/managed-by", "wasm-reconciler")
    config_map["data"] = {"message": message}

    return (
        Response()
        .child(config_map)
        .condition(Condition.true("Greeted", "ConfigMapRendered"))
        .set_status({"message": message})
    )

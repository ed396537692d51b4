"""Component entry: the Metacontroller-shaped hooks wrapped into the
reconcile contract. Only this module touches the generated bindings."""

import wit_world
from wit_world.imports import host, types

import noticeboard
from wr_plugin import dispatch, metacontroller_hook

_RECONCILE = metacontroller_hook(noticeboard.sync, finalize=noticeboard.finalize)


class WitWorld(wit_world.WitWorld):
    def reconcile(self, request: types.ReconcileRequest) -> types.ReconcileResponse:
        return dispatch(_RECONCILE, request, types, host.log)

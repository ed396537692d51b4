"""Component entry: wires the plugin function to the WIT world's export and
the host's ``log`` import. Only this module touches the generated bindings."""

import wit_world
from wit_world.imports import host, types

import plugin
from wr_plugin import dispatch


class WitWorld(wit_world.WitWorld):
    def reconcile(self, request: types.ReconcileRequest) -> types.ReconcileResponse:
        return dispatch(plugin.reconcile, request, types, host.log)

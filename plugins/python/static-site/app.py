"""Component entry: wires the plugin function to the WIT world's export and
the host's ``log`` import. Only this module touches the generated bindings,
so ``static_site`` is unit-tested natively."""

import wit_world
from wit_world.imports import host, types

import static_site
from wr_plugin import dispatch


class WitWorld(wit_world.WitWorld):
    def reconcile(self, request: types.ReconcileRequest) -> types.ReconcileResponse:
        return dispatch(static_site.reconcile, request, types, host.log)

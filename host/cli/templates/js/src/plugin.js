// {{name}}: the reconcile logic for `{{kind}}` objects. A plain function from
// a Request to a Response (throws a PluginError), unit tested under Node.js
// (src/plugin.test.js) and built into the component by ../build.sh.

import { Condition, Response, invalidSpec, label, object } from "../sdk/index.js";

export function reconcile(req) {
  const name = req.name();
  const message = req.parent.spec?.message ?? "hello";
  if (typeof message !== "string") throw invalidSpec("spec.message", "must be a string");

  const configMap = object("v1", "ConfigMap", req.namespace(), `${name}-greeting`);
  label(configMap, "app.kubernetes.io/managed-by", "wasm-reconciler");
  configMap.data = { message };

  return new Response()
    .child(configMap)
    .condition(Condition.true("Greeted", "ConfigMapRendered"))
    .setStatus({ message });
}

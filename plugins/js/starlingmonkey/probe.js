// A minimal plugin built with componentize-js (StarlingMonkey): one
// ConfigMap per parent. It exists to show what the host does with a
// StarlingMonkey build in its default configuration (which imports
// wasi:http for fetch(); refused with the fix named) and with
// `disableFeatures: ["http", "fetch-event"]` (loads and reconciles). Built by build.sh.
export function reconcile(request) {
  const parent = JSON.parse(request.parent);
  const name = parent.metadata.name;
  const child = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: `${name}-probe`, namespace: parent.metadata.namespace },
    data: { built: "componentize-js" },
  };
  return {
    children: [JSON.stringify(child)],
    conditions: [],
    status: undefined,
    requeueAfterSeconds: undefined,
    events: [],
    finalized: false,
  };
}

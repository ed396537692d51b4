// noticeboard: an example of a hook written for Metacontroller's sync and
// finalize hook shapes (plain objects in, plain objects out), run unchanged
// by the SDK's `metacontrollerHook` wrapper. The Python port
// (plugins/python/noticeboard) gives the same answers.
//
// A `Notice` parent (spec.message, spec.copies) is posted as `copies`
// ConfigMaps `<name>-<i>`. The message defaults to `data.message` of the
// related ConfigMap `noticeboard-defaults`. Status counts the copies observed
// and up to date; while some are missing the hook asks to be called again in
// 1.5 s. On delete the copies are taken down one at a time, highest index
// first, and the hook reports `finalized` once none is left.

const DEFAULTS = "noticeboard-defaults";

/** The sync hook: {controller, parent, children, related, finalizing} -> {status, children, resyncAfterSeconds}. */
export function sync(request) {
  const parent = request.parent;
  const spec = parent.spec || {};
  const copies = Number.isInteger(spec.copies) && spec.copies >= 0 ? spec.copies : 1;
  const defaults = (request.related["ConfigMap.v1"] || {})[key(request, DEFAULTS)];
  const message = spec.message || (defaults && defaults.data && defaults.data.message) || "(no message)";
  const observed = request.children["ConfigMap.v1"];

  const children = [];
  let upToDate = 0;
  for (let i = 0; i < copies; i++) {
    const name = `${parent.metadata.name}-${i}`;
    const seen = observed[key(request, name)];
    if (seen && seen.data && seen.data.message === message) upToDate++;
    children.push({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name, labels: { "noticeboard.example.com/controller": request.controller.metadata.name } },
      data: { message, index: String(i) },
    });
  }
  const posted = upToDate === copies;
  return {
    status: {
      observedCopies: Object.keys(observed).length,
      upToDate,
      conditions: [
        {
          type: "Posted",
          status: posted ? "True" : "False",
          reason: posted ? "AllCopiesPosted" : "CopiesPending",
          message: `${upToDate}/${copies} copies posted`,
        },
      ],
    },
    children,
    resyncAfterSeconds: posted ? 0 : 1.5,
  };
}

/** The finalize hook: ordered teardown, then `finalized`. */
export function finalize(request) {
  const observed = Object.values(request.children["ConfigMap.v1"]);
  const byIndex = observed
    .map((c) => ({ index: Number((c.data && c.data.index) || 0), child: c }))
    .sort((a, b) => a.index - b.index);
  const keep = byIndex.slice(0, -1).map(({ child }) => {
    const metadata = { name: child.metadata.name };
    if (child.metadata.labels !== undefined && child.metadata.labels !== null) metadata.labels = child.metadata.labels;
    return { apiVersion: "v1", kind: "ConfigMap", metadata, data: child.data };
  });
  return {
    status: { observedCopies: observed.length, tearingDown: true },
    children: keep,
    finalized: observed.length === 0,
  };
}

// Hook version v2 keys namespaced objects by namespace/name, v1 by name (in
// the parent's namespace): a hook reads the version from its controller.
function key(request, name) {
  const version = (((request.controller.spec || {}).hooks || {}).sync || {}).version;
  return version === "v2" ? `${request.parent.metadata.namespace}/${name}` : name;
}

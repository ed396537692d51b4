"""noticeboard: an example of a hook written for Metacontroller's sync and
finalize hook shapes (plain dicts in, plain dicts out), run unchanged by the
SDK's ``metacontroller_hook`` wrapper. Same answers as the JavaScript port
(plugins/js/noticeboard).

A ``Notice`` parent (spec.message, spec.copies) is posted as ``copies``
ConfigMaps ``<name>-<i>``. The message defaults to ``data.message`` of the
related ConfigMap ``noticeboard-defaults``. Status counts the copies observed
and up to date; while some are missing the hook asks to be called again in
1.5 s. On delete the copies are taken down one at a time, highest index
first, and the hook reports ``finalized`` once none is left.
"""

DEFAULTS = "noticeboard-defaults"


def sync(request):
    """The sync hook: {controller, parent, children, related, finalizing} -> {status, children, resyncAfterSeconds}."""
    parent = request["parent"]
    spec = parent.get("spec") or {}
    copies = spec.get("copies")
    if not (isinstance(copies, int) and not isinstance(copies, bool) and copies >= 0):
        copies = 1
    defaults = request["related"].get("ConfigMap.v1", {}).get(_key(request, DEFAULTS))
    message = spec.get("message") or ((defaults or {}).get("data") or {}).get("message") or "(no message)"
    observed = request["children"]["ConfigMap.v1"]

    children = []
    up_to_date = 0
    for i in range(copies):
        name = f"{parent['metadata']['name']}-{i}"
        seen = observed.get(_key(request, name))
        if seen and (seen.get("data") or {}).get("message") == message:
            up_to_date += 1
        children.append({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"noticeboard.example.com/controller": request["controller"]["metadata"]["name"]}},
            "data": {"message": message, "index": str(i)},
        })
    posted = up_to_date == copies
    return {
        "status": {
            "observedCopies": len(observed),
            "upToDate": up_to_date,
            "conditions": [{
                "type": "Posted",
                "status": "True" if posted else "False",
                "reason": "AllCopiesPosted" if posted else "CopiesPending",
                "message": f"{up_to_date}/{copies} copies posted",
            }],
        },
        "children": children,
        "resyncAfterSeconds": 0 if posted else 1.5,
    }


def finalize(request):
    """The finalize hook: ordered teardown, then ``finalized``."""
    observed = list(request["children"]["ConfigMap.v1"].values())
    by_index = sorted(observed, key=lambda c: int((c.get("data") or {}).get("index") or 0))
    keep = []
    for c in by_index[:-1]:
        metadata = {"name": c["metadata"]["name"]}
        if c["metadata"].get("labels") is not None:
            metadata["labels"] = c["metadata"]["labels"]
        child = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}
        if c.get("data") is not None:
            child["data"] = c["data"]
        keep.append(child)
    return {
        "status": {"observedCopies": len(observed), "tearingDown": True},
        "children": keep,
        "finalized": len(observed) == 0,
    }


def _key(request, name):
    # Hook version v2 keys namespaced objects by namespace/name, v1 by name
    # (in the parent's namespace): a hook reads the version from its controller.
    version = (((request["controller"].get("spec") or {}).get("hooks") or {}).get("sync") or {}).get("version")
    return f"{request['parent']['metadata']['namespace']}/{name}" if version == "v2" else name

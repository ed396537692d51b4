// Runs a Metacontroller sync hook unchanged as a plugin: the host's request
// is turned into Metacontroller's sync-hook request and the hook's response
// into the host's response.
//
//   request  {controller, parent, children, related, finalizing}
//            children/related keyed by "Kind.apiVersion", then by name
//            (hook version v1) or namespace/name (v2)
//   response {status, children, resyncAfterSeconds, finalized}
//
// The settings the wrapper needs come from the WasmController's
// `spec.plugin.config.metacontroller` (written by `wasm-reconciler import
// metacontroller`): `hookVersion` (v1 or v2), `childTypes` (the
// "Kind.apiVersion" keys that always have an entry in `children`, empty or
// not, as Metacontroller sends them) and `controller` (the object sent as
// `controller`). See docs/migrating-from-metacontroller.md.

import { permanent } from "./errors.js";
import { kindOf, nameOf, namespaceOf } from "./object.js";
import { Condition, Response } from "./response.js";

const obj = (v) => (v !== null && typeof v === "object" && !Array.isArray(v) ? v : undefined);
const MAX_U32 = 4294967295;

/** Reason given to a hook condition that has none (the host requires one). */
export const DEFAULT_CONDITION_REASON = "Unspecified";

/**
 * Wraps Metacontroller hooks as a reconcile function (`Request -> Response`)
 * for `exportReconciler`. `finalize` is called instead of `sync` when the
 * parent is being deleted (Metacontroller's finalize hook); without it `sync`
 * is called with `finalizing: true`, as when both hooks share a handler.
 *
 * @param {(request: object) => object} sync the sync hook
 * @param {{finalize?: (request: object) => object}} [hooks]
 */
export function metacontrollerHook(sync, { finalize } = {}) {
  return function reconcile(req) {
    const hookRequest = toHookRequest(req);
    const hook = req.finalizing && finalize ? finalize : sync;
    return fromHookResponse(hook(hookRequest));
  };
}

/** The wrapper's settings from `config.metacontroller` (defaults: v1, no child types, `{}`). */
export function settings(config) {
  const mc = obj(obj(config)?.metacontroller) ?? {};
  const version = mc.hookVersion ?? "v1";
  if (version !== "v1" && version !== "v2") {
    throw permanent("InvalidConfig", `config.metacontroller.hookVersion: must be v1 or v2, found ${JSON.stringify(version)}`);
  }
  const childTypes = mc.childTypes ?? [];
  if (!Array.isArray(childTypes) || childTypes.some((t) => typeof t !== "string")) {
    throw permanent("InvalidConfig", "config.metacontroller.childTypes: must be a list of Kind.apiVersion strings");
  }
  return { version, childTypes, controller: mc.controller ?? {} };
}

/** Metacontroller's sync-hook request for a host `Request`. */
export function toHookRequest(req) {
  const { version, childTypes, controller } = settings(req.config);
  const parentNamespace = namespaceOf(req.parent);
  const children = {};
  for (const type of childTypes) children[type] = {};
  group(children, req.children, version, parentNamespace, "children");
  const related = group({}, req.related, version, parentNamespace, "related");
  return { controller, parent: req.parent, children, related, finalizing: req.finalizing };
}

/** The key of `o` in its group: v1 the name (namespace/name when the object
 * is in another namespace than the parent, e.g. under a cluster-scoped
 * parent); v2 namespace/name for every namespaced object. */
export function objectKey(o, version, parentNamespace) {
  const name = nameOf(o);
  const ns = namespaceOf(o);
  if (ns === undefined) return name;
  if (version === "v1" && ns === parentNamespace) return name;
  return `${ns}/${name}`;
}

function group(into, objects, version, parentNamespace, what) {
  objects.forEach((o, i) => {
    const kind = kindOf(o);
    const apiVersion = obj(o)?.apiVersion;
    if (kind === undefined || typeof apiVersion !== "string" || nameOf(o) === undefined) {
      throw permanent("InvalidRequest", `${what}[${i}]: apiVersion, kind or metadata.name missing`);
    }
    const type = `${kind}.${apiVersion}`;
    if (!obj(into[type])) into[type] = {};
    into[type][objectKey(o, version, parentNamespace)] = o;
  });
  return into;
}

/** The host `Response` for a Metacontroller hook response. */
export function fromHookResponse(hookResponse) {
  const r = obj(hookResponse);
  if (r === undefined) throw permanent("InvalidHookResponse", "the hook must return an object");
  const response = new Response();

  const children = r.children ?? [];
  if (!Array.isArray(children)) throw permanent("InvalidHookResponse", "children: must be a list");
  children.forEach((c) => response.child(c));

  if (r.status !== undefined && r.status !== null) {
    const status = obj(r.status);
    if (status === undefined) throw permanent("InvalidHookResponse", "status: must be an object");
    const { conditions, ...rest } = status;
    if (conditions !== undefined && conditions !== null) {
      if (!Array.isArray(conditions)) throw permanent("InvalidHookResponse", "status.conditions: must be a list");
      conditions.forEach((c, i) => response.condition(condition(c, i)));
    }
    response.setStatus(rest);
  }

  const resync = r.resyncAfterSeconds;
  if (resync !== undefined && resync !== null) {
    if (typeof resync !== "number" || !Number.isFinite(resync)) {
      throw permanent("InvalidHookResponse", "resyncAfterSeconds: must be a number");
    }
    // Metacontroller accepts fractions; the host counts whole seconds, so
    // round up (never sooner than asked). Zero or less asks for nothing.
    if (resync > 0) response.requeueAfter(Math.min(Math.ceil(resync), MAX_U32));
  }

  const finalized = r.finalized ?? false;
  if (typeof finalized !== "boolean") throw permanent("InvalidHookResponse", "finalized: must be a boolean");
  response.setFinalized(finalized);
  return response;
}

// A condition in the hook's status becomes a host condition (the host adds
// observedGeneration and lastTransitionTime; the hook's are not kept).
function condition(c, i) {
  const field = `status.conditions[${i}]`;
  const o = obj(c);
  if (o === undefined || typeof o.type !== "string" || o.type === "") {
    throw permanent("InvalidHookResponse", `${field}: must be an object with a type`);
  }
  if (o.type === "Ready") {
    throw permanent("InvalidHookResponse", `${field}: type Ready is owned by the host (it reports whether the reconcile succeeded); give the hook's condition another type`);
  }
  const reason = typeof o.reason === "string" && o.reason !== "" ? o.reason : DEFAULT_CONDITION_REASON;
  const message = typeof o.message === "string" ? o.message : "";
  switch (o.status) {
    case "True":
      return Condition.true(o.type, reason, message);
    case "False":
      return Condition.false(o.type, reason, message);
    case "Unknown":
      return Condition.unknown(o.type, reason, message);
    default:
      throw permanent("InvalidHookResponse", `${field}.status: must be "True", "False" or "Unknown", found ${JSON.stringify(o.status)}`);
  }
}

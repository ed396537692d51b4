// JavaScript SDK for wasm-reconciler plugins.
//
// A plugin is a plain function from a `Request` to a `Response`; the
// component entry module wires it to the WIT export with `exportReconciler`:
//
//   import { log } from "wasm-reconciler:plugin/host@0.1.0";
//   import { exportReconciler } from "../sdk/index.js";
//   import { staticSite } from "./plugin.js";
//   export const reconcile = exportReconciler(staticSite, log);
//
// Everything here is plain ES2020, runs under Node.js for unit tests and
// under QuickJS inside the component.

export { PluginError, permanent, transient, invalidSpec } from "./errors.js";
export { Request } from "./request.js";
export { Response, Condition, Event } from "./response.js";
export { object, label, annotate, find, get, nameOf, namespaceOf, kindOf, labelOf, annotationOf } from "./object.js";
export { childName, contentHash, isDns1123Label, MAX_LABEL_LEN } from "./names.js";
export { sha256Hex } from "./sha256.js";
export { utf8Encode, utf8Length } from "./utf8.js";
export { isBlank, debugQuote, asI64 } from "./rust.js";
export { exportReconciler, LogLevel } from "./export.js";
export { metacontrollerHook, toHookRequest, fromHookResponse, objectKey, DEFAULT_CONDITION_REASON } from "./metacontroller.js";

// Component entry: the Metacontroller-shaped hooks wrapped into the
// reconcile contract. Only this file touches the WIT bindings.

import { log } from "wasm-reconciler:plugin/host@0.1.0";
import { exportReconciler, metacontrollerHook } from "../sdk/index.js";
import { finalize, sync } from "./hook.js";

export const reconcile = exportReconciler(metacontrollerHook(sync, { finalize }), log);

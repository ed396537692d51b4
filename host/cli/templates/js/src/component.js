// Component entry: wires the plugin function to the WIT world's export and
// the host's `log` import. Only this file touches the WIT bindings.

import { log } from "wasm-reconciler:plugin/host@0.1.0";
import { exportReconciler } from "../sdk/index.js";
import { reconcile as plugin } from "./plugin.js";

export const reconcile = exportReconciler(plugin, log);

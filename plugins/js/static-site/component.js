// Component entry: wires the plugin function to the WIT world's export and
// the host's `log` import. Only this file touches the WIT bindings, so
// plugin.js is unit-tested under Node.js.

import { log } from "wasm-reconciler:plugin/host@0.1.0";
import { exportReconciler } from "../sdk/index.js";
import { staticSite } from "./plugin.js";

export const reconcile = exportReconciler(staticSite, log);

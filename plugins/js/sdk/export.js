// Glue between a plugin function and the component's `reconcile` export.

import { PluginError } from "./errors.js";
import { Request } from "./request.js";

/** Log levels of the WIT `log-level` enum. */
export const LogLevel = { TRACE: "trace", DEBUG: "debug", INFO: "info", WARN: "warn", ERROR: "error" };

/**
 * Wraps `reconcile(request: Request) -> Response` as the WIT export.
 * A thrown `PluginError` becomes the WIT error variant. Any other exception is
 * a bug: it is logged through `log` (the host import) and rethrown, so the
 * call traps and the host reports a plugin fault, like a Rust panic.
 *
 * @param {(req: Request) => import("./response.js").Response} reconcile
 * @param {(level: string, message: string) => void} log the host's `log` import
 */
export function exportReconciler(reconcile, log) {
  return function witReconcile(witRequest) {
    try {
      return reconcile(Request.fromWit(witRequest)).toWit();
    } catch (e) {
      if (e instanceof PluginError) throw e.toWit();
      log("error", `uncaught exception: ${e && e.stack ? e.stack : e}`);
      throw e;
    }
  };
}

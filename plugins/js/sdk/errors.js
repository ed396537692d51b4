// The plugin's error: permanent (retrying the same input cannot help) or
// transient (retry with backoff). Thrown from a reconcile function, turned
// into the WIT `reconcile-error` variant by `exportReconciler`.

export class PluginError extends Error {
  /**
   * @param {"permanent"|"transient"} kind
   * @param {string} reason CamelCase, shown on the parent's Ready condition
   * @param {string} message human-readable detail
   */
  constructor(kind, reason, message) {
    super(`${kind} error ${reason}: ${message}`);
    this.name = "PluginError";
    this.kind = kind;
    this.reason = reason;
    this.detail = message;
  }

  get isPermanent() {
    return this.kind === "permanent";
  }

  /** The WIT `reconcile-error` value (`{ tag, val }`). */
  toWit() {
    return { tag: this.kind, val: { reason: this.reason, message: this.detail } };
  }
}

/** A permanent error with a CamelCase `reason`. */
export const permanent = (reason, message) => new PluginError("permanent", reason, message);
/** A transient error with a CamelCase `reason`. */
export const transient = (reason, message) => new PluginError("transient", reason, message);
/** Permanent `InvalidSpec` error naming the field: `invalidSpec("spec.replicas", "must be >= 0")`. */
export const invalidSpec = (field, problem) => permanent("InvalidSpec", `${field}: ${problem}`);

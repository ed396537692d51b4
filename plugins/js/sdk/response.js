// The response and its parts, with small builders mirroring the Rust SDK.

/** Condition constructors; the host adds observedGeneration and lastTransitionTime. */
export const Condition = {
  true: (type, reason, message = "") => ({ type, status: "true", reason, message }),
  false: (type, reason, message = "") => ({ type, status: "false", reason, message }),
  unknown: (type, reason, message = "") => ({ type, status: "unknown", reason, message }),
};

/** Event constructors; the host deduplicates events. */
export const Event = {
  normal: (reason, message) => ({ type: "normal", reason, message }),
  warning: (reason, message) => ({ type: "warning", reason, message }),
};

/**
 * What the plugin wants: the complete desired set of children (an observed
 * child missing from it is deleted), conditions, a status patch, events.
 */
export class Response {
  constructor() {
    this.children = [];
    this.conditions = [];
    this.status = null;
    this.requeueAfterSeconds = null;
    this.events = [];
    this.finalized = false;
  }

  /** Adds a desired child (an object with apiVersion, kind, metadata.name). */
  child(object) {
    this.children.push(object);
    return this;
  }

  condition(condition) {
    this.conditions.push(condition);
    return this;
  }

  /** Sets the JSON object merged into the parent's `.status`. */
  setStatus(status) {
    this.status = status;
    return this;
  }

  requeueAfter(seconds) {
    this.requeueAfterSeconds = seconds;
    return this;
  }

  event(event) {
    this.events.push(event);
    return this;
  }

  /** Teardown complete (only read when the request was `finalizing`). */
  setFinalized(done = true) {
    this.finalized = done;
    return this;
  }

  /** The WIT `reconcile-response` (objects serialised to JSON text). */
  toWit() {
    return {
      children: this.children.map((c) => JSON.stringify(c)),
      conditions: this.conditions.map((c) => ({ type: c.type, status: c.status, reason: c.reason, message: c.message })),
      status: this.status === null || this.status === undefined ? null : JSON.stringify(this.status),
      requeueAfterSeconds: this.requeueAfterSeconds ?? null,
      events: this.events.map((e) => ({ type: e.type, reason: e.reason, message: e.message })),
      finalized: this.finalized,
    };
  }
}

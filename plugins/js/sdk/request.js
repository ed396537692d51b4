// The request as a plugin sees it: the WIT record with every JSON text parsed.

import { permanent } from "./errors.js";
import { find, nameOf, namespaceOf } from "./object.js";

export class Request {
  /**
   * @param {object} fields parent (object), children, related (arrays of
   *   objects), finalizing (bool), config (any JSON value or null), now (RFC 3339)
   */
  constructor({ parent, children = [], related = [], finalizing = false, config = null, now = "1970-01-01T00:00:00Z" }) {
    this.parent = parent;
    this.children = children;
    this.related = related;
    this.finalizing = finalizing;
    this.config = config;
    this.now = now;
  }

  /** Parses the WIT `reconcile-request` (objects as JSON text). */
  static fromWit(wit) {
    return new Request({
      parent: parseJson(wit.parent, "parent"),
      children: wit.children.map((c, i) => parseJson(c, `children[${i}]`)),
      related: wit.related.map((c, i) => parseJson(c, `related[${i}]`)),
      finalizing: wit.finalizing,
      config: wit.config === undefined || wit.config === null ? null : parseJson(wit.config, "config"),
      now: wit.now,
    });
  }

  /** The parent's `metadata.name`; a permanent `InvalidParent` error if missing. */
  name() {
    const name = nameOf(this.parent);
    if (name === undefined) throw permanent("InvalidParent", "parent has no metadata.name");
    return name;
  }

  /** The parent's `metadata.namespace` (undefined for cluster-scoped parents). */
  namespace() {
    return namespaceOf(this.parent);
  }

  /** The observed child of `kind` named `name`, if any. */
  child(kind, name) {
    return find(this.children, kind, name);
  }
}

function parseJson(text, what) {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw permanent("InvalidRequest", `${what} is not valid JSON: ${e.message}`);
  }
}

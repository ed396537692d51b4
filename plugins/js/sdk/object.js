// Helpers over Kubernetes objects held as plain parsed JSON.

const str = (v) => (typeof v === "string" ? v : undefined);
const obj = (v) => (v !== null && typeof v === "object" && !Array.isArray(v) ? v : undefined);

/** `metadata.name` (undefined when missing or not a string). */
export const nameOf = (o) => str(obj(obj(o)?.metadata)?.name);
/** `metadata.namespace`. */
export const namespaceOf = (o) => str(obj(obj(o)?.metadata)?.namespace);
/** `kind`. */
export const kindOf = (o) => str(obj(o)?.kind);
/** `metadata.labels[key]`. */
export const labelOf = (o, key) => str(obj(obj(obj(o)?.metadata)?.labels)?.[key]);
/** `metadata.annotations[key]`. */
export const annotationOf = (o, key) => str(obj(obj(obj(o)?.metadata)?.annotations)?.[key]);

/** A JSON object's own property, or undefined (never one from the prototype). */
export function get(o, key) {
  const m = obj(o);
  return m && Object.prototype.hasOwnProperty.call(m, key) ? m[key] : undefined;
}

/**
 * A new object with apiVersion, kind and metadata (name, and namespace when
 * given). Add the rest with `o.spec = {...}`.
 */
export function object(apiVersion, kind, namespace, name) {
  const metadata = { name };
  if (namespace !== undefined && namespace !== null) metadata.namespace = namespace;
  return { apiVersion, kind, metadata };
}

/** Sets `metadata.labels[key] = value`, creating maps as needed. */
export const label = (o, key, value) => setMetaMap(o, "labels", key, value);
/** Sets `metadata.annotations[key] = value`, creating maps as needed. */
export const annotate = (o, key, value) => setMetaMap(o, "annotations", key, value);

function setMetaMap(o, map, key, value) {
  if (!obj(o)) return;
  if (!obj(o.metadata)) o.metadata = {};
  if (!obj(o.metadata[map])) o.metadata[map] = {};
  o.metadata[map][key] = value;
}

/** The object of `kind` named `name` in `objects` (e.g. observed children). */
export function find(objects, kind, name) {
  return objects.find((o) => kindOf(o) === kind && nameOf(o) === name);
}

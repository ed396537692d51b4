// Deterministic, valid Kubernetes names for children; same results as the
// Rust SDK's `child_name`, so a plugin ported between languages keeps its
// children's names.

import { sha256Hex } from "./sha256.js";

/** Longest DNS-1123 label (Service names; a safe bound for every kind). */
export const MAX_LABEL_LEN = 63;
const HASH_LEN = 10;

/**
 * Name for a child of `parent` with `suffix`: `childName("web", "config")`
 * is `"web-config"`. Always a valid DNS-1123 label. Invalid characters become
 * `-`; when the name had to change or is too long it is cut and
 * `-<10 hex of sha256(parent/suffix)>` appended, so distinct inputs keep
 * distinct names.
 */
export function childName(parent, suffix = "") {
  const raw = suffix === "" ? parent : `${parent}-${suffix}`;
  const clean = sanitize(raw);
  if (clean.length <= MAX_LABEL_LEN && clean === raw && clean !== "") return clean;
  const hash = sha256Hex(`${parent}/${suffix}`).slice(0, HASH_LEN);
  const keep = MAX_LABEL_LEN - HASH_LEN - 1;
  const prefix = clean.slice(0, keep).replace(/-+$/, "");
  return prefix === "" ? hash : `${prefix}-${hash}`;
}

/** Lowercase hex SHA-256 of a string (as UTF-8) or byte array. */
export function contentHash(input) {
  return sha256Hex(input);
}

/** Whether `name` is a valid DNS-1123 label. */
export function isDns1123Label(name) {
  return typeof name === "string" && name.length <= MAX_LABEL_LEN && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name);
}

// One output character per Unicode scalar value (as Rust's `chars()`), so
// non-ASCII input maps exactly as in the Rust SDK.
function sanitize(raw) {
  let out = "";
  for (const ch of raw) {
    const c = ch.length === 1 && ch >= "A" && ch <= "Z" ? ch.toLowerCase() : ch;
    out += (c >= "a" && c <= "z") || (c >= "0" && c <= "9") ? c : "-";
  }
  return out.replace(/^-+|-+$/g, "");
}

// The StaticSite spec and the controller config, validated with messages
// that name the offending field (same messages as plugins/static-site).

import { asI64, contentHash, debugQuote, get, invalidSpec, isBlank, permanent, utf8Encode, utf8Length } from "../sdk/index.js";

/** Largest total content: a ConfigMap holds at most 1 MiB. */
export const MAX_CONTENT_BYTES = 1024 * 1024 - 4096;
const DEFAULT_DOMAIN = "cluster.local";

/** Reads and validates `parent.spec`: { image, replicas, port, content }. */
export function parseSpec(parent) {
  const spec = get(parent, "spec");
  const image = get(spec, "image");
  if (image === undefined || image === null || (typeof image === "string" && isBlank(image))) {
    throw invalidSpec("spec.image", "required");
  }
  if (typeof image !== "string") throw invalidSpec("spec.image", "must be a string");
  const replicas = intField(spec, "replicas", 1);
  if (replicas < 0) throw invalidSpec("spec.replicas", `must be >= 0, got ${replicas}`);
  const port = intField(spec, "port", 80);
  if (port < 1 || port > 65535) throw invalidSpec("spec.port", `must be between 1 and 65535, got ${port}`);
  return { image, replicas, port, content: contentField(spec) };
}

/** sha256 (hex) over each file in name order as `name NUL contents NUL`. */
export function siteContentHash(content) {
  const bytes = [];
  const append = (text) => {
    for (const b of utf8Encode(text)) bytes.push(b);
    bytes.push(0);
  };
  for (const [name, body] of content) {
    append(name);
    append(body);
  }
  return contentHash(bytes);
}

/** The controller config ({ clusterDomain }), checked like serde's `deny_unknown_fields`. */
export function parseConfig(config) {
  const out = { clusterDomain: DEFAULT_DOMAIN };
  if (config === null || config === undefined) return out;
  if (Array.isArray(config)) {
    // serde also accepts a struct as a sequence of its fields; a missing
    // field takes its default.
    if (config.length > 0) out.clusterDomain = domainValue(config[0]);
    if (config.length > 1) throw invalidConfig(`invalid length ${config.length}, expected fewer elements in array`);
    return out;
  }
  if (typeof config !== "object") {
    throw invalidConfig(`invalid type: ${unexpected(config)}, expected struct Config`);
  }
  for (const [key, value] of Object.entries(config)) {
    if (key !== "clusterDomain") throw invalidConfig(`unknown field \`${key}\`, expected \`clusterDomain\``);
    out.clusterDomain = domainValue(value);
  }
  return out;
}

function domainValue(value) {
  if (typeof value !== "string") throw invalidConfig(`invalid type: ${unexpected(value)}, expected a string`);
  return value;
}

function intField(spec, field, fallback) {
  const value = get(spec, field);
  if (value === undefined || value === null) return fallback;
  const n = asI64(value);
  if (n === undefined) throw invalidSpec(`spec.${field}`, "must be an integer");
  return n;
}

// File name -> contents, as [name, body] pairs sorted by name (byte order;
// names are ASCII once validated).
function contentField(spec) {
  const map = get(spec, "content");
  if (map === undefined || map === null) return [];
  if (typeof map !== "object" || Array.isArray(map)) {
    throw invalidSpec("spec.content", "must be a map of file name to contents");
  }
  let total = 0;
  const entries = [];
  for (const [name, body] of Object.entries(map)) {
    if (!validKey(name)) {
      throw invalidSpec(
        `spec.content[${debugQuote(name)}]`,
        "file name must be 1-253 characters of letters, digits, '-', '_' or '.'",
      );
    }
    if (typeof body !== "string") throw invalidSpec(`spec.content[${debugQuote(name)}]`, "must be a string");
    total += name.length + utf8Length(body);
    entries.push([name, body]);
  }
  if (total > MAX_CONTENT_BYTES) {
    throw invalidSpec("spec.content", `${total} bytes is over the limit of ${MAX_CONTENT_BYTES}`);
  }
  return entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** A valid ConfigMap key. */
function validKey(key) {
  return key.length >= 1 && key.length <= 253 && key !== "." && key !== ".." && /^[A-Za-z0-9._-]+$/.test(key);
}

const invalidConfig = (problem) => permanent("InvalidConfig", `config: ${problem}`);

// serde_json's wording for an unexpected JSON value.
function unexpected(value) {
  if (value === null) return "null";
  if (typeof value === "boolean") return `boolean \`${value}\``;
  if (typeof value === "number") return Number.isInteger(value) ? `integer \`${value}\`` : `floating point \`${value}\``;
  if (typeof value === "string") return `string ${debugQuote(value)}`;
  return Array.isArray(value) ? "sequence" : "map";
}

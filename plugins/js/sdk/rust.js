// Small helpers that make a JavaScript plugin give byte-identical answers to
// a Rust plugin for the same input (messages, whitespace, integers). JS
// built-ins differ from Rust in these corners (String.trim also strips U+FEFF,
// JSON.stringify escapes differently from Rust's `{:?}`).

// Rust `char::is_whitespace` (Unicode White_Space).
const WHITESPACE = /^[\u0009-\u000d\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/;

/** True when `text` is empty or only whitespace (Rust `s.trim().is_empty()`). */
export function isBlank(text) {
  return WHITESPACE.test(text);
}

/**
 * `text` quoted the way Rust's `format!("{:?}", text)` does, for error
 * messages that name a map key. Covers the escapes Rust uses for ASCII and
 * control characters.
 */
export function debugQuote(text) {
  let out = '"';
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (cp === 0) out += "\\0";
    else if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) out += `\\u{${cp.toString(16)}}`;
    else out += ch;
  }
  return out + '"';
}

/**
 * `value` as an integer if it is one that fits i64 (Rust `Value::as_i64`),
 * else `undefined`. JSON text like `2.0` parses to an integer in JS but not in
 * serde_json: that corner is documented in docs/authoring.md.
 */
export function asI64(value) {
  if (typeof value !== "number" || !Number.isInteger(value)) return undefined;
  if (value < -9223372036854775808 || value >= 9223372036854775808) return undefined;
  return value;
}

// UTF-8 helpers. QuickJS (the engine inside the component) has no
// TextEncoder, so the SDK encodes by hand; sizes and hashes must be over the
// same UTF-8 bytes the Rust SDK sees.

/** The UTF-8 bytes of `text`, as an array of numbers. */
export function utf8Encode(text) {
  const out = [];
  for (const ch of text) {
    let cp = ch.codePointAt(0);
    // A lone surrogate cannot be encoded; Rust would never see one (its
    // strings are valid UTF-8), so use U+FFFD like TextEncoder does.
    if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
    if (cp < 0x80) {
      out.push(cp);
    } else if (cp < 0x800) {
      out.push(0xc0 | (cp >> 6), 0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out.push(0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f));
    } else {
      out.push(
        0xf0 | (cp >> 18),
        0x80 | ((cp >> 12) & 0x3f),
        0x80 | ((cp >> 6) & 0x3f),
        0x80 | (cp & 0x3f),
      );
    }
  }
  return out;
}

/** Length of `text` in UTF-8 bytes (what Rust's `str::len` returns). */
export function utf8Length(text) {
  let n = 0;
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    n += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  }
  return n;
}

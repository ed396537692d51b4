"""Helpers that make a Python plugin give the same answers as a Rust plugin
for the same input, where Python built-ins differ from Rust (``str.strip``
strips more characters than Rust's ``trim``; ``repr`` quotes differently
from Rust's ``{:?}``; ``bool`` is an ``int``)."""

from __future__ import annotations

from typing import Any, Optional

# Rust `char::is_whitespace` (Unicode White_Space).
_WHITESPACE = frozenset(
    [chr(c) for c in range(0x09, 0x0E)]
    + [" ", "\u0085", "\u00a0", "\u1680"]
    + [chr(c) for c in range(0x2000, 0x200B)]
    + ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
)


def is_blank(text: str) -> bool:
    """True when ``text`` is empty or only whitespace (Rust ``s.trim().is_empty()``)."""
    return all(ch in _WHITESPACE for ch in text)


def debug_quote(text: str) -> str:
    """``text`` quoted as Rust's ``format!("{:?}", text)`` does, for messages naming a map key."""
    out = ['"']
    for ch in text:
        cp = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif cp == 0:
            out.append("\\0")
        elif cp < 0x20 or 0x7F <= cp < 0xA0:
            out.append(f"\\u{{{cp:x}}}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def as_i64(value: Any) -> Optional[int]:
    """``value`` if it is a JSON integer that fits i64 (Rust ``Value::as_i64``), else None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if -(2**63) <= value < 2**63 else None


def utf8_len(text: str) -> int:
    """Length in UTF-8 bytes (Rust ``str::len``)."""
    return len(text.encode("utf-8"))

"""Deterministic, valid Kubernetes names for children; the same results as
the Rust SDK's ``child_name``, so a plugin ported between languages keeps its
children's names."""

from __future__ import annotations

import hashlib
import re

#: Longest DNS-1123 label (Service names; a safe bound for every kind).
MAX_LABEL_LEN = 63
_HASH_LEN = 10
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def content_hash(data: bytes | str) -> str:
    """Lowercase hex SHA-256 of ``data`` (a str is hashed as UTF-8)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def child_name(parent: str, suffix: str = "") -> str:
    """Name for a child of ``parent`` with ``suffix``: ``child_name("web", "config") == "web-config"``.

    Always a valid DNS-1123 label. Invalid characters become ``-``; when the
    name had to change or is too long it is cut and ``-<10 hex of
    sha256(parent/suffix)>`` appended, so distinct inputs keep distinct names.
    """
    raw = parent if suffix == "" else f"{parent}-{suffix}"
    clean = _sanitize(raw)
    if len(clean) <= MAX_LABEL_LEN and clean == raw and clean:
        return clean
    digest = content_hash(f"{parent}/{suffix}")[:_HASH_LEN]
    keep = MAX_LABEL_LEN - _HASH_LEN - 1
    prefix = clean[:keep].rstrip("-")
    return f"{prefix}-{digest}" if prefix else digest


def is_dns1123_label(name: str) -> bool:
    """Whether ``name`` is a valid DNS-1123 label."""
    return len(name) <= MAX_LABEL_LEN and _LABEL.fullmatch(name) is not None


def _sanitize(raw: str) -> str:
    # One output character per code point, ASCII-only lowercasing (Rust's
    # `to_ascii_lowercase`), so non-ASCII input maps as in the Rust SDK.
    out = []
    for ch in raw:
        if "A" <= ch <= "Z":
            ch = ch.lower()
        out.append(ch if ("a" <= ch <= "z" or "0" <= ch <= "9") else "-")
    return "".join(out).strip("-")

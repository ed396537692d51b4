"""The StaticSite spec and the controller config, validated with messages
that name the offending field (the same messages as plugins/static-site)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict

from wr_plugin import as_i64, content_hash, debug_quote, get, invalid_spec, is_blank, permanent, utf8_len

#: Largest total content: a ConfigMap holds at most 1 MiB.
MAX_CONTENT_BYTES = 1024 * 1024 - 4096
_DEFAULT_DOMAIN = "cluster.local"
_KEY = re.compile(r"[A-Za-z0-9._-]+")


@dataclass
class SiteSpec:
    image: str
    replicas: int
    port: int
    #: File name -> contents, sorted by name.
    content: Dict[str, str]

    def content_hash(self) -> str:
        """sha256 (hex) over each file in name order as ``name NUL contents NUL``."""
        data = bytearray()
        for name, body in self.content.items():
            data += name.encode("utf-8") + b"\0" + body.encode("utf-8") + b"\0"
        return content_hash(bytes(data))


def parse_spec(parent: Any) -> SiteSpec:
    """Reads and validates ``parent.spec``."""
    spec = get(parent, "spec")
    image = get(spec, "image")
    if image is None or (isinstance(image, str) and is_blank(image)):
        raise invalid_spec("spec.image", "required")
    if not isinstance(image, str):
        raise invalid_spec("spec.image", "must be a string")
    replicas = _int_field(spec, "replicas", 1)
    if replicas < 0:
        raise invalid_spec("spec.replicas", f"must be >= 0, got {replicas}")
    port = _int_field(spec, "port", 80)
    if not 1 <= port <= 65535:
        raise invalid_spec("spec.port", f"must be between 1 and 65535, got {port}")
    return SiteSpec(image=image, replicas=replicas, port=port, content=_content_field(spec))


def parse_config(config: Any) -> str:
    """The cluster domain from the controller config, checked like serde's
    ``deny_unknown_fields`` with serde's wording."""
    domain = _DEFAULT_DOMAIN
    if config is None:
        return domain
    if isinstance(config, list):
        # serde also accepts a struct as a sequence of its fields; a missing
        # field takes its default.
        if config:
            domain = _domain_value(config[0])
        if len(config) > 1:
            raise _invalid_config(f"invalid length {len(config)}, expected fewer elements in array")
        return domain
    if not isinstance(config, dict):
        raise _invalid_config(f"invalid type: {_unexpected(config)}, expected struct Config")
    for key, value in config.items():
        if key != "clusterDomain":
            raise _invalid_config(f"unknown field `{key}`, expected `clusterDomain`")
        domain = _domain_value(value)
    return domain


def _domain_value(value: Any) -> str:
    if not isinstance(value, str):
        raise _invalid_config(f"invalid type: {_unexpected(value)}, expected a string")
    return value


def _int_field(spec: Any, field: str, default: int) -> int:
    value = get(spec, field)
    if value is None:
        return default
    n = as_i64(value)
    if n is None:
        raise invalid_spec(f"spec.{field}", "must be an integer")
    return n


def _content_field(spec: Any) -> Dict[str, str]:
    files = get(spec, "content")
    if files is None:
        return {}
    if not isinstance(files, dict):
        raise invalid_spec("spec.content", "must be a map of file name to contents")
    total = 0
    for name, body in files.items():
        if not _valid_key(name):
            raise invalid_spec(
                f"spec.content[{debug_quote(name)}]",
                "file name must be 1-253 characters of letters, digits, '-', '_' or '.'",
            )
        if not isinstance(body, str):
            raise invalid_spec(f"spec.content[{debug_quote(name)}]", "must be a string")
        total += utf8_len(name) + utf8_len(body)
    if total > MAX_CONTENT_BYTES:
        raise invalid_spec("spec.content", f"{total} bytes is over the limit of {MAX_CONTENT_BYTES}")
    return dict(sorted(files.items()))


def _valid_key(key: str) -> bool:
    return 1 <= len(key) <= 253 and key not in (".", "..") and key.isascii() and _KEY.fullmatch(key) is not None


def _invalid_config(problem: str):
    return permanent("InvalidConfig", f"config: {problem}")


def _unexpected(value: Any) -> str:
    # serde_json's wording for an unexpected JSON value.
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value!r}`"
    if isinstance(value, str):
        return f"string {debug_quote(value)}"
    return "sequence" if isinstance(value, list) else "map"

"""The request as a plugin sees it: the WIT record with every JSON text parsed."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, List, Optional

from .errors import permanent
from .objects import find, name_of, namespace_of


@dataclass
class Request:
    """Everything a plugin may know when it is called."""

    #: The parent object (apiVersion, kind, metadata, spec, status).
    parent: Any
    #: Observed children controlled by the parent.
    children: List[Any] = field(default_factory=list)
    #: Objects selected by the controller's ``related`` rules.
    related: List[Any] = field(default_factory=list)
    #: The parent is being deleted and the controller's finalizer is still on it.
    finalizing: bool = False
    #: Per-controller settings (``spec.plugin.config``), None when absent.
    config: Any = None
    #: RFC 3339 UTC timestamp: the plugin's only clock.
    now: str = "1970-01-01T00:00:00Z"

    @classmethod
    def from_wit(cls, wit: Any) -> "Request":
        """Parses the WIT ``reconcile-request`` (objects as JSON text)."""
        return cls(
            parent=_parse(wit.parent, "parent"),
            children=[_parse(c, f"children[{i}]") for i, c in enumerate(wit.children)],
            related=[_parse(c, f"related[{i}]") for i, c in enumerate(wit.related)],
            finalizing=wit.finalizing,
            config=None if wit.config is None else _parse(wit.config, "config"),
            now=wit.now,
        )

    def name(self) -> str:
        """The parent's ``metadata.name``; a permanent ``InvalidParent`` error if missing."""
        name = name_of(self.parent)
        if name is None:
            raise permanent("InvalidParent", "parent has no metadata.name")
        return name

    def namespace(self) -> Optional[str]:
        """The parent's ``metadata.namespace`` (None for cluster-scoped parents)."""
        return namespace_of(self.parent)

    def child(self, kind: str, name: str) -> Any:
        """The observed child of ``kind`` named ``name``, or None."""
        return find(self.children, kind, name)


def _parse(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise permanent("InvalidRequest", f"{what} is not valid JSON: {e}") from None

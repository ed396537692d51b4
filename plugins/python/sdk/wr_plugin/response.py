"""The response and its parts, with small builders mirroring the Rust SDK."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional


@dataclass
class Condition:
    """A condition on the parent. The host adds observedGeneration and
    lastTransitionTime and owns ``Ready`` (do not report it)."""

    type: str
    #: "True", "False" or "Unknown".
    status: str
    reason: str
    message: str = ""

    @classmethod
    def true(cls, type_: str, reason: str, message: str = "") -> "Condition":
        return cls(type_, "True", reason, message)

    @classmethod
    def false(cls, type_: str, reason: str, message: str = "") -> "Condition":
        return cls(type_, "False", reason, message)

    @classmethod
    def unknown(cls, type_: str, reason: str, message: str = "") -> "Condition":
        return cls(type_, "Unknown", reason, message)


@dataclass
class Event:
    """An event recorded on the parent (deduplicated by the host)."""

    #: "Normal" or "Warning".
    type: str
    reason: str
    message: str

    @classmethod
    def normal(cls, reason: str, message: str) -> "Event":
        return cls("Normal", reason, message)

    @classmethod
    def warning(cls, reason: str, message: str) -> "Event":
        return cls("Warning", reason, message)


@dataclass
class Response:
    """What the plugin wants: the complete desired set of children (an observed
    child missing from it is deleted), conditions, a status patch, events."""

    children: List[Any] = field(default_factory=list)
    conditions: List[Condition] = field(default_factory=list)
    status: Optional[Any] = None
    requeue_after_seconds: Optional[int] = None
    events: List[Event] = field(default_factory=list)
    finalized: bool = False

    def child(self, obj: Any) -> "Response":
        """Adds a desired child (a dict with apiVersion, kind, metadata.name)."""
        self.children.append(obj)
        return self

    def condition(self, condition: Condition) -> "Response":
        self.conditions.append(condition)
        return self

    def set_status(self, status: Any) -> "Response":
        """Sets the JSON object merged into the parent's ``.status``."""
        self.status = status
        return self

    def requeue_after(self, seconds: int) -> "Response":
        self.requeue_after_seconds = seconds
        return self

    def event(self, event: Event) -> "Response":
        self.events.append(event)
        return self

    def set_finalized(self, done: bool = True) -> "Response":
        """Teardown complete (only read when the request was ``finalizing``)."""
        self.finalized = done
        return self

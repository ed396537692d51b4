"""The plugin's error: permanent (retrying the same input cannot help) or
transient (retry with backoff). Raised from a reconcile function and turned
into the WIT ``reconcile-error`` variant by :func:`wr_plugin.export_reconciler`."""

from __future__ import annotations


class PluginError(Exception):
    """Why a plugin could not produce an answer."""

    def __init__(self, kind: str, reason: str, message: str) -> None:
        if kind not in ("permanent", "transient"):
            raise ValueError(f"kind must be 'permanent' or 'transient', not {kind!r}")
        super().__init__(f"{kind} error {reason}: {message}")
        self.kind = kind
        #: CamelCase reason, shown on the parent's Ready condition.
        self.reason = reason
        #: Human-readable detail.
        self.message = message

    @property
    def is_permanent(self) -> bool:
        return self.kind == "permanent"


def permanent(reason: str, message: str) -> PluginError:
    """A permanent error with a CamelCase ``reason``."""
    return PluginError("permanent", reason, message)


def transient(reason: str, message: str) -> PluginError:
    """A transient error with a CamelCase ``reason``."""
    return PluginError("transient", reason, message)


def invalid_spec(field: str, problem: str) -> PluginError:
    """Permanent ``InvalidSpec`` error naming the field: ``invalid_spec("spec.replicas", "must be >= 0")``."""
    return permanent("InvalidSpec", f"{field}: {problem}")

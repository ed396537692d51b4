"""Helpers over Kubernetes objects held as parsed JSON (dicts)."""

from __future__ import annotations

from typing import Any, Iterable, Optional


def get(obj: Any, key: str) -> Any:
    """``obj[key]`` when ``obj`` is a JSON object that has it, else None."""
    return obj.get(key) if isinstance(obj, dict) else None


def _str(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


def name_of(obj: Any) -> Optional[str]:
    """``metadata.name``."""
    return _str(get(get(obj, "metadata"), "name"))


def namespace_of(obj: Any) -> Optional[str]:
    """``metadata.namespace``."""
    return _str(get(get(obj, "metadata"), "namespace"))


def kind_of(obj: Any) -> Optional[str]:
    """``kind``."""
    return _str(get(obj, "kind"))


def label_of(obj: Any, key: str) -> Optional[str]:
    """``metadata.labels[key]``."""
    return _str(get(get(get(obj, "metadata"), "labels"), key))


def annotation_of(obj: Any, key: str) -> Optional[str]:
    """``metadata.annotations[key]``."""
    return _str(get(get(get(obj, "metadata"), "annotations"), key))


def new_object(api_version: str, kind: str, namespace: Optional[str], name: str) -> dict:
    """A new object with apiVersion, kind and metadata (name, and namespace when given)."""
    metadata: dict = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata}


def label(obj: dict, key: str, value: str) -> None:
    """Sets ``metadata.labels[key] = value``, creating maps as needed."""
    _set_meta_map(obj, "labels", key, value)


def annotate(obj: dict, key: str, value: str) -> None:
    """Sets ``metadata.annotations[key] = value``, creating maps as needed."""
    _set_meta_map(obj, "annotations", key, value)


def _set_meta_map(obj: Any, map_name: str, key: str, value: str) -> None:
    if not isinstance(obj, dict):
        return
    if not isinstance(obj.get("metadata"), dict):
        obj["metadata"] = {}
    if not isinstance(obj["metadata"].get(map_name), dict):
        obj["metadata"][map_name] = {}
    obj["metadata"][map_name][key] = value


def find(objects: Iterable[Any], kind: str, name: str) -> Any:
    """The object of ``kind`` named ``name`` in ``objects`` (e.g. observed children), or None."""
    for obj in objects:
        if kind_of(obj) == kind and name_of(obj) == name:
            return obj
    return None

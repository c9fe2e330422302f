"""Your run config (`--configurable`, `--config`), merged into a check or bench run's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["merged_config"]


def merged_config(base: dict[str, Any], extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """`base` (the command's run config) with `extra` (yours) merged in.

    `configurable` and `metadata` key by key, `tags` appended; `base` wins on a key both set."""
    if not extra:
        return base
    merged = {**extra, **base}
    for key in ("configurable", "metadata"):
        if key in extra:
            merged[key] = {**extra[key], **base.get(key, {})}
    if "tags" in extra:
        merged["tags"] = [*extra["tags"], *base.get("tags", [])]
    return merged

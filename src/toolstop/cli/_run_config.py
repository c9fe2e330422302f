"""`--configurable KEY=VALUE` and `--config JSON`: your run config, for every agent run.

What `check --agent` and `bench --agent` add to each run's config.

Tools and prompts often read the run's config (LangGraph's customer-support tutorial reads
`config["configurable"]["passenger_id"]`); without it they fail, and the run measures the
failure. The check and the bench own the thread id (each run has its own), the callbacks and
the recursion limit; everything else a run config holds is yours to set.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from toolstop.errors import ToolstopConfigError

__all__ = ["add_run_config_arguments", "run_config"]

_ALLOWED = ("configurable", "tags", "metadata")
"""The keys of `--config` a run takes; the rest (callbacks, recursion_limit, run_id) belong to
the check or the bench."""

_OWNED = ("thread_id", "checkpoint_id", "checkpoint_ns")
"""`configurable` keys the check and the bench set themselves (one thread per run)."""


def add_run_config_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `--configurable KEY=VALUE` (repeatable) and `--config JSON` to `parser`."""
    parser.add_argument(
        "--configurable",
        action="append",
        metavar="KEY=VALUE",
        default=[],
        help=(
            "with --agent: put KEY (a string VALUE) in each run's config['configurable'], for "
            "tools and prompts that read it (repeatable; --config for other types)"
        ),
    )
    parser.add_argument(
        "--config",
        metavar="JSON",
        help=(
            "with --agent: a run config merged into each run's, a JSON object with "
            "`configurable`, `tags` and/or `metadata`"
        ),
    )


def run_config(args: argparse.Namespace) -> dict[str, Any]:
    """The run config `--config` and `--configurable` ask for (`{}` without them).

    `--configurable` pairs are added to `--config`'s `configurable`, and win over it.

    Raises:
        ToolstopConfigError: malformed JSON, a key other than `configurable`, `tags`,
            `metadata`, a pair without `=`, or a thread or checkpoint key (each run has its own).
    """
    config: dict[str, Any] = {}
    text = getattr(args, "config", None)
    if text is not None:
        try:
            config = json.loads(text)
        except ValueError as error:
            msg = f"--config is not JSON: {error}"
            raise ToolstopConfigError(msg) from None
        if not isinstance(config, dict):
            msg = f"--config takes a JSON object, got {type(config).__name__}"
            raise ToolstopConfigError(msg)
        unknown = sorted(str(k) for k in config if k not in _ALLOWED)
        if unknown:
            msg = (
                f"--config takes {', '.join(_ALLOWED)}; not {', '.join(unknown)} (the callbacks, "
                "recursion limit and run ids are the command's own)"
            )
            raise ToolstopConfigError(msg)
        if not isinstance(config.get("configurable", {}), dict):
            msg = "--config: `configurable` must be a JSON object"
            raise ToolstopConfigError(msg)
    configurable = dict(config.get("configurable", {}))
    for pair in getattr(args, "configurable", None) or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            msg = f"--configurable takes KEY=VALUE, got {pair!r}"
            raise ToolstopConfigError(msg)
        configurable[key.strip()] = value
    owned = sorted(k for k in configurable if k in _OWNED)
    if owned:
        msg = (
            f"--configurable cannot set {', '.join(owned)}: each run has a thread of its own, "
            "set by the command"
        )
        raise ToolstopConfigError(msg)
    if configurable:
        config["configurable"] = configurable
    return config

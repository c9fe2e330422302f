"""Choosing an example tool's outcome: forced (one value or a sequence) or seeded weights."""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping, Sequence

from toolstop.errors import ToolstopConfigError

__all__ = ["OutcomePicker"]


class OutcomePicker:
    """Picks each call's outcome: forced, or drawn from weights with a seeded `random.Random`.

    A forced `str` applies to every call; a forced sequence is consumed in call order and its last
    entry then repeats (so `["retryable"]` is "transient forever"). Thread-safe.
    """

    def __init__(
        self,
        choices: Sequence[str],
        *,
        force: str | Sequence[str] | None,
        weights: Mapping[str, float] | None,
        seed: int | None,
    ) -> None:
        self._choices = tuple(choices)
        forced = [force] if isinstance(force, str) else list(force or [])
        for value in forced:
            if value not in self._choices:
                msg = f"unknown outcome {value!r}; expected one of {self._choices}"
                raise ToolstopConfigError(msg)
        weights = dict(weights or dict.fromkeys(self._choices, 1.0))
        unknown = set(weights) - set(self._choices)
        if unknown or not any(w > 0 for w in weights.values()):
            msg = f"weights must name outcomes of {self._choices} with a positive total: {weights}"
            raise ToolstopConfigError(msg)
        self._forced = forced
        self._weights = weights
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._calls = 0

    @property
    def rng(self) -> random.Random:
        """The seeded generator, also used to choose message texts."""
        return self._rng

    def next(self) -> str:
        """The outcome of the next call."""
        with self._lock:
            index = self._calls
            self._calls += 1
            if self._forced:
                return self._forced[min(index, len(self._forced) - 1)]
            names = list(self._weights)
            return self._rng.choices(names, weights=[self._weights[n] for n in names])[0]

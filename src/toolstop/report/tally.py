"""Counts keyed by names a run produced, bounded whatever the number of distinct names.

Tool names are the model's choice, and rules, modes and outcome keys come from records anyone
could have written: 100,000 runs each naming a different tool once took 638 MB and an 88 MB page.
Each table of the report counts at most `TRACKED` distinct names (`LABELS` for rules, modes and
the like) one by one; a name first seen once the table is full is counted in the table's
`other`, and how many distinct names went there is kept (exactly up to `DISTINCT`, beyond that
as "at least"). report.json and the page then show the `SHOWN` largest of each table and fold
the rest into "other N tools" (`folded` in report.json).

The counts inside a table are bounded too: each name's inner counts (a tool's rules, its
invalid signals' problems) and the table's shared `other` keep at most `INNER` distinct keys, and
any further key is counted under `"other"` (`Labels`): 400,000 log lines each with a distinct
`problem` once made a 17 MB report.json and took 473 MB.

Deliberately simple: the first names seen are the ones tracked, so with more distinct names
than `TRACKED`, a name first seen late is folded even when it is frequent. Totals stay exact:
every count is either in a tracked name or in `other`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping
from typing import Any

__all__ = [
    "DISTINCT",
    "INNER",
    "LABELS",
    "SHOWN",
    "TRACKED",
    "Distinct",
    "Labels",
    "Table",
    "Tally",
    "top",
]

TRACKED = 2_000
"""Distinct tool names (or days, or model-call counts) a table counts one by one."""
LABELS = 100
"""Distinct rules, modes, outcome keys and the like a table counts one by one."""
SHOWN = 50
"""Names shown per table in report.json and on the page; the rest are folded."""
DISTINCT = 10_000
"""Distinct folded names counted exactly per table; beyond, the count is a lower bound."""
INNER = 101
"""Distinct keys of the counts inside a table (one name's rules or problems; 101 for the overlap
buckets 0-100); any further key is counted under `"other"`."""


class Distinct:
    """How many distinct names were folded: exact up to `DISTINCT`, then a lower bound."""

    def __init__(self, cap: int = DISTINCT) -> None:
        """None yet; exact up to `cap` distinct names."""
        self.seen: set[int] = set()
        self.more = False
        self.cap = cap

    def add(self, name: Hashable) -> None:
        """Count `name` (once, however often it is added)."""
        key = hash(name)
        if len(self.seen) < self.cap:
            self.seen.add(key)
        elif key not in self.seen:
            self.more = True

    def __len__(self) -> int:
        return len(self.seen)


class Tally(Counter[Any]):
    """A `Counter` of at most `cap` keys; increments of any other key go to `other`."""

    def __init__(self, cap: int = TRACKED) -> None:
        """Empty, counting at most `cap` keys one by one."""
        self.cap = cap
        self.other = 0
        self.folded = Distinct()
        super().__init__()

    def __setitem__(self, key: Any, value: int) -> None:
        if key in self or len(self) < self.cap:
            super().__setitem__(key, value)
        else:  # `tally[key] += n` on a key not kept: read 0, then set n
            self.other += value
            self.folded.add(key)


class Labels(Counter[Any]):
    """A `Counter` of at most `cap` keys; increments of any other key go to the key `"other"`."""

    def __init__(self, cap: int = INNER) -> None:
        """Empty, counting at most `cap` keys one by one (and `"other"`)."""
        self.cap = cap
        super().__init__()

    def __setitem__(self, key: Any, value: int) -> None:
        if key in self or len(self) < self.cap:
            super().__setitem__(key, value)
        else:  # `labels[key] += n` on a key not kept: read 0, then set n
            super().__setitem__("other", self.get("other", 0) + value)


class Table(dict[Any, Counter[Any]]):
    """A dict of `Counter`s for at most `cap` keys; any other key shares the `other` Counter.

    Each Counter (the shared `other` too) keeps at most `INNER` keys: an empty plain `Counter`
    given as the default is replaced by `Labels`."""

    def __init__(self, cap: int = TRACKED) -> None:
        """Empty, keeping at most `cap` keys."""
        super().__init__()
        self.cap = cap
        self.other: Counter[Any] = Labels()
        self.folded = Distinct()

    def setdefault(self, key: Any, default: Any = None) -> Counter[Any]:
        """The key's Counter, or the shared `other` once the table is full."""
        if key in self or len(self) < self.cap:
            if type(default) is Counter and not default:
                default = Labels()
            return super().setdefault(key, default)
        self.folded.add(key)
        return self.other


def _total(value: Any) -> int:
    if isinstance(value, Mapping):
        return sum(v for v in value.values() if isinstance(v, int))
    return value if isinstance(value, int) else 0


def top(
    shown: dict[str, Any], source: Tally | Table, folded: dict[str, Any], name: str
) -> dict[str, Any]:
    """`shown` (a table as report.json has it) cut to its `SHOWN` largest entries, in its order.

    What is cut, and what `source` folded as it counted, goes into `folded[name]`: how many
    names (`names`, `at_least` when it is a lower bound) and their counts summed (`count` for a
    tally, `counts` for a table)."""
    keep = set(sorted(shown, key=lambda key: -_total(shown[key]))[:SHOWN])
    cut = [key for key in shown if key not in keep]
    names = len(cut) + len(source.folded)
    if not names:
        return shown
    entry: dict[str, Any] = {"names": names, "at_least": source.folded.more}
    if isinstance(source, Tally):
        entry["count"] = source.other + sum(_total(shown[key]) for key in cut)
    else:
        counts: Counter[str] = Labels()  # the cut names' inner counts, bounded alike
        for key, value in source.other.items():
            counts[str(key)] += value
        for key in cut:
            for inner, value in shown[key].items():
                if isinstance(value, int):
                    counts[str(inner)] += value
        entry["counts"] = dict(sorted(counts.items()))
    folded[name] = entry
    return {key: value for key, value in shown.items() if key in keep}

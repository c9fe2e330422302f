"""Advice per tool: convert it, have it write the answer, keep the model, or not yet.

report.json's `candidates[].advice`, from what the final answers did with the tool's results
(`ended_after.judged`, recorded at each run's end by `toolstop._judge`) and from the runs a stop
would have cut short (`after_first`).

- `cut_short`: a stop on it would have skipped later tool calls in at least `CUT_SHORT_SHARE`
  of the runs a stop would end (its stoppable runs: those where a call of it succeeded; an
  error result signals no stop). Checked first: never `convert` then. When the answers alone
  would keep the model (`keep`), its sentence says that too. A tool advised
  `convert` or `convert_with_answer` whose stop would still have skipped a write in some run
  says so in its sentence (`advise`'s `writes`).
- `too_few`: fewer than `MIN_ENDED_RUNS` runs ended right after it.
- `convert`: in at least `SERVED` of the judged runs the answer relayed the result (prose it
  repeated, or a short receipt it paraphrased): the result, as is, would have served.
- `convert_with_answer`: in at least `SERVED` of them the answer relayed or only restated the
  result's fields: the tool should write the user's text (`toolstop.convert(TOOL,
  answer=...)`, or `signal(..., answer=...)`); `fields` names the JSON keys the answers used,
  `earlier` the tools whose earlier results held facts the answers restated too (a template
  needs them).
- `keep`: the model selected, computed, asked the user or reasoned beyond the result, or most
  of the runs that ended after it ended after an error result (`failed`): an error never served
  as the answer, and a converted tool would not signal a stop on one.

Runs that ended after an error count in neither `relayed` nor `restated`; `convert` and
`convert_with_answer` are judged on the runs that ended after a success.

Records before schema version 5 carry no judgement: their advice comes from the word-overlap
`verdict` (`candidate` -> `convert`, `few`/`none` -> `too_few`, others -> `keep`). For judged
tools the `verdict` is mapped back from the advice, so readers of `verdict` keep working.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from toolstop.report.tally import LABELS, TRACKED, Tally

__all__ = [
    "ACTIONS",
    "ADVICE",
    "CUT_SHORT_SHARE",
    "SERVED",
    "Judgements",
    "advise",
    "convert_line",
    "served_not_advised",
    "signalling",
    "verdict_of",
]

ADVICE = ("convert", "convert_with_answer", "too_few", "keep", "cut_short")
"""Every advice, in the order the report ranks them."""

ACTIONS = ("relayed", "restated", "selected", "computed", "asked", "own", "failed")
"""What a final answer did with a result (see `toolstop._judge`); `failed`: the result was an
error (`toolstop.record.reads_as_error`, or a tool that raised), which never served as the
answer."""

SERVED = 0.6
"""The share of judged runs whose answer the result (or a tool-written answer) would have served."""
CUT_SHORT_SHARE = 0.1
"""The share of a tool's stoppable runs that a stop would have cut short that makes it
`cut_short`."""

_FIELDS_KEPT = 64
"""At most this many distinct field names are counted per tool (the first seen)."""
_FIELDS_SHOWN = 8


class Judgements:
    """Per-tool counts of the answers' actions, the results' shapes and the fields used."""

    def __init__(self) -> None:
        """Nothing judged yet."""
        self.actions: dict[str, Counter[str]] = {}
        self.shapes: dict[str, Counter[str]] = {}
        self.fields: dict[str, Counter[str]] = {}
        self.earlier: dict[str, Counter[str]] = {}

    def add(self, judged: Any) -> None:
        """Fold one record's `ended_after.judged` in (anything else adds nothing)."""
        if not isinstance(judged, Mapping):
            return
        for tool, features in judged.items():
            if not isinstance(features, Mapping):
                continue
            action, shape = features.get("action"), features.get("shape")
            if action not in ACTIONS or not isinstance(shape, str):
                continue
            name = str(tool)
            if name not in self.actions and len(self.actions) >= TRACKED:
                continue  # bounded: tool names are the model's choice (report.tally)
            self.actions.setdefault(name, Counter())[action] += 1
            self.shapes.setdefault(name, Tally(LABELS))[shape[:20]] += 1
            fields = features.get("fields")
            counts = self.fields.setdefault(name, Counter())
            for field in fields if isinstance(fields, list) else []:
                if isinstance(field, str) and (field in counts or len(counts) < _FIELDS_KEPT):
                    counts[field[:40]] += 1
            earlier = features.get("earlier")
            sources = self.earlier.setdefault(name, Counter())
            for source in earlier[:_FIELDS_SHOWN] if isinstance(earlier, list) else []:
                if isinstance(source, str) and (source in sources or len(sources) < _FIELDS_KEPT):
                    sources[source[:64]] += 1

    def of(self, tool: str) -> dict[str, Any]:
        """What the answers after `tool` did.

        `runs` judged, `actions`, `shapes`, `fields`, and `earlier`: the tools whose earlier
        results held facts the answers restated (most often first)."""
        actions = self.actions.get(tool, Counter())
        return {
            "runs": sum(actions.values()),
            "actions": {a: actions[a] for a in ACTIONS if actions[a]},
            "shapes": dict(sorted(self.shapes.get(tool, Counter()).items())),
            "fields": _ranked(self.fields.get(tool, Counter())),
            "earlier": _ranked(self.earlier.get(tool, Counter())),
        }


def _ranked(counts: Counter[str]) -> list[str]:
    return [name for name, _ in sorted(counts.items(), key=lambda i: (-i[1], i[0]))][:_FIELDS_SHOWN]


def advise(
    *,
    runs: int,
    ended_runs: int,
    cut_short_runs: int,
    judged: dict[str, Any],
    verdict: str,
    why: str = "",
    stoppable_runs: int | None = None,
    writes: tuple[int, list[str]] = (0, []),
    tool: str = "TOOL",
) -> tuple[str, str]:
    """`(advice, sentence)` for one tool (see the module's docstring).

    `verdict` and `why` are the word-overlap verdict and its sentence: the advice of a tool
    with no judged run (records before schema version 5) is read from them. `stoppable_runs`:
    the runs a stop would end (a call of the tool succeeded; `runs` when not known, records
    before schema version 5); `writes`: in how many of them a stop would have skipped a tool
    that writes, and those tools; `tool`: its name, for the `toolstop.convert(...)` it names
    (`TOOL` when the name is no Python name: the name is the log's, not code)."""
    stoppable = runs if stoppable_runs is None else stoppable_runs
    name = tool if tool.isidentifier() else "TOOL"
    advice, sentence = _advise(ended_runs, judged, verdict, why, name)
    if cut_short_runs and cut_short_runs >= CUT_SHORT_SHARE * max(stoppable, 1):
        # what the answers did is said too when they alone would keep the model
        besides = f"; besides, {sentence}" if advice == "keep" and judged.get("runs") else ""
        return "cut_short", (
            f"a stop on it would have skipped later tool calls in {cut_short_runs} of the "
            f"{stoppable} runs it would end"
            + _writes(writes)
            + ": do not convert it as it is"
            + besides
        )
    if writes[0] and advice in ("convert", "convert_with_answer"):
        sentence += (
            f"; but a stop on it would have skipped a write ({', '.join(writes[1])}) in "
            f"{writes[0]} of the {stoppable} runs it would end: signal a stop only when "
            "nothing is left to write"
        )
    return advice, sentence


def _writes(writes: tuple[int, list[str]]) -> str:
    if not writes[0]:
        return ""
    return f", a write ({', '.join(writes[1])}) in {writes[0]} of them"


def _advise(
    ended_runs: int, judged: dict[str, Any], verdict: str, why: str, tool: str
) -> tuple[str, str]:
    """The advice from the judged runs, once `cut_short` is ruled out."""
    if ended_runs < 5:  # MIN_ENDED_RUNS, as the verdict's
        return "too_few", f"only {ended_runs} run(s) ended after it: too few to tell"
    total = judged["runs"]
    if not total:
        return ("convert" if verdict == "candidate" else "keep"), why
    actions = judged["actions"]
    failed = actions.get("failed", 0)
    if failed and failed * 2 >= total:
        return "keep", (
            f"in {failed} of {total} runs that ended after it, its result was an error, which "
            "never serves as the answer: keep the model"
        )
    total -= failed
    relayed, restated = actions.get("relayed", 0), actions.get("restated", 0)
    if relayed >= SERVED * total:
        return "convert", f"in {relayed} of {total} runs the result as is would have served"
    if relayed + restated >= SERVED * total:
        used = ", ".join(judged["fields"]) or "its words"
        earlier = judged.get("earlier") or []
        needs = (
            f" (its template needs fields of earlier results: {', '.join(earlier)})"
            if earlier
            else ""
        )
        return "convert_with_answer", (
            f"in {relayed + restated} of {total} runs the answer only restated the result "
            f"({used}): have the tool write the user's text with toolstop.convert({tool}, "
            "answer=...) (its convert line) or signal(..., answer=...)" + needs
        )
    beyond = {a: n for a, n in actions.items() if a not in ("relayed", "restated", "failed")}
    said = ", ".join(f"{action} {n}" for action, n in sorted(beyond.items(), key=lambda i: -i[1]))
    return "keep", f"the model went beyond the result ({said} of {total} runs): keep the model"


def signalling(document: Mapping[str, Any]) -> set[str]:
    """The tools that signal already: there is nothing to convert about them.

    A stop or a would-stop was recorded on them, or their entry says so (`signals`: a
    `subagent_tool`, which forwards its sub-agent's signal)."""
    return (
        set(document["stops_by_tool"])
        | set(document["would_stop_by_tool"])
        | {e["tool"] for e in document["candidates"] if e.get("signals")}
    )


def served_not_advised(entries: list[dict[str, Any]]) -> tuple[dict[str, Any], int, int] | None:
    """The first unadvised entry whose result served: `(entry, served, judged)`, or `None`.

    Served: relayed or restated in at least `SERVED` of its judged runs, the error results left
    out (as it is or with a tool-written answer, its result would have done). Not advised: its
    stops would cut runs short (`cut_short`) or too few runs ended after it (`too_few`). A
    report names it where it would otherwise say that no tool's result would have served."""
    for entry in entries:
        if entry.get("advice") not in ("cut_short", "too_few"):
            continue
        judged = entry.get("judged") or {}
        actions = judged.get("actions") or {}
        total = int(judged.get("runs") or 0) - int(actions.get("failed", 0))
        served = int(actions.get("relayed", 0)) + int(actions.get("restated", 0))
        if total > 0 and served >= SERVED * total:
            return entry, served, total
    return None


def verdict_of(advice: str, ended_runs: int) -> str:
    """The word-overlap era's `verdict` for an `advice`, so older readers keep working."""
    if advice in ("convert", "convert_with_answer"):
        return "candidate"
    if advice == "too_few":
        return "few" if ended_runs else "none"
    return "keep"


_FIELD = re.compile(r"[A-Za-z_][\w-]{0,39}")


def convert_line(tool: str, advice: str, judged: Mapping[str, Any]) -> str | None:
    """The line that converts a tool advised `convert` or `convert_with_answer`, else `None`.

    `toolstop.convert(TOOL)`; with an answer, a template over the JSON fields the answers used
    (`judged["fields"]`), the earlier tools it needs named. A tool name that is no Python name
    is written `TOOL` (the name is the log's, not code)."""
    if advice not in ("convert", "convert_with_answer"):
        return None
    name = tool if tool.isidentifier() else "TOOL"
    if advice == "convert":
        return f"toolstop.convert({name})"
    fields = [str(f) for f in judged.get("fields") or [] if _FIELD.fullmatch(str(f))]
    template = " ".join(f"{{{f}}}" for f in fields[:8])
    earlier = [str(t) for t in judged.get("earlier") or [] if str(t).isidentifier()][:4]
    # a line that runs as pasted: the result's fields only; what else the answers used, and
    # where a template with their wording comes from, in a comment
    said = [f"answers also used {t} ({{context[{t}][FIELD]}})" for t in earlier]
    said.append(f"wording: toolstop report --from LOG --template {name}")
    if not template:
        return f"toolstop.convert({name})  # " + "; ".join(["answer= needs a template", *said])
    return f'toolstop.convert({name}, answer="{template}")  # ' + "; ".join(["fields only", *said])

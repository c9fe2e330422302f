"""A suggested `answer=` template for a tool, learned from the answers the model gave after it.

`toolstop report --from LOG --template TOOL` collects the recorded pairs (the tool's result, and
the final answer the model wrote right after it, with the run's earlier results), finds where
each fact of an answer (a number, an id, a time, a name) comes from (a field of the result, or
of an earlier result of the run), and writes each answer as a `str.format` template over those
fields. The template kept is the one that, rendered on every recorded result, carries most of
the facts of the answers recorded for it (`coverage`): deterministic, no model.

Deliberately not handled: wording a template cannot give (a sign turned into "refund", a choice
among items, a sum): such facts appear in no result and are counted (`unmapped_answers`), not
guessed; `--judge` drafting is not offered.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from toolstop._secrets import mask_secrets
from toolstop.convert import parsed_result, render_answer
from toolstop.decision import content_text
from toolstop.report.examples import clean

__all__ = ["Learned", "Pair", "learn_template", "pairs_of", "template_from", "template_lines"]

PAIRS_MAX = 500
"""Recorded pairs read per tool at most."""
CANDIDATES_MAX = 60
ANSWER_CHARS = 4000
"""Characters of a recorded answer read at most (a longer one is cut: its template too long)."""
TEMPLATE_CHARS = 1000
"""A template longer than this is not suggested (the line to paste stays readable)."""
RANKED_PAIRS = 100
"""Pairs the candidate templates are ranked on; the one kept is validated on every pair."""
_NAMES_MAX = 200
"""Answers tried as the template's skeleton at most (the shortest first)."""
_LEAVES_MAX = 2000
_DEPTH_MAX = 12
_TOKEN = re.compile(r"[A-Za-z#]*\d[\w:/-]*(?:\.\d+)?|\d")
_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?")
_WORD_LEAF = re.compile(r"^[^\W\d_][\w .'&-]{2,79}$")
_COMMON = frozenset(
    [
        "the",
        "and",
        "for",
        "you",
        "your",
        "with",
        "are",
        "was",
        "not",
        "has",
        "have",
        "this",
        "that",
        "from",
        "order",
        "item",
        "items",
        "true",
        "false",
        "none",
        "null",
        "yes",
        "no",
        "status",
        "name",
        "type",
    ]
)
_UNSAFE_KEY = re.compile(r"[\[\]{}.:!]|^\d+$|^$")


@dataclass(frozen=True)
class Pair:
    """One recorded answer right after the tool.

    Its result, the answer, and the run's earlier results (tool name -> latest content)."""

    result: Any
    answer: str
    context: Mapping[str, Any]


@dataclass
class _Leaf:
    path: str
    value: Any


@dataclass
class Learned:
    """What `learn_template` found; `document()` is report.json's `template`."""

    tool: str
    pairs: int
    template: str | None = None
    coverage: float = 0.0
    covered_share: float = 0.0
    wrong_share: float = 0.0
    wrong_pairs: int = 0
    list_positions: list[str] = field(default_factory=list)
    uses_context: list[str] = field(default_factory=list)
    examples: list[dict[str, str]] = field(default_factory=list)
    not_reached: list[str] = field(default_factory=list)
    unmapped_answers: int = 0

    def document(self) -> dict[str, Any]:
        """The JSON form, with the `toolstop.convert` line to paste."""
        line = None
        if self.template is not None:
            line = f"toolstop.convert({self.tool}, answer={json.dumps(self.template)})"
        return {
            "tool": self.tool,
            "pairs": self.pairs,
            "template": self.template,
            "convert": line,
            "coverage": round(self.coverage, 3),
            "covered_share": round(self.covered_share, 3),
            "wrong_share": round(self.wrong_share, 3),
            "wrong_pairs": self.wrong_pairs,
            "list_positions": self.list_positions,
            "uses_context": self.uses_context,
            "examples": self.examples,
            "not_reached": self.not_reached,
            "unmapped_answers": self.unmapped_answers,
        }


def pairs_of(messages: Sequence[BaseMessage], tool: str) -> Iterator[Pair]:
    """The pairs of one conversation: each run whose final answer came right after `tool`."""
    start = 0
    for end, message in enumerate([*messages, HumanMessage("")]):
        if not isinstance(message, HumanMessage):
            continue
        run = messages[start:end]
        start = end + 1
        if not run or not isinstance(run[-1], AIMessage) or run[-1].tool_calls:
            continue
        turn_at = len(run) - 1
        while turn_at > 0 and isinstance(run[turn_at - 1], ToolMessage):
            turn_at -= 1
        results = [m for m in run[turn_at:-1] if isinstance(m, ToolMessage) and m.name == tool]
        if not results or results[-1].status == "error":
            continue
        context: dict[str, Any] = {}
        for earlier in run[:turn_at]:
            if isinstance(earlier, ToolMessage) and earlier.status != "error" and earlier.name:
                context[str(earlier.name)] = parsed_result(earlier.content)
        answer = content_text(run[-1].content)
        if answer and answer.strip():
            yield Pair(
                result=parsed_result(results[-1].content),
                answer=answer[:ANSWER_CHARS],
                context=context,
            )


def learn_template(tool: str, pairs: Iterable[Pair]) -> Learned:
    """The template that carries most facts of the recorded answers, validated on every pair.

    Time is linear in the pairs' size for each candidate (at most `CANDIDATES_MAX`, ranked on
    `RANKED_PAIRS` pairs): a pair's facts and fields are found once."""
    kept = [p for _, p in zip(range(PAIRS_MAX), pairs, strict=False)]
    learned = Learned(tool=tool, pairs=len(kept))
    if not kept:
        return learned
    indexes = [_index(p) for p in kept]
    facts = [_facts(p, index) for p, index in zip(kept, indexes, strict=True)]
    used: Counter[str] = Counter()
    skeletons: dict[str, int] = {}
    for number, pair in enumerate(kept):
        skeleton, paths, unmapped = _skeleton(pair, facts[number], indexes[number])
        used.update(set(paths))
        learned.unmapped_answers += unmapped > 0
        if skeleton is not None and len(skeleton) <= TEMPLATE_CHARS and skeleton not in skeletons:
            skeletons[skeleton] = unmapped
    tried = sorted(skeletons, key=lambda s: (skeletons[s], len(s)))[:CANDIDATES_MAX]
    ranked = slice(0, RANKED_PAIRS)
    best: tuple[float, float, str] | None = None
    for skeleton in tried:
        checked = _validated(skeleton, kept[ranked], facts[ranked], indexes[ranked])
        # a fact that contradicts the recorded answer is worse than one left out
        score = checked.coverage - 2 * checked.wrong_share - 0.1 * skeletons[skeleton]
        if best is None or (score, checked.covered_share) > best[:2]:
            best = (score, checked.covered_share, skeleton)
    if best is None:
        return learned
    template = best[2]
    learned.template = template
    checked = _validated(template, kept, facts, indexes)
    learned.coverage, learned.covered_share = checked.coverage, checked.covered_share
    learned.wrong_share, learned.wrong_pairs = checked.wrong_share, checked.wrong_pairs
    learned.list_positions = sorted(set(re.findall(r"\{([^{}]*\[\d+\][^{}]*)\}", template)))
    learned.uses_context = sorted(
        {m.group(1) for m in re.finditer(r"\{context\[([^\]]+)\]", template)}
    )
    learned.not_reached = [
        path for path, count in used.most_common() if count >= 2 and "{" + path not in template
    ][:10]
    for pair in kept[:3]:
        learned.examples.append(
            {"rendered": clean(_rendered(template, pair) or ""), "recorded": clean(pair.answer)}
        )
    return learned


def _leaves(data: Any, prefix: str, out: list[_Leaf], depth: int = 0) -> None:
    """Every scalar of `data` with its `str.format` path (keys a template can name only)."""
    if len(out) >= _LEAVES_MAX or depth > _DEPTH_MAX:
        return
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(key, str) and not _UNSAFE_KEY.search(key):
                path = f"{prefix}[{key}]" if prefix else key
                _leaves(value, path, out, depth + 1)
    elif isinstance(data, list):
        for index, value in enumerate(data[:50]):
            _leaves(value, f"{prefix or 'result'}[{index}]", out, depth + 1)
    elif isinstance(data, (str, int, float)) and not isinstance(data, bool) and prefix:
        out.append(_Leaf(prefix, data))


def _key(value: Any) -> Any:
    """A fact's comparable form: a number's value, else the text folded."""
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    if _NUMBER.fullmatch(text):
        return float(text.replace(",", ""))
    return text.casefold()


def _index(pair: Pair) -> dict[Any, _Leaf]:
    """Each fact value of the pair's result (first) and earlier results -> its leaf."""
    leaves: list[_Leaf] = []
    _leaves(pair.result, "" if isinstance(pair.result, dict) else "result", leaves)
    if not isinstance(pair.result, (dict, list)) and leaves == []:
        leaves.append(_Leaf("result", pair.result))
    for name, value in pair.context.items():
        if not _UNSAFE_KEY.search(name):
            _leaves(value, f"context[{name}]", leaves)
    found: dict[Any, _Leaf] = {}
    for leaf in leaves:
        found.setdefault(_key(leaf.value), leaf)
    return found


def _facts(pair: Pair, index: dict[Any, _Leaf]) -> list[tuple[int, int, Any]]:
    """The facts of the answer: `(start, end, key)` of its numbers and ids, and of the names
    (text values of the run's results, the longest `_NAMES_MAX`) it contains, longest first
    where they overlap."""
    spans = [(m.start(), m.end(), _key(m.group())) for m in _TOKEN.finditer(pair.answer)]
    folded = pair.answer.casefold()
    names = [k for k in index if isinstance(k, str) and _WORD_LEAF.match(k) and k not in _COMMON]
    for name in sorted(names, key=len, reverse=True)[:_NAMES_MAX]:
        for match in re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", folded):
            spans.append((match.start(), match.end(), name))
    spans.sort(key=lambda s: (s[0], -(s[1] - s[0])))
    kept: list[tuple[int, int, Any]] = []
    for span in spans:
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return kept


def _skeleton(
    pair: Pair, facts: list[tuple[int, int, Any]], index: dict[Any, _Leaf]
) -> tuple[str | None, list[str], int]:
    """The answer with each fact found in a result replaced by its field; the paths used, and
    how many facts were found in no result.

    A sentence holding a number or id found in no result is left out: kept as it is, it would
    tell every later user this one's figure."""
    parts: list[str] = []
    paths: list[str] = []
    unmapped = 0
    at_fact = 0  # facts are in order: each sentence takes the next ones
    for begin, finish in _sentences(pair.answer, facts):
        first = at_fact
        while at_fact < len(facts) and facts[at_fact][0] < finish:
            at_fact += 1
        inside = [f for f in facts[first:at_fact] if f[0] >= begin]
        if any(index.get(key) is None for _, _, key in inside):
            unmapped += sum(index.get(key) is None for _, _, key in inside)
            continue
        at = begin
        for start, end, key in inside:
            leaf = index[key]
            parts.append(_escaped(pair.answer[at:start]))
            text = pair.answer[start:end]
            decimals = text.split(".")[1] if "." in text and isinstance(leaf.value, float) else ""
            spec = f":.{len(decimals)}f" if decimals.isdigit() else ""
            parts.append("{" + leaf.path + spec + "}")
            paths.append(leaf.path)
            at = end
        parts.append(_escaped(pair.answer[at:finish]))
    if not paths:
        return None, paths, unmapped
    return mask_secrets("".join(parts).strip()), paths, unmapped


def _sentences(text: str, facts: list[tuple[int, int, Any]]) -> Iterator[tuple[int, int]]:
    """`(start, end)` of each sentence of `text`, the space after it included; never inside a
    fact (`Dr. Carlos` is one name)."""
    inside = bytearray(len(text) + 1)  # 1: a position within a fact (no break there)
    for start, end, _ in facts:
        inside[start + 1 : end + 1] = b"\x01" * (end - start)
    start = 0
    for match in re.finditer(r"(?<=[.!?:])\s+(?=[^a-z0-9])|\n+", text):
        if inside[match.end()]:
            continue
        yield start, match.end()
        start = match.end()
    if start < len(text):
        yield start, len(text)


def _escaped(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _rendered(template: str, pair: Pair) -> str | None:
    try:
        text = render_answer(template, pair.result, pair.context)
    except Exception:  # a field this result lacks: the template cannot render it
        return None
    return text if isinstance(text, str) else None


@dataclass(frozen=True)
class _Validation:
    coverage: float
    """Mean share of each recorded answer's facts the rendered text carries."""
    covered_share: float
    """Share of the answers with at least 80% of their facts carried."""
    wrong_share: float
    """Mean share of the template's fields that, rendered, contradict the recorded answer."""
    wrong_pairs: int
    """Pairs on which a field contradicts the recorded answer (see `_contradicted`)."""


def _name(path: str) -> str:
    """A field path's last key: `flights[1][departs]` -> `departs`."""
    return path.rsplit("[", 1)[-1].rstrip("]") if "[" in path else path.split(":", 1)[0]


def _contradicted(
    template: str, pair: Pair, stated: set[Any], index: dict[Any, _Leaf]
) -> tuple[int, int]:
    """(fields that contradict the recorded answer, fields rendered) on one pair.

    A field contradicts the answer when its value is not among the answer's facts while the
    answer states a value of a field of that name (the template says departs 13:15 where the
    answer said departs 06:10: the wrong item of a list)."""
    names = {_name(index[key].path) for key in stated if key in index}
    fields = [f for _, f, _, _ in string.Formatter().parse(template) if f]
    wrong = 0
    for path in fields:
        try:
            value = render_answer("{" + path + "}", pair.result, pair.context)
        except Exception:  # a field this result lacks: not rendered, not wrong
            continue
        if _key(value) not in stated and _name(path) in names:
            wrong += 1
    return wrong, len(fields)


def _validated(
    template: str,
    pairs: Sequence[Pair],
    facts: Sequence[list[tuple[int, int, Any]]],
    indexes: Sequence[dict[Any, _Leaf]],
) -> _Validation:
    """The template rendered on every pair, its facts compared with the recorded answer's."""
    scores: list[float] = []
    wrong: list[float] = []
    for pair, answer_facts, index in zip(pairs, facts, indexes, strict=True):
        rendered = _rendered(template, pair)
        if rendered is None:
            if answer_facts:
                scores.append(0.0)
            continue
        stated = {key for _, _, key in answer_facts}
        contradicting, fields = _contradicted(template, pair, stated, index)
        if fields:
            wrong.append(contradicting / fields)
        if not answer_facts:
            continue
        carried = {_key(m.group()) for m in _TOKEN.finditer(rendered)}
        folded = rendered.casefold()
        hits = sum(
            1
            for _, _, key in answer_facts
            if key in carried or (isinstance(key, str) and key in folded)
        )
        scores.append(hits / len(answer_facts))
    return _Validation(
        coverage=sum(scores) / len(scores) if scores else 0.0,
        covered_share=sum(s >= 0.8 for s in scores) / len(scores) if scores else 0.0,
        wrong_share=sum(wrong) / len(wrong) if wrong else 0.0,
        wrong_pairs=sum(w > 0 for w in wrong),
    )


def template_from(source: str, tool: str, *, format: str | None = None) -> Learned:  # noqa: A002
    """`learn_template` on the recorded conversations of `source` (`report --from`'s readers).

    Raises:
        UnknownFormatError, ToolstopConfigError, OSError: as `read_from` does.
    """
    from toolstop._redact import is_postgres
    from toolstop.report.from_logs import (
        FromLogs,
        checkpoint_conversations,
        is_checkpoints,
        join_threads,
    )
    from toolstop.report.sources import check_source, detect_format, read_conversations

    if not is_postgres(source) and Path(source).exists():
        check_source(source)  # a FIFO would hang the first open: refused before any
    if format is None:
        format = "checkpoints" if is_checkpoints(source) else detect_format(Path(source))  # noqa: A001
    found = FromLogs(format=format or "openai")
    if format == "checkpoints":
        stream: Iterable[Any] = checkpoint_conversations(source, found)
    else:
        stream = join_threads(
            read_conversations(source, format=format, problems=found.problems),  # type: ignore[arg-type]
            problems=found.problems,
        )

    def pairs() -> Iterator[Pair]:
        for item in stream:
            yield from pairs_of(item.messages, tool)

    return learn_template(tool, pairs())


def template_lines(document: Mapping[str, Any]) -> list[str]:
    """What `report --template` prints: the line to paste, its coverage, three pairs."""
    tool = document["tool"]
    if document["template"] is None:
        why = (
            "no recorded answer came right after it"
            if not document["pairs"]
            else "no fact of its answers appears in a result of the run"
        )
        return [f"template for {tool}: none ({why}; {document['pairs']} pairs)"]
    lines = [
        f"template for {tool}, from {document['pairs']} recorded answers:",
        f"  {document['convert']}",
        f"  coverage: {document['coverage']:.0%} of the answers' facts (numbers, ids, names) "
        f"carried; {document['covered_share']:.0%} of the answers at 80% or more",
    ]
    if document["wrong_pairs"]:
        lines.append(
            f"  WARNING: on {document['wrong_pairs']} of the recorded results a field of it "
            "contradicts the recorded answer (another value of the same field, e.g. the wrong "
            "item of a list): read the pairs; a wrong receipt is worse than a model call"
        )
    if document["list_positions"]:
        lines.append(
            "  uses list positions ("
            + ", ".join(document["list_positions"])
            + "): right only when the item is always there; otherwise write answer= as a "
            "function that finds the item"
        )
    if document["uses_context"]:
        lines.append("  uses earlier results of the run: " + ", ".join(document["uses_context"]))
    if document["not_reached"]:
        lines.append(
            "  fields the answers used that it does not: " + ", ".join(document["not_reached"])
        )
    if document["unmapped_answers"]:
        lines.append(
            f"  {document['unmapped_answers']} answers hold facts found in no result "
            "(computed, or from the conversation): a template cannot give them"
        )
    for example in document["examples"]:
        lines.append(f"  rendered: {example['rendered']}")
        lines.append(f"  recorded: {example['recorded']}")
    return lines

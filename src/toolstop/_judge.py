"""What the model did with a tool's result in its final answer: features, never content.

Computed once at a run's end from the last tool turn's result and the model's final answer, and
stored in the record (`ended_after.judged`) as a few words and field names; the report turns them
into advice (`toolstop.report.candidates`). Pure functions, no I/O.

- **Shape** of the result: `empty`, `object` (a JSON object), `list` (a JSON array, or an object
  whose only value is one), `value` (a bare JSON scalar, or at most three words) or `prose`.
- **Action** of the answer, the first that applies: `asked` (the answer asks the user
  something, a closing "anything else?" aside), `computed` (it states numbers the result does
  not hold), `selected` (it names some items of a list and not others, or uses little of a long
  prose result), `relayed` (prose whose words it mostly repeats, or a short prose receipt it
  restates: the result as is would have served), `restated` (it uses the result's values or
  words in its own sentence: a tool-written `answer` would have served), `own` (little of the
  result: the model's own reasoning).
- **Fields**: the names of the JSON keys whose values the answer uses (at most `FIELDS_MAX`,
  masked to letters, digits, `_`, `-` and `.`, each cut at `FIELD_CHARS`).
- **Earlier**: a number the answer states that this result does not hold is not computed when
  an earlier result the model saw holds it (a card's last four digits, a departure time): the
  answer restated it from there. `earlier` names those results' tools, and such an answer is
  `restated` rather than `relayed` (the result as is lacks those facts). A number found in no
  result is `computed`.

Words are case-folded `\\w+` tokens; digit-only tokens, JSON keys, punctuation and common short
words never count as repeated words (digits from times and prices made a filtered flight list
look relayed). Deliberately a heuristic: it reads tokens, not meaning (a paraphrase in other
words, a translation, a unit conversion are misread), and it sees only the final answer.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any, Literal

__all__ = [
    "FIELDED",
    "FIELDS_MAX",
    "FIELD_CHARS",
    "TOOL_CHARS",
    "Action",
    "Shape",
    "judge",
    "judge_turn",
    "shape_of",
    "text_of",
]

Shape = Literal["empty", "object", "list", "value", "prose"]
Action = Literal["asked", "computed", "selected", "relayed", "restated", "own"]

FIELDS_MAX = 8
"""At most this many field names are kept per judged result."""
FIELD_CHARS = 40
"""A field name is cut at this many characters."""
TOOL_CHARS = 64
"""A tool name in `earlier` is cut at this many characters (masked as field names are)."""

RELAYED = 0.6
"""A prose result: at least this share of the answer's words found in it reads as relayed."""
RESTATED = 0.3
"""At least this share (or one used JSON value) reads as restated rather than the model's own."""
RECEIPT = 40
"""A prose result of at most this many words is a receipt: an answer that restates it (a
paraphrase shares few words: `PARAPHRASE` of them, or one number of 10 or more, is enough) is
served by the receipt as it is."""
PARAPHRASE = 0.25
COVERED = 0.3
"""The share of a prose result's distinct words (one longer than `RECEIPT`) an answer must use
to count as relaying it; less is a selection (one of two retrieved chunks)."""

_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_FIELD_SAFE = re.compile(r"[^A-Za-z0-9_.\-]")
_QUESTION = re.compile(r"(?:^|(?<=[.!?\n]))[^.!?\n]*\?")
"""A question: from a sentence's start to its `?` (tried at sentence starts only, so a long
answer without a full stop takes linear time)."""
_CLOSING = re.compile(
    r"anything else|any other|other questions?|further (?:help|assist|question)|"
    r"help (?:you )?with anything|can i help|may i help|assist you|"
    # the same closing in Spanish, Portuguese, French, German
    r"algo m[aá]s|otra (?:cosa|consulta|pregunta)|en qu[eé] m[aá]s|puedo ayudar|"
    r"mais alguma|posso ajudar|autre chose|puis-je vous aider|sonst noch|weiter helfen",
    re.IGNORECASE,
)
_OFFER = re.compile(
    r"^\W*(?:(?:okay|ok|so|then|entonces|bien)\W+)?"
    r"(?:would you like|do you want|want me to|shall i\b|should i\b|"
    r"te gustar[ií]a|le gustar[ií]a|quieres que|quiere que|deseas? que|"
    r"gostaria|voulez-vous|souhaitez-vous|m[oö]chten sie)",
    re.IGNORECASE,
)
_REQUEST = re.compile(
    r"\bi(?:'ll| will)? need (?:your|the|some|a)\b|\bplease (?:provide|tell|share|send|give)\b|"
    r"\bnecesito (?:tu|su|el|la|que)\b|\bpor favor,? (?:dime|ind[ií]ca|proporciona|env[ií]a)",
    re.IGNORECASE,
)
_TRUE = frozenset({"true", "yes", "ok", "success", "successful", "done"})
_OUTCOME = frozenset(
    {
        "success", "successful", "successfully", "succeeded", "done", "ok", "completed",
        "confirmed", "exito", "exitoso", "exitosa", "listo", "completado", "confirmado",
        "sucesso", "reussi", "erfolgreich",
    }
)  # fmt: skip
"""Words that make a bare status an outcome (accents dropped, as `_words` reads them)."""
_COMMON = frozenset(
    {
        "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
        "been", "but", "by", "can", "could", "d", "did", "do", "does", "for", "from", "had",
        "has", "have", "he", "her", "here", "his", "how", "i", "if", "in", "into", "is", "it",
        "its", "just", "let", "ll", "m", "me", "more", "my", "no", "not", "now", "of", "on",
        "or", "our", "out", "please", "re", "s", "she", "so", "t", "than", "that", "the",
        "their", "them", "then", "there", "these", "they", "this", "to", "up", "us", "ve",
        "was", "we", "were", "what", "when", "where", "which", "while", "who", "will", "with",
        "would", "you", "your", "yours",
    }
)  # fmt: skip


def _folded(text: str) -> str:
    """`text` case-folded, accents dropped ("Sótero" and "Sotero" are one word)."""
    if text.isascii():  # nothing to decompose, no accent to drop: skip the per-character pass
        return text.casefold()
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _words(text: str) -> list[str]:
    """The text's case-folded words that can count as repeated: no digit-only token, no
    common short word; accents dropped."""
    return [w for w in _WORD.findall(_folded(text)) if not w.isdigit() and w not in _COMMON]


def _numbers(text: str) -> set[float]:
    found = set()
    for token in _NUMBER.findall(text):
        try:
            found.add(float(token.replace(",", "")))
        except ValueError:  # pragma: no cover - the pattern only matches numbers
            continue
    return found


def _parsed(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in '[{"-0123456789tfn':
        return _NOT_JSON
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        return _NOT_JSON


def text_of(content: Any) -> str:
    """The text of a message's content, as the judge and the advisor's readers read it.

    A string, or the strings and the `text` of the blocks of a list, joined by spaces; anything
    else (a decoded checkpoint may hold anything) is no text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return " ".join(parts)
    return ""


_NOT_JSON = object()


_ENVELOPE = frozenset(
    {
        "count", "total", "totalcount", "totalresults", "numresults", "resultcount",
        "totalpages", "page", "pages", "pagesize", "perpage", "limit", "offset", "next",
        "nextpage", "nextcursor", "nextpagetoken", "pagetoken", "cursor", "hasmore", "more",
        "previous", "prev", "prevpage", "previouspage", "query",
    }
)  # fmt: skip
"""Keys a search API puts beside its list of results (a count, a page, the query), case-folded
without `_` and `-` (`total_count`, `totalCount`, `nextPageToken`): an object of one list and
such scalars is the list (`{"results": [...], "total": 12}`). An order with its items
(`{"order_id": ..., "status": ..., "items": [...]}`) stays an object."""


def _enveloped(data: dict[str, Any]) -> list[Any] | None:
    """The list of an object holding one list, beside nothing or `_ENVELOPE` scalars only."""
    found = None
    for key, value in data.items():
        if isinstance(value, list):
            if found is not None:
                return None
            found = value
        elif isinstance(value, dict) or (
            key.casefold().replace("_", "").replace("-", "") not in _ENVELOPE
        ):
            return None
    return found


def shape_of(text: str) -> tuple[Shape, Any]:
    """The result's shape, and its parsed JSON (or `None` for prose and empty results)."""
    if not text.strip():
        return "empty", None
    data = _parsed(text)
    if data is _NOT_JSON:
        return ("value" if len(text.split()) <= 3 else "prose"), None
    if isinstance(data, dict):
        if len(data) <= len(_ENVELOPE):
            items = _enveloped(data)
            if items is not None:
                return "list", items
        return ("object" if data else "empty"), data
    if isinstance(data, list):
        return ("list" if data else "empty"), data
    return "value", data


def _leaves(data: Any, key: str, out: list[tuple[str, str]], depth: int = 0) -> bool:
    """(field name, value text) of every scalar in `data`, the field named by its nearest key,
    added to `out`. False when a limit (nesting, or `out`'s length) cut the reading short."""
    if depth > 20 or len(out) > 5000:
        return False
    complete = True
    if isinstance(data, dict):
        for inner, value in data.items():
            if isinstance(value, (dict, list)):
                complete = _leaves(value, str(inner), out, depth + 1) and complete
            elif depth >= 20 or len(out) > 5000:  # the limits a call for the scalar would meet
                complete = False
            elif value is not None and not isinstance(value, bool):
                out.append((str(inner), str(value)))  # a scalar, without a call of its own
    elif isinstance(data, list):
        for value in data:
            complete = _leaves(value, key, out, depth + 1) and complete
    elif data is not None and not isinstance(data, bool):
        out.append((key, str(data)))
    return complete


_NOTHING: frozenset[Any] = frozenset()


def _used(value: str, answer_words: set[str], answer_numbers: set[float]) -> frozenset[Any]:
    """What of a JSON value the answer uses (empty: nothing): those of its distinctive words
    (not digits, not a common word, at least three letters) the answer has, or, for a value
    without such words, its numbers when the answer states them all (one of 10 or more)."""
    found: set[str] | None = None
    worded = False  # `_words(value)` read inline: this runs once per distinct value of a result
    for word in _WORD.findall(value.casefold() if value.isascii() else _folded(value)):
        if len(word) >= 3 and word not in _COMMON and not word.isdigit():
            worded = True
            if word in answer_words:
                if found is None:
                    found = set()
                found.add(word)
    if worded or not answer_numbers:
        return frozenset(found) if found else _NOTHING
    if value.isascii() and value.replace(".", "", 1).isdigit() and "." not in (value[0], value[-1]):
        number = float(value)  # a plain number (`_numbers` of it, without the pattern)
        return frozenset((number,)) if number >= 10 and number in answer_numbers else _NOTHING
    numbers = _numbers(value)
    if numbers and numbers <= answer_numbers and max(numbers) >= 10:
        return frozenset(numbers)
    return _NOTHING


def _mask(name: str) -> str:
    return _FIELD_SAFE.sub("_", name)[:FIELD_CHARS] or "_"


def _unheld(answer_numbers: set[float], held: set[float]) -> set[float]:
    """The numbers (10 or more) the answer states (`answer_numbers`) that the result does not
    hold (`held`, the result's numbers)."""
    return {n for n in answer_numbers if n >= 10 and n not in held}


def _sources(unheld: set[float], earlier: Sequence[tuple[str, str]]) -> list[str] | None:
    """The tools of the earlier results that hold every number of `unheld` (the most recent
    result first, each tool named once, at most `FIELDS_MAX`), or `None` when some number is
    in none of them."""
    left = set(unheld)
    tools: list[str] = []
    for tool, text in reversed(earlier):
        found = left & _numbers(text)
        if found:
            left -= found
            name = _FIELD_SAFE.sub("_", tool)[:TOOL_CHARS] or "_"
            if name not in tools and len(tools) < FIELDS_MAX:
                tools.append(name)
        if not left:
            return tools
    return None


def _asked(answer: str) -> bool:
    """The answer asks the user something: a question, or a request without a question mark
    ("I'll need your phone number", "please provide ..."). A closing "anything else?" and a
    question that is a yes/no offer of a next step ("Would you like me to book it?") do not
    count: they ask for nothing the task needs, and a tool-written answer can make the same
    offer."""
    if _REQUEST.search(answer):
        return True
    return "?" in answer and any(  # no question without its mark: no pattern to run
        not _CLOSING.search(q) and not _OFFER.match(q.strip()) for q in _QUESTION.findall(answer)
    )


def _receipt(shape: Shape, data: Any, result_words: list[str]) -> bool:
    """A result that reports an action's outcome rather than data to choose from.

    A bare status of at most three words with an outcome word ("Transfer successful", "Done"),
    or a JSON object with a top-level flag that says yes (`true`, "True", "ok", "success", ...)
    and a message (a text value of at least three words). Not prose: a short prose result ("no
    protocol found") is as often the start of the model's own reasoning. `result_words`: the
    result's `_words`."""
    if shape == "value":
        return data is None and any(w in _OUTCOME for w in result_words)
    if shape != "object" or not isinstance(data, dict):
        return False
    values = list(data.values())
    flag = any(v is True or (isinstance(v, str) and v.strip().casefold() in _TRUE) for v in values)
    return flag and any(isinstance(v, str) and len(v.split()) >= 3 for v in values)


def _items_used(
    items: list[Any],
    used: Callable[[str], frozenset[Any]],
    read: list[tuple[int, int, bool]],
    uses: list[frozenset[Any]],
) -> int:
    """How many of the first 500 items have something the answer uses (`used`, see `_used`)
    that not every one of them has: a word or number all items share (a common origin, a name
    every product starts with) picks none of them.

    `read`: where each item's leaves are in the reading of the whole list, and whether it read
    them all; `uses`: what the answer uses of each leaf of that reading. An item whose reading a
    limit cut short, and in which nothing used was found, is read again on its own (where the
    limits start afresh)."""
    unions: list[frozenset[Any]] = []  # what the answer uses of each item
    count = 0
    for item, (start, end, complete) in zip(items[:500], read, strict=False):
        union = _NOTHING.union(*uses[start:end])
        if not union and not complete:
            leaves: list[tuple[str, str]] = []
            _leaves(item, "", leaves)
            union = _NOTHING.union(*(used(v) for _, v in leaves))
        unions.append(union)
        if union:
            count += 1
    if count < 2 or count < len(unions):
        return count  # an item uses nothing: nothing is shared by all
    shared = unions[0].intersection(*unions[1:])
    return sum(1 for union in unions if union - shared) if shared else count


def judge(result: str, answer: str, earlier: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """The features of one (result, final answer) pair: `shape`, `action`, `fields`.

    Args:
        result: The tool's result text (the ToolMessage's text; for several results of the
            same tool in one turn, see `judge_turn`).
        answer: The model's final answer text.
        earlier: `(tool, result text)` of the results the model saw before this turn, oldest
            first: where a number the answer states and `result` does not hold may come from.

    Returns:
        `{"shape": Shape, "action": Action, "fields": [names]}`, and `earlier` (the tools
        whose results held the answer's other numbers) when there are such; `fields` is empty
        for prose.
    """
    shape, data = shape_of(result)
    words = _words(answer)  # each text's words and numbers are read once
    answer_words = set(words)
    answer_numbers = _numbers(answer)
    result_numbers = _numbers(result)
    read: list[list[str]] = []

    def result_words() -> list[str]:
        if not read:
            read.append(_words(result))
        return read[0]

    known: dict[str, frozenset[Any]] = {}

    def used(value: str) -> frozenset[Any]:
        """`_used`, once per distinct value (a list repeats its values item after item)."""
        found = known.get(value)
        if found is None:
            found = known[value] = _used(value, answer_words, answer_numbers)
        return found

    fields: list[str] = []
    used_any = False
    read_items: list[tuple[int, int, bool]] = []  # where a list's items are in `leaves`
    leaves: list[tuple[str, str]] = []  # (field name, value text) of the result's scalars
    uses: list[frozenset[Any]] = []  # what the answer uses of each of `leaves`
    if shape in ("object", "list") or (shape == "value" and data is not None):
        if isinstance(data, list):  # `_leaves(data, "value", leaves)`, item by item
            for item in data:
                start = len(leaves)
                complete = _leaves(item, "value", leaves, 1)
                read_items.append((start, len(leaves), complete))
        else:
            _leaves(data, "value", leaves)
        named: set[str] = set()  # the field names already masked (a list repeats them)
        for name, value in leaves:
            found = known.get(value)  # `used(value)`, without the call (once per leaf)
            if found is None:
                found = known[value] = _used(value, answer_words, answer_numbers)
            uses.append(found)
            if found:
                used_any = True
                if name not in named and len(fields) < FIELDS_MAX:
                    named.add(name)
                    masked = _mask(name)
                    if masked not in fields:
                        fields.append(masked)
    action: Action
    unheld = _unheld(answer_numbers, result_numbers)
    sources = _sources(unheld, earlier) if unheld else []
    if _asked(answer):
        action = "asked"
    elif sources is None:
        action = "computed"
    elif shape == "list":
        items = data if isinstance(data, list) else []
        used_items = _items_used(items, used, read_items, uses)
        if len(items) >= 2 and 0 < used_items < len(items):
            action = "selected"
        else:
            action = "restated" if used_any else "own"
    elif shape in ("object", "value") and data is not None:
        action = "restated" if used_any else "own"
    else:
        action = _prose_action(shape, result, words, result_words, answer_numbers, result_numbers)
    if action == "own" and _receipt(shape, data, result_words() if shape == "value" else []):
        action = "restated"  # the outcome announced in the model's words (or translated)
    if not sources or action == "asked":
        return {"shape": shape, "action": action, "fields": fields}
    if action == "relayed":
        action = "restated"  # the result as is lacks the facts taken from earlier results
    return {"shape": shape, "action": action, "fields": fields, "earlier": sources}


def judge_turn(
    results: Sequence[str],
    answer: str,
    earlier: Sequence[tuple[str, str]] = (),
    *,
    limit: int = 200_000,
) -> dict[str, Any]:
    """`judge` of one tool's results of a turn: one result, or several (the tool called twice).

    Several results are never read as one prose text: when every one is JSON they are judged
    as a JSON list of them (its items the results), else their texts joined by blank lines;
    either way never `relayed` (`restated` instead), as hard mode would show the user each
    result as it is, not one answer. `limit`: the texts are judged on their first `limit`
    characters (a JSON list longer than that is judged as joined text)."""
    answer = answer[:limit]
    if len(results) == 1:
        return judge(results[0][:limit], answer, earlier)
    parsed = [_parsed(text) for text in results]
    text = ""
    if parsed and all(data is not _NOT_JSON for data in parsed):
        text = json.dumps(parsed, ensure_ascii=False)
    if not text or len(text) > limit:
        text = "\n\n".join(results)[:limit]
    judged = judge(text, answer, earlier)
    if judged["action"] == "relayed":
        judged["action"] = "restated"
    return judged


def _prose_action(
    shape: Shape,
    result: str,
    words: list[str],
    read_result: Callable[[], list[str]],
    answer_numbers: set[float],
    result_numbers: set[float],
) -> Action:
    """What the answer did with a prose (or bare-word, or empty) result.

    `words`: the answer's `_words`; `read_result`: the result's (read when needed); the
    numbers: `_numbers` of the answer and of the result."""
    if shape == "empty" or not words:
        return "own"
    result_words = read_result()
    source = set(result_words)
    share = sum(w in source for w in words) / len(words)
    # a short receipt the answer restates or paraphrases: its own words would have served,
    # unless it is a list of labelled fields ("Hospital: X | Date: Y"), which a user is not
    # shown as is: then a tool-written answer would have served
    served: Action = "restated" if _fielded(result) else "relayed"
    if share >= RELAYED:
        if len(result_words) > RECEIPT:
            covered = len(source & set(words)) / max(len(source), 1)
            return "relayed" if covered >= COVERED else "selected"
        return served
    if share >= RESTATED:
        return served if len(result_words) <= RECEIPT else "restated"
    if len(result_words) <= RECEIPT and (
        share >= PARAPHRASE or any(n >= 10 for n in answer_numbers & result_numbers)
    ):
        return served
    return "own"


_LABEL = re.compile(r"(?:^|[|\n;,-])\s*[^\W\d_][\w/ ]{0,24}:\s", re.MULTILINE)
FIELDED = 3
"""A prose result with at least this many `Label: value` fields is a record written as text."""


def _fielded(result: str) -> bool:
    """Whether a prose result is a record of labelled fields (`Label: value`, at least
    `FIELDED` of them)."""
    # each field holds its own colon: fewer colons, fewer fields (no pattern to run)
    return result.count(":") >= FIELDED and len(_LABEL.findall(result)) >= FIELDED

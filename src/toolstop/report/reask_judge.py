"""`toolstop report --db ... --judge MODEL` on a canary: a chat model's reading of the re-asks.

The deterministic reading (`toolstop._reask.asked_again`) wrote each re-ask verdict into the
next run's record (`reask`). With `--judge`, a sample of those entries is read again by a chat
model (`toolstop._reask.judge_reask`), and report.json's `arms.model_judge` says, per arm, how
often the model agrees, both ways, and its own re-ask rate on the sample. It never changes the
arms' figures or the verdict.

- **Which entries**: those the arms' comparison counts (`reask` naming a run of an arm that got
  its arm's treatment, `toolstop.report.arms`), at most `--judge-samples` per arm, the ones with
  the smallest seeded hash of where they live (`Sample(size, seed="reask")`): the same database
  gives the same sample, in constant memory.
- **The texts, from the checkpoints**: the record holds no content, so the step is rebuilt from
  the thread's messages at the checkpoint of run n+1's end (n is `reask.run`). When the thread
  holds exactly n+1 user (human) messages there, and the record is run n+1, the k-th human
  message is run k's request: run n's request is the n-th, the user's next message the
  (n+1)-th, and run n's answer the last model message without tool calls between them. When the
  counts do not line up (a run invoked with several user messages, a history trimmed or
  summarised, a checkpoint toolstop cannot decode) the entry is skipped and counted
  (`not_reconstructed`), never guessed.
- **Sent masked**: each text is masked (`toolstop.report.examples.clean`: credentials, URLs,
  e-mail and IP addresses, long hex or base64 runs), stripped of control characters, cut and
  fenced (`reask_messages`), with `toolstop._reask.RUBRIC`.
- **Counted, never guessed**: a call that raises is `failed` (its first error kept, masked), a
  reply `parse_reask` cannot read is `unparseable`; only the rest are `judged`.

Deliberately not handled: a `same_call` verdict (the next run repeated the previous run's call)
is read from calls, which the model does not see; the model reads only the three texts, so it
may well say no there (counted as `model_no_det_yes`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from toolstop._judge import text_of
from toolstop._reask import JUDGE_CHARS, judge_reask, reask_messages
from toolstop.report.arms import _treatment, wilson
from toolstop.report.examples import clean
from toolstop.report.model_judge import Sample

__all__ = [
    "SEED",
    "ReAskSample",
    "describe_arm",
    "judge_steps",
    "messages_of_steps",
    "reask_judge_lines",
    "reask_of",
    "step_of",
]

SEED = "reask"
"""The re-ask sample's seed (another sample than the advice's, from the same database)."""

Step = tuple[str, str | None, str]
"""Run n's request, run n's answer (`None`: none found), run n+1's first user message."""


def reask_of(record: Any) -> tuple[str, bool, int] | None:
    """`(arm, deterministic verdict, run n)` of a `reask` the arms count, else `None`."""
    reask = record.get("reask") if isinstance(record, Mapping) else None
    if not isinstance(reask, Mapping):
        return None
    arm, again, run = reask.get("arm"), reask.get("asked_again"), reask.get("run")
    if not isinstance(arm, str) or not isinstance(again, bool):
        return None
    if _treatment(arm, reask.get("stopped")) is False:
        return None
    return arm, again, run if isinstance(run, int) and not isinstance(run, bool) else 0


def _kept(text: str) -> str:
    """`text` as the judge may see it: masked, without control characters, cut (a bound on
    what a sample holds in memory; `reask_messages` cuts at `JUDGE_CHARS` again)."""
    return clean(text, JUDGE_CHARS)


def step_of(messages: Sequence[BaseMessage], run: int, record_run: Any) -> Step | None:
    """The step a `reask` about run `run` read, rebuilt from run `record_run`'s messages.

    `None` unless `record_run` is `run + 1` and the messages hold exactly `run + 1` human
    messages (then the k-th is run k's request; see the module). The texts are cleaned."""
    if run < 1 or record_run != run + 1:
        return None
    humans = [i for i, m in enumerate(messages) if getattr(m, "type", None) == "human"]
    if len(humans) != run + 1:
        return None
    start, following = humans[run - 1], humans[run]
    answer = next(
        (
            m
            for m in reversed(messages[start + 1 : following])
            if isinstance(m, AIMessage) and not m.tool_calls
        ),
        None,
    )
    return (
        _kept(text_of(messages[start].content)),
        _kept(text_of(answer.content)) if answer is not None else None,
        _kept(text_of(messages[following].content)),
    )


class ReAskSample:
    """Per arm, the re-ask entries to judge, offered one run at a time (bottom-k, seeded)."""

    def __init__(self, size: int) -> None:
        """An empty sample of at most `size` entries per arm."""
        self._sample = Sample(size, seed=SEED)
        self.entries: Counter[str] = Counter()

    def add(self, end: Any) -> None:
        """Offer one finished run (`RunEnd`); taken when its record has a counted `reask`."""
        found = reask_of(getattr(end, "record", None))
        if found is not None:
            self.entries[found[0]] += 1
            self._sample.add(found[0], end)

    def read(
        self, messages_of: Callable[[Any], Sequence[BaseMessage] | None]
    ) -> dict[str, dict[str, Any]]:
        """Per arm, the sampled steps rebuilt from `messages_of(end)` (the checkpoint's messages).

        Each arm: `entries`, `sampled`, `not_reconstructed`, and `steps`, each
        `(step, deterministic verdict)`."""
        read: dict[str, dict[str, Any]] = {}
        for arm, ends in self._sample.runs().items():
            steps: list[tuple[Step, bool]] = []
            for end in ends:
                found = reask_of(end.record)
                if found is None:  # only such runs were sampled
                    continue
                _, again, run = found
                messages = messages_of(end)
                step = step_of(messages, run, end.record.get("run")) if messages else None
                if step is not None:
                    steps.append((step, again))
            read[arm] = {
                "entries": self.entries[arm],
                "sampled": len(ends),
                "not_reconstructed": len(ends) - len(steps),
                "steps": steps,
            }
        return read


def messages_of_steps(read: Mapping[str, Mapping[str, Any]]) -> list[list[Any]]:
    """The judge's messages for every step of `read`, for the call and token estimate."""
    return [reask_messages(*step) for entry in read.values() for step, _ in entry["steps"]]


def judge_steps(
    model: Any,
    read: Mapping[str, Mapping[str, Any]],
    arms: Mapping[str, Any],
    describe: Callable[[BaseException], str],
    advance: Callable[[], None] = lambda: None,
) -> dict[str, dict[str, Any]]:
    """Ask `model` about each step of `read` (`ReAskSample.read`); per arm, its reading.

    Per arm of `arms["by_arm"]` (and any arm sampled), its `arms.model_judge.by_arm` entry;
    never raises for a failed call. Each entry: `label`; `entries` (the arm's counted re-ask
    entries), `sampled`, `not_reconstructed`, `calls`, `failed`, `unparseable`; `error` (the
    first failure, as `describe` shows it); `judged` (replies read); `asked_again` (the model
    said yes), `rate` and `interval` (the model's re-ask rate on the judged steps, Wilson
    95%); `deterministic` and `deterministic_rate` (the records' yes on the same steps);
    `agree`, `model_yes_det_no`, `model_no_det_yes`."""
    by_arm = arms.get("by_arm") or {}
    judged: dict[str, dict[str, Any]] = {}
    for arm in dict.fromkeys([*by_arm, *read]):
        entry = read.get(arm) or {"entries": 0, "sampled": 0, "not_reconstructed": 0, "steps": []}
        counts: Counter[str] = Counter()
        error: str | None = None
        for step, again in entry["steps"]:
            advance()
            try:
                said = judge_reask(model, *step)
            except Exception as raised:  # HTTP error, timeout, refused key: counted
                counts["failed"] += 1
                error = error or describe(raised)
                continue
            if said is None:
                counts["unparseable"] += 1
                continue
            yes = said[0]
            counts["judged"] += 1
            counts["asked_again"] += yes
            counts["deterministic"] += again
            counts["agree"] += yes == again
            counts["model_yes_det_no"] += yes and not again
            counts["model_no_det_yes"] += again and not yes
        n = counts["judged"]
        interval = wilson(counts["asked_again"], n)
        label = by_arm.get(arm, {}).get("label", arm) if isinstance(by_arm, Mapping) else arm
        judged[arm] = {
            "label": label,
            "entries": entry["entries"],
            "sampled": entry["sampled"],
            "not_reconstructed": entry["not_reconstructed"],
            "calls": len(entry["steps"]),
            "failed": counts["failed"],
            "unparseable": counts["unparseable"],
            "error": error,
            "judged": n,
            "asked_again": counts["asked_again"],
            "rate": round(counts["asked_again"] / n, 4) if n else None,
            "interval": [round(x, 4) for x in interval] if interval else None,
            "deterministic": counts["deterministic"],
            "deterministic_rate": round(counts["deterministic"] / n, 4) if n else None,
            "agree": counts["agree"],
            "model_yes_det_no": counts["model_yes_det_no"],
            "model_no_det_yes": counts["model_no_det_yes"],
        }
    return judged


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 100:.1f}%"


def describe_arm(entry: Mapping[str, Any]) -> str:
    """One arm's reading in words: the model's rate, the agreement, what was not judged."""
    n = entry["judged"]
    if n:
        lo, hi = entry["interval"]
        said = (
            f"model {entry['asked_again']:,} of {n:,} judged asked again ({_pct(entry['rate'])}, "
            f"95% {_pct(lo)} to {_pct(hi)}), deterministic {entry['deterministic']:,} "
            f"({_pct(entry['deterministic_rate'])}); agree {entry['agree']:,}, model yes/"
            f"deterministic no {entry['model_yes_det_no']:,}, model no/deterministic yes "
            f"{entry['model_no_det_yes']:,}"
        )
    else:
        said = "none judged"
    rest = [f"{entry['sampled']:,} sampled of {entry['entries']:,}"]
    rest += [
        f"{entry[key]:,} {key.replace('_', ' ')}"
        for key in ("not_reconstructed", "failed", "unparseable")
        if entry.get(key)
    ]
    text = f"{said}; {', '.join(rest)}"
    if entry.get("error"):
        text += f"; first failure: {entry['error']}"
    return text


def reask_judge_lines(arms: Mapping[str, Any] | None) -> list[str]:
    """The summary's lines on the re-ask judge, one per arm (none without `--judge`).

    Strings come from the runs and the model's errors: the caller makes them printable."""
    judge = arms.get("model_judge") if isinstance(arms, Mapping) else None
    if not isinstance(judge, Mapping):
        return []
    return [
        f"re-ask judge ({judge['model']}), {entry['label']}: {describe_arm(entry)}"
        for entry in judge["by_arm"].values()
    ]

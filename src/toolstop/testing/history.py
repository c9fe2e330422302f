"""`assert_valid_history`: the message-order rules real providers enforce, as an assertion.

The rules, in LangChain message terms, and where each comes from:

OpenAI (Chat Completions):
  - *every tool call answered*: an AIMessage with tool calls must be followed by a ToolMessage
    for each call id before any other message. Rejected with "An assistant message with
    'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The
    following tool_call_ids did not have response messages: ...".
  - *no orphan tool message*: a ToolMessage must answer a call of the AIMessage before the run of
    tool messages it is in. Rejected with "Invalid parameter: messages with role 'tool' must be
    a response to a preceeding message with 'tool_calls'".
  Sources: both error texts as the API returns them, quoted in microsoft/promptflow#3130 and
  simonw/llm#937; OpenAI's function-calling guide (platform.openai.com/docs/guides/
  function-calling). toolstop's `LoopbackProvider` answers both with HTTP 400 as well.

Anthropic (Messages API, as `langchain-anthropic` sends LangChain messages):
  - *tool results directly after the tool use*: every tool call of an AIMessage must have its
    ToolMessage before any other message: "messages.N: `tool_use` ids were found without
    `tool_result` blocks immediately after: ... Each `tool_use` block must have a corresponding
    `tool_result` block in the next message." (Anthropic's tool-use guide: "Tool result blocks
    must immediately follow their corresponding tool use blocks in the message history";
    the error as users hit it: anthropics/claude-code#1237, #2697).
  - *no orphan tool result*: a ToolMessage must answer a tool use of the assistant turn before
    it: "unexpected `tool_use_id` found in `tool_result` blocks ... Each `tool_result` block must
    have a corresponding `tool_use` block in the previous message."
  - *alternating roles*: user and assistant turns alternate. `langchain-anthropic`
    (`_merge_messages` in `chat_models.py`) folds a run of ToolMessages and HumanMessages into
    one user turn and hoists SystemMessages into the `system` parameter, so tool -> human is
    fine, but two AIMessages in a row are two assistant turns. Older API versions reject them
    ("roles must alternate between "user" and "assistant""); newer ones silently merge the two
    answers into one, which is no better for a transcript.

Mistral (La Plateforme; the validator is `MistralRequestValidator` in mistral-common,
`src/mistral_common/protocol/instruct/validator.py`):
  - *role order* (`_validate_message_order`): after a tool message only an assistant or another
    tool message may come; after a user message an assistant, system or user message; after a
    system message a user, assistant or system message; after an assistant message an
    assistant, user or tool message. Rejected with "Unexpected role 'user' after role 'tool'"
    (type `invalid_request_message_order`, code 3230: zed-industries/zed#37021,
    avante-corp/avante.nvim#2695, NousResearch/hermes-agent#20154).
  - *as many tool results as tool calls* (`_validate_tool_calls_followed_by_tool_messages`):
    "Not the same number of function calls and responses".

toolstop's own rule for a finished run (checked unless `finished=False`): the thread ends on an
AIMessage without tool calls, so the next user turn is valid everywhere (after a trailing
ToolMessage Mistral refuses the user message; after a trailing tool call every provider does).

Deliberately not checked: content rules (empty messages, Mistral's "content or tool_calls, not
both" of older validators, Anthropic's text-before-tool_result inside one user message, which
`langchain-anthropic` never produces), tool-call id formats (Mistral's 9 characters), and
anything about the request's own last message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, ToolMessage

__all__ = ["PROVIDERS", "Provider", "assert_valid_history", "history_problems"]

Provider = Literal["openai", "anthropic", "mistral"]
"""A provider whose history rules `history_problems` knows."""

PROVIDERS: tuple[Provider, ...] = ("openai", "anthropic", "mistral")
"""Every provider `history_problems` knows, in the order it reports them."""

_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}
_MISTRAL_NEXT = {
    "system": {"user", "assistant", "system"},
    "user": {"assistant", "system", "user"},
    "assistant": {"assistant", "user", "tool"},
    "tool": {"assistant", "tool"},
}


def _role(message: BaseMessage) -> str:
    if isinstance(message, ChatMessage):
        return message.role
    return _ROLES.get(message.type, message.type)


def _call_ids(message: BaseMessage) -> list[str]:
    if not isinstance(message, AIMessage):
        return []
    return [c.get("id") or "" for c in message.tool_calls]


def _pairing(
    messages: Sequence[BaseMessage], orphan: str, unanswered: str, *, skip_system: bool = False
) -> list[str]:
    """Tool messages answer the open calls; all calls are answered before anything else."""
    problems: list[str] = []
    open_calls: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in open_calls:
                problems.append(orphan.format(index=index, id=message.tool_call_id))
            open_calls.discard(message.tool_call_id)
            continue
        if skip_system and message.type == "system":
            continue
        if open_calls:
            problems.append(unanswered.format(where=f"message {index}", ids=sorted(open_calls)))
            open_calls = set()
        open_calls = set(_call_ids(message))
    if open_calls:
        problems.append(unanswered.format(where="end", ids=sorted(open_calls)))
    return problems


def _shared(messages: Sequence[BaseMessage]) -> list[str]:
    """The rules all three providers share, worded as before providers were named."""
    return _pairing(
        messages,
        orphan="message {index}: ToolMessage {id!r} answers no open call",
        unanswered="{where}: tool calls {ids} left unanswered",
    )


def _openai(messages: Sequence[BaseMessage]) -> list[str]:
    return _pairing(
        messages,
        orphan=(
            "openai (no orphan tool message): message {index}: ToolMessage {id!r} answers no "
            "tool call of the assistant message before it"
        ),
        unanswered="openai (every tool call answered): {where}: tool calls {ids} left unanswered",
    )


def _anthropic(messages: Sequence[BaseMessage]) -> list[str]:
    problems = _pairing(
        messages,
        orphan=(
            "anthropic (no orphan tool result): message {index}: ToolMessage {id!r} answers no "
            "tool use of the assistant turn before it"
        ),
        unanswered=(
            "anthropic (tool results directly after the tool use): {where}: tool uses {ids} "
            "have no tool result right after the assistant turn"
        ),
        skip_system=True,
    )
    previous = ""
    for index, message in enumerate(messages):
        role = _role(message)
        if role == "system":
            continue
        if role == previous == "assistant":
            problems.append(
                f"anthropic (alternating roles): message {index}: an assistant turn right after "
                "an assistant turn"
            )
        previous = role
    return problems


def _mistral(messages: Sequence[BaseMessage]) -> list[str]:
    problems: list[str] = []
    previous: str | None = None
    expected = 0
    for index, message in enumerate(messages):
        role = _role(message)
        allowed = _MISTRAL_NEXT.get(previous or "")
        if allowed is not None and role not in allowed:
            problems.append(
                f'mistral (role order): message {index}: rejected with "Unexpected role '
                f"'{role}' after role '{previous}'\""
            )
        if role == "tool":
            expected -= 1
        elif role == "assistant":
            if expected:
                problems.append(
                    f"mistral (as many tool results as tool calls): message {index}: the "
                    f"assistant message before it got {'fewer' if expected > 0 else 'more'} tool "
                    "results than it made calls"
                )
            expected = len(_call_ids(message))
        previous = role
    if expected:
        problems.append(
            f"mistral (as many tool results as tool calls): end: "
            f"{'fewer' if expected > 0 else 'more'} tool results than calls"
        )
    return problems


_RULES: dict[str, Callable[[Sequence[BaseMessage]], list[str]]] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "mistral": _mistral,
}


def _providers(provider: str | Sequence[str] | None) -> list[str]:
    if provider is None:
        return []
    names: list[str]
    if provider == "all":
        names = list(PROVIDERS)
    elif isinstance(provider, str):
        names = [provider]
    else:
        names = list(provider)
    unknown = [name for name in names if name not in _RULES]
    if unknown or not names:
        msg = f"unknown provider {unknown or names!r}: use one of {list(PROVIDERS)} or 'all'"
        raise ValueError(msg)
    return names


def history_problems(
    messages: Sequence[BaseMessage],
    provider: Provider | Literal["all"] | Sequence[Provider] | None = None,
    *,
    finished: bool = True,
) -> list[str]:
    """Everything a provider would reject in `messages`, as sentences (empty: valid).

    Args:
        messages: The thread, oldest first.
        provider: `"openai"`, `"anthropic"`, `"mistral"`, several of them, or `"all"`: check
            that provider's rules (see the module docstring for each rule and its source);
            every sentence starts with the provider and the rule it breaks. `None` (the
            default, as in toolstop 0.1) checks the rules all three share, worded as before:
            every ToolMessage answers a call of the AIMessage before it, and every tool call is
            answered before the next non-tool message.
        finished: The thread is a finished run: it must end on an AIMessage without tool calls
            (toolstop's own rule; False for a thread that is still running).

    Raises:
        ValueError: an unknown provider name.
    """
    names = _providers(provider)
    problems = [p for name in names for p in _RULES[name](messages)] if names else _shared(messages)
    if finished and (
        not messages or not isinstance(messages[-1], AIMessage) or messages[-1].tool_calls
    ):
        problems.append("end: the thread does not end on an AIMessage without tool calls")
    return problems


def assert_valid_history(
    messages: Sequence[BaseMessage],
    provider: Provider | Literal["all"] | Sequence[Provider] | None = None,
    *,
    finished: bool = True,
) -> None:
    """Fail with every problem found when `messages` would be rejected by a provider.

    Arguments as for `history_problems`: `assert_valid_history(messages)` checks the rules every
    provider shares and that the run finished on an answer; `provider="all"` checks OpenAI's,
    Anthropic's and Mistral's rules each, naming the provider and the rule in every problem.

    Raises:
        AssertionError: listing every problem.
        ValueError: an unknown provider name.
    """
    problems = history_problems(messages, provider, finished=finished)
    if problems:
        raise AssertionError("invalid message history:\n- " + "\n- ".join(problems))

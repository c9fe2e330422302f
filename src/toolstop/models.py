"""Any chat model by name (`PROVIDER:NAME`) through LangChain's `init_chat_model`."""

from __future__ import annotations

import os
from typing import Any

from toolstop.errors import ToolstopConfigError

__all__ = ["KEY_ENV", "LOCAL_KEY", "chat_model"]

KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "groq": "GROQ_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "mistralai": "MISTRAL_API_KEY",
    "google_genai": "GOOGLE_API_KEY",
}
"""The API key each provider needs from the environment. With a `base_url` the server decides:
a local OpenAI-compatible server (Ollama, vLLM) needs none, so a missing key is then replaced by
the placeholder `LOCAL_KEY` (the client insists on some key)."""

LOCAL_KEY = "not-needed"
"""The key sent to a `base_url` server when the provider's key variable is not set."""

_EXTRA = {"openai": "openai", "groq": "groq"}


def chat_model(
    spec: str, *, base_url: str | None = None, option: str = "--model", **kwargs: Any
) -> Any:
    """A chat model from `"provider:name"`, e.g. `groq:llama-3.3-70b-versatile`.

    Args:
        spec: `provider:name`, as `init_chat_model` takes it.
        base_url: An OpenAI-compatible server (Ollama, vLLM, a proxy) instead of the provider's;
            without the provider's key in the environment, `LOCAL_KEY` is sent.
        option: The command-line option the spec came from, named in the errors.
        **kwargs: Passed to `init_chat_model`.

    Raises:
        ToolstopConfigError: one sentence for a malformed spec, a missing API key, a missing
            provider package, or anything else that stops the client from being built.
    """
    provider, _, name = spec.partition(":")
    if not provider or not name:
        msg = f"{option} takes PROVIDER:NAME (e.g. groq:llama-3.3-70b-versatile), got {spec!r}"
        raise ToolstopConfigError(msg)
    env = KEY_ENV.get(provider)
    if env and not os.environ.get(env) and base_url is not None:
        kwargs.setdefault("api_key", LOCAL_KEY)  # the server at base_url decides if it needs one
    elif env and not os.environ.get(env):
        scripted = " for the scripted model" if option == "--model" else ""
        msg = f"{env} is not set; set it to use {spec}, or leave out {option}{scripted}"
        raise ToolstopConfigError(msg)
    try:
        from langchain.chat_models import init_chat_model
    except ImportError:
        msg = f"{option} needs langchain's init_chat_model: pip install 'toolstop[agents]'"
        raise ToolstopConfigError(msg) from None
    if base_url is not None:
        kwargs["base_url"] = base_url
    try:
        return init_chat_model(spec, **kwargs)
    except ImportError as error:
        extra = _EXTRA.get(provider)
        hint = f"pip install 'toolstop[{extra}]'" if extra else "install its LangChain package"
        msg = f"the {provider} provider package is missing ({error}); {hint}"
        raise ToolstopConfigError(msg) from None
    except Exception as error:
        msg = f"cannot create the model {spec}: {error}"
        raise ToolstopConfigError(msg) from None

"""A canary's arm from the feature flags a team already uses: an OpenFeature provider.

    from openfeature import api
    from toolstop import StopPolicy
    from toolstop.flags import OpenFeatureArm

    policy = StopPolicy(mode="hard", canary=OpenFeatureArm("toolstop-canary"))

The flag is evaluated once per new run of a thread (a resumed run keeps the arm its record
names), with the thread id as the targeting key and the run config's named values as
attributes, so a provider's rollout percentage, its targeting rules (a tenant, a plan) and its
kill switch decide the arm. Needs `openfeature-sdk` (`pip install "toolstop[flags]"`).

The flag answers, per thread:

- a string flag: `canary` or `shadow`; or a mode, `hard`, `polish` (the canary arm in that mode
  for the canaried tools) or `never` (the shadow arm);
- a boolean flag: `true` is the canary arm;
- an object flag: per-tool modes, `{"exchange_items": "hard"}` (the canary arm when any of them
  stops).

A provider that is down, a flag that is missing or an answer of another kind puts the thread in
the shadow arm: the model answers, as it would without toolstop (logged once).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from toolstop.errors import ToolstopConfigError
from toolstop.policy import ArmContext

__all__ = ["DEFAULT_ATTRIBUTES", "OpenFeatureArm"]

DEFAULT_ATTRIBUTES = ("user_id", "assistant_id", "graph_id", "langgraph_auth_user_id")
"""The config values sent as evaluation attributes by default: the ones LangGraph Server sets
in `configurable`. Name others (a tenant, a plan) with `attributes=`; nothing else is sent."""

_SCALARS = (str, int, float, bool)


class OpenFeatureArm:
    """Names a thread's canary arm (or its per-tool modes) from an OpenFeature flag.

    Pass it as `StopPolicy(canary=OpenFeatureArm(...))`.
    """

    def __init__(
        self,
        flag: str = "toolstop-canary",
        *,
        kind: Literal["string", "boolean", "object"] = "string",
        client: Any = None,
        attributes: Sequence[str] = DEFAULT_ATTRIBUTES,
    ) -> None:
        """Ask `flag` of an OpenFeature client.

        Args:
            flag: The flag's key.
            kind: The flag's type: `string` (an arm or a mode), `boolean` (canary or not) or
                `object` (per-tool modes).
            client: An OpenFeature client; `None`: `openfeature.api.get_client()` (the global
                provider, set with `api.set_provider(...)`), looked up at each evaluation.
            attributes: The `configurable` and `metadata` keys of the run config sent as
                evaluation attributes (scalar values only; nothing else is sent).

        Raises:
            ToolstopConfigError: `openfeature-sdk` is not installed, or `kind` is unknown.
        """
        try:
            from openfeature import api
            from openfeature.evaluation_context import EvaluationContext
        except ImportError as error:
            msg = 'OpenFeatureArm needs openfeature-sdk: pip install "toolstop[flags]"'
            raise ToolstopConfigError(msg) from error
        if kind not in ("string", "boolean", "object"):
            msg = f"OpenFeatureArm kind must be string, boolean or object, got {kind!r}"
            raise ToolstopConfigError(msg)
        if isinstance(attributes, str):
            msg = f"OpenFeatureArm attributes must be a sequence of keys, got {attributes!r}"
            raise ToolstopConfigError(msg)
        self.flag = flag
        self.kind = kind
        self.attributes = tuple(attributes)
        self._api = api
        self._context = EvaluationContext
        self._client = client

    def __repr__(self) -> str:
        return f"OpenFeatureArm({self.flag!r}, kind={self.kind!r})"

    def context(self, arm: ArmContext) -> Any:
        """The OpenFeature evaluation context of a thread: its key and the named config values."""
        values: dict[str, Any] = {}
        config = arm.config if isinstance(arm.config, Mapping) else {}
        for part in ("metadata", "configurable"):  # configurable wins, as in LangGraph
            given = config.get(part)
            if not isinstance(given, Mapping):
                continue
            for key in self.attributes:
                value = given.get(key)
                if isinstance(value, _SCALARS):
                    values[key] = value
        return self._context(targeting_key=arm.thread, attributes=values)

    def __call__(self, arm: ArmContext) -> Any:
        """The flag's answer for the thread (see the module's docs for what it may be)."""
        client = self._client if self._client is not None else self._api.get_client()
        context = self.context(arm)
        if self.kind == "boolean":
            return client.get_boolean_value(self.flag, False, context)
        if self.kind == "object":
            return client.get_object_value(self.flag, {}, context) or "shadow"
        return client.get_string_value(self.flag, "shadow", context)

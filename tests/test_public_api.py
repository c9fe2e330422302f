"""The public surface is explicit: `__all__` is pinned, every exception is exported."""

from __future__ import annotations

import inspect

import toolstop
import toolstop.examples
import toolstop.testing


def test_toolstop_all() -> None:
    assert sorted(toolstop.__all__) == sorted(
        [
            "CallSignal",
            "Decision",
            "InvalidSignal",
            "Mode",
            "OnBudget",
            "Outcome",
            "Parallel",
            "ParallelRule",
            "Problem",
            "ReactState",
            "Rule",
            "Savings",
            "SignalProblem",
            "StopMode",
            "StopOnArtifact",
            "StopOnArtifactState",
            "StopPolicy",
            "StopRecord",
            "StopRule",
            "ToolTimeoutError",
            "ToolstopConcurrentRunError",
            "ToolstopConfigError",
            "ToolstopError",
            "__version__",
            "build_react_graph",
            "convert",
            "decide",
            "forwarded_stop",
            "signal",
            "subagent_tool",
            "with_timeout",
        ]
    )
    for name in toolstop.__all__:
        assert hasattr(toolstop, name), name


def test_the_former_names_are_aliases_of_the_clearer_ones() -> None:
    assert toolstop.Rule is toolstop.StopRule
    assert toolstop.Problem is toolstop.SignalProblem
    assert toolstop.Mode == toolstop.StopMode
    assert toolstop.Parallel == toolstop.ParallelRule
    assert toolstop.Rule("fatal") is toolstop.StopRule.FATAL


def test_every_exception_is_exported() -> None:
    import toolstop.errors
    import toolstop.tools

    for module in (toolstop.errors, toolstop.tools):
        for name, value in vars(module).items():
            ours = inspect.isclass(value) and value.__module__ == module.__name__
            if ours and issubclass(value, Exception):
                assert name in toolstop.__all__, name
    assert issubclass(toolstop.ToolstopConfigError, ValueError)
    assert issubclass(toolstop.ToolstopConcurrentRunError, RuntimeError)
    assert "ScriptExhaustedError" in toolstop.testing.__all__
    assert "ScriptMismatchError" in toolstop.testing.__all__
    assert "UnknownCallError" in toolstop.testing.__all__


def test_testing_and_examples_all() -> None:
    assert sorted(toolstop.testing.__all__) == sorted(
        [
            "AgentCheck",
            "CheckResult",
            "ForcedResult",
            "ModelCall",
            "Replay",
            "Router",
            "Scenario",
            "ScriptExhaustedError",
            "ScriptMismatchError",
            "ScriptStep",
            "ScriptedChatModel",
            "UnknownCallError",
            "assert_valid_history",
            "available_routers",
            "call",
            "check",
            "check_agent",
            "example_args",
            "forced_tool",
            "history_problems",
            "replay",
            "run_agent",
            "run_scenario",
            "scenario_matrix",
            "stand_in",
            "turn",
        ]
    )
    assert sorted(toolstop.examples.__all__) == sorted(
        [
            "SEARCH_INDEX",
            "make_pay_tool",
            "make_poll_job_tool",
            "make_search_tool",
            "make_write_record_tool",
        ]
    )


def test_public_names_have_docstrings() -> None:
    for module in (toolstop, toolstop.testing, toolstop.examples):
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                assert inspect.getdoc(value), f"{module.__name__}.{name} has no docstring"


def test_every_public_name_of_every_module_has_a_docstring() -> None:
    import importlib
    import pkgutil

    missing = []
    for info in pkgutil.walk_packages(toolstop.__path__, "toolstop."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra is not installed here
            continue
        for name in getattr(module, "__all__", []):
            value = getattr(module, name)
            if (inspect.isclass(value) or inspect.isfunction(value)) and not inspect.getdoc(value):
                missing.append(f"{info.name}.{name}")
            # the members of LangGraph's classes (the ReactGraph alias) are LangGraph's to document
            if inspect.isclass(value) and value.__module__.startswith("toolstop"):
                for attribute, function in vars(value).items():
                    public = inspect.isfunction(function) and not attribute.startswith("_")
                    if public and not inspect.getdoc(function):
                        missing.append(f"{info.name}.{name}.{attribute}")
    assert missing == []


def test_extra_keys_cannot_replace_stop_or_reason() -> None:
    import pytest

    with pytest.raises(ValueError, match="the outcome is the reason"):
        toolstop.signal("transient", reason="completed")
    with pytest.raises(ValueError, match="the outcome is the reason"):
        toolstop.signal("completed", stop=False, reason="completed")
    assert toolstop.signal("completed", why="done") == {
        "stop": True,
        "reason": "completed",
        "why": "done",
    }


def test_a_policy_of_the_wrong_type_fails_when_the_router_is_built() -> None:
    import pytest

    from toolstop.legacy import create_react_agent
    from toolstop.testing import ScriptedChatModel

    model = ScriptedChatModel(["hi"])
    builders = {
        "build_react_graph": lambda p: toolstop.build_react_graph(model, [], policy=p),
        "create_react_agent": lambda p: create_react_agent(model, [], policy=p),
    }
    try:
        from toolstop.middleware import StopOnArtifact
    except ImportError:  # the legacy stack has no create_agent middleware
        pass
    else:
        builders["StopOnArtifact"] = StopOnArtifact
    for where, build in builders.items():
        expected = (
            f"{where}: policy must be a StopPolicy or None, got str 'hard'"
            " (did you mean StopPolicy(mode='hard')?)"
        )
        with pytest.raises(TypeError) as error:
            build("hard")
        assert str(error.value) == expected
        with pytest.raises(TypeError) as error:
            build({"mode": "hard"})
        assert str(error.value) == (
            f"{where}: policy must be a StopPolicy or None, got dict {{'mode': 'hard'}}"
        )
        with pytest.raises(TypeError) as error:
            build("fast")  # not a mode: no hint
        assert str(error.value).endswith("got str 'fast'")
        build(None)  # the default policy
        build(toolstop.StopPolicy(mode="polish"))

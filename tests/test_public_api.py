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
            "Outcome",
            "Parallel",
            "Problem",
            "ReactState",
            "Rule",
            "Savings",
            "StopOnArtifact",
            "StopOnArtifactState",
            "StopPolicy",
            "StopRecord",
            "ToolTimeoutError",
            "ToolstopConfigError",
            "ToolstopError",
            "__version__",
            "build_react_graph",
            "decide",
            "signal",
            "with_timeout",
        ]
    )
    for name in toolstop.__all__:
        assert hasattr(toolstop, name), name


def test_every_exception_is_exported() -> None:
    import toolstop.errors
    import toolstop.tools

    for module in (toolstop.errors, toolstop.tools):
        for name, value in vars(module).items():
            ours = inspect.isclass(value) and value.__module__ == module.__name__
            if ours and issubclass(value, Exception):
                assert name in toolstop.__all__, name
    assert issubclass(toolstop.ToolstopConfigError, ValueError)
    assert "ScriptExhaustedError" in toolstop.testing.__all__
    assert "ScriptMismatchError" in toolstop.testing.__all__


def test_testing_and_examples_all() -> None:
    assert sorted(toolstop.testing.__all__) == sorted(
        [
            "CheckResult",
            "ForcedResult",
            "ModelCall",
            "Router",
            "Scenario",
            "ScriptExhaustedError",
            "ScriptMismatchError",
            "ScriptStep",
            "ScriptedChatModel",
            "assert_valid_history",
            "available_routers",
            "call",
            "check",
            "forced_tool",
            "history_problems",
            "run_agent",
            "run_scenario",
            "scenario_matrix",
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
            if inspect.isclass(value):
                for attribute, function in vars(value).items():
                    public = inspect.isfunction(function) and not attribute.startswith("_")
                    if public and not inspect.getdoc(function):
                        missing.append(f"{info.name}.{name}.{attribute}")
    assert missing == []

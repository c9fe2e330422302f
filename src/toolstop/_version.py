"""The installed version of toolstop, read from the package metadata.

`pyproject.toml` is the one place the version is written; the package metadata an install
produces carries it, and `toolstop.__version__` reads it from there.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

UNKNOWN_VERSION = "0+unknown"
"""The version reported when toolstop runs without package metadata (a bare source tree)."""


def installed_version(distribution: str = "toolstop") -> str:
    """The version of `distribution` from its package metadata.

    Args:
        distribution: The distribution's name on the package index.

    Returns:
        The installed version, or `UNKNOWN_VERSION` when the distribution is not installed (a
        source tree put on `sys.path` by hand): a version string is never worth a crash.
    """
    try:
        return version(distribution)
    except PackageNotFoundError:
        return UNKNOWN_VERSION


__version__ = installed_version()

"""Test-wide guards: no test reaches the network unless it is marked `live`."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest


def _is_local(address: Any) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX socket paths
        return True
    host = address[0] if isinstance(address, tuple) and address else ""
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _no_network(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Refuse connections to anything but loopback (like pydantic-ai's ALLOW_MODEL_REQUESTS)."""
    if request.node.get_closest_marker("live"):
        yield
        return
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        if not _is_local(address):
            msg = f"test tried to reach {address!r}; mark it `live` to allow the network"
            raise RuntimeError(msg)
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield

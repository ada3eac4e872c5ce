"""The reliability suite's guards: every test here runs with SSH and Docker transports that fail the test.

Hostile input must be refused before anything reaches a host: ``paramiko.SSHClient.connect`` and the
docker SDK's ``APIClient.send`` are replaced by functions that record the call and raise, and each test
asserts afterwards that none was made (a caller swallowing the exception cannot hide it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import paramiko
import pytest

from clusterctl.paths import STATE_DIR_ENV


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of this directory ``reliability``."""
    for item in items:
        if "reliability" in item.path.parts:
            item.add_marker(pytest.mark.reliability)


@pytest.fixture(autouse=True)
def no_transports(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[str]]:
    """Fail any SSH connection or Docker API call the test makes; assert none was made at the end.

    The state directory (crash logs, cluster keys) is the test's own.
    """
    calls: list[str] = []
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))

    def refuse(name: str) -> Callable[..., None]:
        def stand_in(*args: object, **kwargs: object) -> None:
            calls.append(name)
            raise AssertionError(f"{name} called during a reliability test")

        return stand_in

    monkeypatch.setattr(paramiko.SSHClient, "connect", refuse("paramiko.SSHClient.connect"))
    monkeypatch.setattr(paramiko.Transport, "start_client", refuse("paramiko.Transport.start_client"))
    monkeypatch.setattr(docker.APIClient, "send", refuse("docker.APIClient.send"), raising=False)
    monkeypatch.setattr(docker.APIClient, "_retrieve_server_version", refuse("docker version"))
    yield calls
    assert calls == [], f"transports used: {calls}"

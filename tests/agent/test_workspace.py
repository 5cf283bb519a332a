"""The harness's Session is a Workspace: the Protocol names exactly what the agent uses."""

from __future__ import annotations

import inspect

import pytest

from agent.workspace import Workspace


def test_the_session_has_every_method_the_agent_uses():
    session = pytest.importorskip("gpu_workers.harness.session").Session
    wanted = [
        name
        for name, _ in inspect.getmembers(Workspace, inspect.isfunction)
        if not name.startswith("_")
    ]
    assert wanted == [
        "compile",
        "graph",
        "list_files",
        "profile",
        "read_file",
        "skill",
        "sources",
        "verify",
        "write_file",
    ]
    for name in wanted:
        expected = list(inspect.signature(getattr(Workspace, name)).parameters)
        assert list(inspect.signature(getattr(session, name)).parameters) == expected, name

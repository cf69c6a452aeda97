"""Fixtures that give tests a real OpenAI-compatible server on loopback.

Import both into `tests/conftest.py`. Tests script failures with
`model.script({...})` and read what was sent with `model.requests()`.
"""

import pytest

from storyapp.demomodel import DemoModelServer


@pytest.fixture(scope="session")
def model_server():
    """One server for the session: starting it costs a thread and a port."""
    server = DemoModelServer(port=0, chunk_delay=0).start()
    yield server
    server.stop()


@pytest.fixture
def model(model_server):
    """The session's server with an empty script and request log."""
    model_server.reset()
    yield model_server
    model_server.reset()

"""Fixtures that give tests a real OpenAI-compatible server on loopback.

Import both into `tests/conftest.py`. Tests script failures with
`model.script({...})` and read what was sent with `model.requests()`.
"""

import pytest

from demomodel import DemoModelServer

#: The window the test server's `/props` reports, as llama.cpp's does: larger
#: than the profiles' budgets, so it is verified without capping them.
SERVER_WINDOW = 32768


@pytest.fixture(scope="session")
def model_server():
    """One server for the session: starting it costs a thread and a port."""
    server = DemoModelServer(port=0, chunk_delay=0, n_ctx=SERVER_WINDOW).start()
    yield server
    server.stop()


@pytest.fixture
def model(model_server):
    """The session's server with an empty script and request log."""
    model_server.reset()
    model_server.n_ctx = SERVER_WINDOW
    yield model_server
    model_server.reset()

"""A scripted, OpenAI-compatible model server for demos and tests.

It lets the app run end to end with no real model, and lets the test suite
exercise the real `openai` client over a socket, failures included. It imports
nothing from Django so that it starts fast and runs on its own.
"""

from .narration import DISCLAIMER, REFUSAL, STATE_BLOCK
from .server import DemoModelServer

__all__ = ["DISCLAIMER", "REFUSAL", "STATE_BLOCK", "DemoModelServer"]

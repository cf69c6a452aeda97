"""Checks the browser tests share: axe-core's findings, horizontal overflow,
and the log-in form."""

import re
from pathlib import Path

from tests.factories import PASSWORD

AXE = Path(__file__).parent / "vendor" / "axe-4.14.1.min.js"


def axe_violations(page, *, impacts=("serious", "critical")) -> list[dict]:
    """axe-core's serious and critical findings on the page as it is now."""
    # Evaluated, not added as a <script>: the page's Content-Security-Policy
    # refuses inline scripts, and evaluation from the test is not the page's.
    page.evaluate(f"() => {{ {AXE.read_text()}\n }}")
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return [
        {"id": v["id"], "impact": v["impact"], "help": v["help"], "nodes": [n["target"] for n in v["nodes"]][:5]}
        for v in result["violations"] if v["impact"] in impacts
    ]


def horizontal_overflow(page) -> int:
    """How many CSS pixels the page is wider than its viewport (0 when it fits).

    Measured against the width asked for, not window.innerWidth: a mobile
    viewport zooms out to fit a page that overflows, and then innerWidth
    grows with it."""
    return page.evaluate("() => document.documentElement.scrollWidth") - page.viewport_size["width"]


def log_in(page, username: str, password: str = PASSWORD) -> None:
    """Through the log-in form, as a reader does."""
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name=re.compile("log in", re.I)).click()
    page.wait_for_url(re.compile(r"/campaigns/$"))

"""Checks the browser tests share: axe-core's findings and horizontal overflow."""

from pathlib import Path

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

"""Content-Security-Policy on every response.

Scripts and styles come from the app's own origin only, so markup that
slipped past escaping could neither run a script nor load one. The few
inline pieces the templates carry are allowed by their hash, read from the
template source once at start: a `<style>` block (the printable story) and
an inline event handler (the inspector's Close). Only blocks without template
tags count, since a hash is of fixed text. Style attributes stay allowed
(`style-src-attr`): the inspector's bars set their widths that way, and a
style attribute cannot run code. django-csp is not installable here; this is
the part of it the app needs.
"""

import base64
import hashlib
import html
import re
from functools import lru_cache
from pathlib import Path

from django.conf import settings

_STYLE_BLOCK = re.compile(r"<style>(.*?)</style>", re.DOTALL)
_EVENT_HANDLER = re.compile(r'\son[a-z]+="([^"]*)"')


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _fixed(text: str) -> bool:
    return "{{" not in text and "{%" not in text


def inline_hashes(template_dirs: list[Path]) -> tuple[list[str], list[str]]:
    """The hashes of the templates' fixed `<style>` blocks and inline event handlers."""
    styles, handlers = set(), set()
    for folder in template_dirs:
        for path in sorted(Path(folder).rglob("*.html")):
            source = path.read_text(encoding="utf-8")
            styles.update(_hash(block) for block in _STYLE_BLOCK.findall(source) if _fixed(block))
            handlers.update(_hash(html.unescape(code)) for code in _EVENT_HANDLER.findall(source) if _fixed(code))
    return sorted(styles), sorted(handlers)


@lru_cache(maxsize=1)
def content_security_policy() -> str:
    styles, handlers = inline_hashes([Path(d) for t in settings.TEMPLATES for d in t.get("DIRS", [])])
    handler_sources = " ".join(["'unsafe-hashes'", *handlers]) if handlers else "'none'"
    return "; ".join([
        "default-src 'self'",
        "script-src 'self'",
        f"script-src-attr {handler_sources}",
        " ".join(["style-src 'self'", *styles]),
        "style-src-attr 'unsafe-inline'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ])


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", content_security_policy())
        return response

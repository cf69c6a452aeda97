"""Plays Loremaster over HTTP as a reader would, checking every response.

Used by the smoke checks in `.ci/smoke/`: after an install from nothing but
its own instructions, a reader logs in, (as the admin) adds a model endpoint,
creates a campaign, imports a lore file and waits for a worker to index it,
plays turns, follows each narration's stream to its end, and opens the
turn's context inspector. Only the standard library and httpx, which
requirements.txt carries, so it runs in the production install itself.

`--behind-tls-proxy` speaks as a TLS-terminating proxy would (the hosted
shape: `HTTPS=true`, uvicorn's `--proxy-headers`): it sends
`X-Forwarded-Proto: https` and keeps the secure cookies on plain loopback.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from html.parser import HTMLParser

import httpx

LORE = b"""# The Drowned Lantern

The drowned lantern hangs in the chapel of the tide-priests. Its glass is
green with brine, and it burns without oil whenever a ship is lost at sea.

## Who keeps it

Sister Orrin, the lantern-warden, trims a wick that is never consumed.
"""


class Failed(Exception):
    pass


class FormFields(HTMLParser):
    """The values a browser would submit for the first form holding `field`."""

    def __init__(self, field: str):
        super().__init__()
        self.field, self.forms, self.current, self.select, self.textarea = field, [], None, None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.current = {}
        elif self.current is None:
            return
        elif tag == "input" and attrs.get("name"):
            kind = attrs.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in attrs:
                    self.current[attrs["name"]] = attrs.get("value", "on")
            elif kind not in ("submit", "button", "file", "password"):
                self.current[attrs["name"]] = attrs.get("value", "")
        elif tag == "select" and attrs.get("name"):
            self.select = attrs["name"]
            self.current.setdefault(self.select, "")
        elif tag == "option" and self.select and ("selected" in attrs or not self.current[self.select]):
            self.current[self.select] = attrs.get("value", "")
        elif tag == "textarea" and attrs.get("name"):
            self.textarea = attrs["name"]
            self.current[self.textarea] = ""

    def handle_data(self, data):
        if self.current is not None and self.textarea:
            self.current[self.textarea] += data

    def handle_endtag(self, tag):
        if tag == "select":
            self.select = None
        elif tag == "textarea":
            self.textarea = None
        elif tag == "form" and self.current is not None:
            self.forms.append(self.current)
            self.current = None

    @classmethod
    def of(cls, html: str, field: str) -> dict[str, str]:
        parser = cls(field)
        parser.feed(html)
        for form in parser.forms:
            if field in form:
                return form
        raise Failed(f"no form with a {field!r} field on the page")


class Reader:
    def __init__(self, base: str, *, behind_tls_proxy: bool):
        self.base = base.rstrip("/")
        self.behind_tls_proxy = behind_tls_proxy
        origin = self.base.replace("http://", "https://") if behind_tls_proxy else self.base
        headers = {"Origin": origin, "Referer": origin + "/"}
        if behind_tls_proxy:
            headers["X-Forwarded-Proto"] = "https"
        self.client = httpx.Client(base_url=self.base, headers=headers, timeout=60)

    def request(self, method: str, path: str, *, expect: int | tuple[int, ...] = 200, **kwargs) -> httpx.Response:
        response = self.client.request(method, path, **kwargs)
        if self.behind_tls_proxy:
            # The proxy would carry these over TLS; on loopback the jar must be told to send them.
            for cookie in self.client.cookies.jar:
                cookie.secure = False
        expected = (expect,) if isinstance(expect, int) else expect
        print(f"  {method:4} {path} -> {response.status_code}", flush=True)
        if response.status_code not in expected:
            raise Failed(f"{method} {path} answered {response.status_code}, expected {expected}:\n{response.text[:3000]}")
        return response

    def csrf(self) -> str:
        return self.client.cookies["csrftoken"]

    def post_form(self, path: str, data: dict, *, expect=302, **kwargs) -> httpx.Response:
        return self.request("POST", path, data={**data, "csrfmiddlewaretoken": self.csrf()}, expect=expect, **kwargs)

    def log_in(self, username: str, password: str) -> None:
        self.request("GET", "/accounts/login/")
        response = self.post_form("/accounts/login/", {"username": username, "password": password})
        if "/accounts/login/" in response.headers.get("location", ""):
            raise Failed("the login was refused")
        self.request("GET", "/campaigns/")

    def add_endpoint(self, model_url: str) -> None:
        """Through the admin, as an operator would: every field as the form offers it, but these."""
        page = self.request("GET", "/admin/endpoints/endpointprofile/add/").text
        fields = FormFields.of(page, "base_url")
        fields.update(name="Smoke model", base_url=model_url, chat_model="demo-narrator",
                      embedding_model="demo-embed", is_default="on")
        fields.pop("csrfmiddlewaretoken", None)
        fields.pop("_addanother", None)
        fields.pop("_continue", None)
        self.post_form("/admin/endpoints/endpointprofile/add/", fields)

    def create_campaign(self) -> int:
        page = self.request("GET", "/campaigns/new/").text
        fields = FormFields.of(page, "title")
        fields.update(title="Smoke: the drowned lantern", persona_name="Ysolde",
                      plot_essentials="Ysolde seeks the drowned lantern of the tide-priests.")
        fields.pop("csrfmiddlewaretoken", None)
        response = self.post_form("/campaigns/new/", fields)
        match = re.search(r"/campaigns/(\d+)/", response.headers["location"])
        if not match:
            raise Failed(f"no campaign in the redirect to {response.headers['location']}")
        return int(match.group(1))

    def import_lore(self, campaign: int, *, timeout: float) -> None:
        library = f"/campaigns/{campaign}/library/"
        self.request("GET", library)
        self.post_form(f"{library}upload/", {"classification": "reference", "visibility": "visible"},
                       files={"files": ("drowned-lantern.md", LORE, "text/markdown")})
        deadline = time.monotonic() + timeout
        while True:
            page = self.request("GET", library).text
            states = re.findall(r'class="source-state state-(\w+)"', page)
            if states and all(state == "ready" for state in states):
                return
            if "failed" in states:
                raise Failed(f"indexing failed:\n{page[:3000]}")
            if time.monotonic() > deadline:
                raise Failed(f"the lore was not indexed within {timeout:.0f} s (states: {states})")
            time.sleep(0.5)

    def play_turn(self, campaign: int, text: str, *, timeout: float) -> int:
        play = f"/campaigns/{campaign}/"
        self.request("GET", play)
        story = self.post_form(f"{play}turn/", {"text": text}, expect=200, headers={"HX-Request": "true"}).text
        match = re.search(rf'sse-connect="(/campaigns/{campaign}/actions/(\d+)/stream/)', story)
        if not match:
            raise Failed(f"the turn started no narration:\n{story[:3000]}")
        stream, action = match.group(1), int(match.group(2))
        chunks = self.follow(stream, timeout=timeout)
        if not chunks.strip():
            raise Failed("the narration streamed no text")
        print(f"    narration #{action}: {len(chunks)} characters streamed", flush=True)
        page = self.request("GET", play).text
        article = re.search(rf'<article class="action ai status-(\w+)" id="action-{action}"', page)
        if not article or article.group(1) != "done":
            raise Failed(f"narration #{action} is not done on the play page: {article and article.group(1)}")
        inspector = self.request("GET", f"{play}actions/{action}/context/").text
        if "drowned lantern" not in inspector.lower():
            raise Failed("the inspector does not show the prompt the narrator was sent")
        return action

    def follow(self, path: str, *, timeout: float) -> str:
        text, event = [], None
        with self.client.stream("GET", path, timeout=timeout) as response:
            print(f"  GET  {path} -> {response.status_code} (stream)", flush=True)
            if response.status_code != 200:
                raise Failed(f"the stream answered {response.status_code}")
            for line in response.iter_lines():
                if line.startswith("event: "):
                    event = line[len("event: "):]
                elif line.startswith("data: ") and event == "chunk":
                    text.append(line[len("data: "):])
                elif line.startswith("data:") and event == "done":
                    return "\n".join(text)
        raise Failed("the stream ended before its done event")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the web process, e.g. http://127.0.0.1:8000")
    parser.add_argument("--username", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--campaign", type=int, help="play this campaign instead of creating one")
    parser.add_argument("--model-url", help="add this endpoint through the admin first (needs a staff login)")
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--behind-tls-proxy", action="store_true")
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()

    reader = Reader(args.base, behind_tls_proxy=args.behind_tls_proxy)
    try:
        reader.log_in(args.username, args.password)
        reader.request("GET", "/static/css/app.css")
        reader.request("GET", "/static/vendor/htmx-2.0.11.min.js")
        if args.model_url:
            reader.add_endpoint(args.model_url)
        campaign = args.campaign or reader.create_campaign()
        reader.import_lore(campaign, timeout=args.timeout)
        for number in range(args.turns):
            reader.play_turn(campaign, f"I ask about the drowned lantern, turn {number + 1}.", timeout=args.timeout)
        reader.request("GET", "/ops/jobs/")
    except (Failed, httpx.HTTPError) as exc:
        print(f"SMOKE FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"  played {args.turns} turns on campaign #{campaign}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

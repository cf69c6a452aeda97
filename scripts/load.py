"""Load: N readers play Loremaster at once, over HTTP, against the real hosted processes (issue 13).

Started by `bin/load`. `scripts.procs.Stack` brings up the Procfile's web,
worker and narrator on a fresh PostgreSQL database and a Redis db of their
own, with the scripted model server on loopback. Then:

1. Setup, through the ORM (`manage.py shell`): an endpoint profile at the
   model server and, per reader, an account and a campaign bound to it. Only
   the setup bypasses HTTP; everything measured goes through the web process.
2. Every reader (a thread with its own httpx client and cookies) logs in,
   a few at a time and a moment apart, as a real group would, and again
   after a 503 (scripts.procs.LoginPacer). The log-ins finish before the
   clock starts: each costs a deliberately slow password hash (Django's
   PBKDF2), and N of them in the same second would measure the hasher, not
   the pages (bin/faults' login burst measures that). Their times are
   printed all the same.
3. Until `--seconds` are up, each reader loops as a browser would: the
   campaign list, the play page, the context inspector of its latest turn,
   the library, a turn posted as the play page's form posts it (htmx, with
   CSRF), the narration's event stream followed to its `done`, then the
   story partial the page fetches on `done`; every `--upload-every` turns it
   uploads a small Markdown lore file through the library's form. A reader
   pauses `--think` seconds (1) after each page it reads, far less than a
   person reads a narration; `--think 0` makes every reader wait on the
   server all the time, a stress load that saturates two cores with 20.
   A reader submits one turn at a time, so the app's cap of narrations per reader is
   never reached by design; a refusal by a deliberate limit (a 429, or that
   cap) is counted apart from the errors.
4. It prints the request rate, per page p50/p95/p99 (pages: to the full
   response; streams: to the first event, the first chunk and `done`), the
   errors (a 5xx, an unexpected status, a connection error or a timeout, a
   turn refused for another reason, a stream without `done`), the peak of
   PostgreSQL connections to the database (sampled every 0.5 s), the
   sessions opened, the Redis db, and where the CPU went (each process of
   the stack, PostgreSQL, everything else): on a small machine the page
   times are mostly the wait for a core, so they are read beside it.
5. It checks the database: every turn a reader had accepted (each text
   carries a unique marker) is exactly one player action, with exactly one
   narration under it, done and not empty; no turn that was refused was
   stored; nothing is still narrating.

Bounded: no reader starts a new round after `--seconds`, the whole load
stops at `--seconds` + `--grace` whatever is still open, requests stop at
`--max-requests`, and an alarm ends the script (cleaning up) if even the
setup hangs. Exit status 1 on any error, a failed check, or a play page p95
at or over `--p95-ms`.

`--profile shared-play` runs scripts.sharedplay instead, on the same stack:
groups of members playing one story each, their pages' event streams open.
"""

from __future__ import annotations

import argparse
import math
import re
import secrets
import signal
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import httpx

from scripts.procs import BUSY_STATUSES, LoginPacer, Stack, StackError, exit_on_sigterm, machine_cpu, say

#: The pages whose figures are printed, in this order.
PAGES = ("login page", "login", "campaign list", "play", "inspector", "library", "turn submit",
         "stream: first event", "stream: first chunk", "stream: done", "play (story partial)", "upload")
TARGET_PAGE = "play"
#: How the app words the per-reader narration cap (storyapp.services.refuse_over_reader_cap).
READER_CAP_WORDS = "being written in your other stories"
PAGE_TIMEOUT = httpx.Timeout(30, connect=5)
#: The stream sends a keep-alive every 15 s of silence, so 30 s without a byte is a dead stream.
STREAM_TIMEOUT = httpx.Timeout(30, connect=5)
#: Seconds the setup (database, migrations, processes, accounts) may take before the alarm.
SETUP_BUDGET = 600
#: Seconds every reader has to log in, a few at a time (procs.LoginPacer), before the clock starts.
LOGIN_BUDGET = 300

SETUP = """
import json, os
from django.contrib.auth import get_user_model
from storyapp import demo
from endpoints.models import EndpointProfile

spec = json.load(open(os.environ["STACK_INPUT"]))
profile = EndpointProfile.objects.create(
    name="Load: scripted demo", base_url=spec["model_url"], chat_model="demo-narrator",
    embedding_model="demo-embed", is_scripted_demo=True, is_default=True,
)
readers = []
for number in range(spec["readers"]):
    username = f"load-reader-{number:02d}"
    get_user_model().objects.create_user(username=username, password=spec["password"])
    campaign = demo.ensure_campaign(username)
    campaign.endpoint = profile
    campaign.title = f"The Salt Road ({username})"
    campaign.save()
    readers.append({"username": username, "campaign": campaign.pk})
print(json.dumps({"profile": profile.pk, "readers": readers}))
"""

CHECK = """
import json, os
from django.db.models import Count
from knowledge.models import KnowledgeSource
from storyapp.models import Action

spec = json.load(open(os.environ["STACK_INPUT"]))
problems = []
for campaign, text in spec["turns"]:
    players = list(Action.objects.filter(campaign_id=campaign, kind="player", text=text).values_list("pk", flat=True))
    if len(players) != 1:
        problems.append(f"campaign {campaign}: {len(players)} player actions for {text!r}")
        continue
    narrations = list(Action.objects.filter(parent_id=players[0], kind="ai").values_list("status", "text"))
    if len(narrations) != 1 or narrations[0][0] != "done" or not narrations[0][1].strip():
        shown = [(status, len(text)) for status, text in narrations]
        problems.append(f"campaign {campaign}: action #{players[0]} has narrations (status, length) {shown}")
for campaign, text in spec["refused"]:
    if Action.objects.filter(campaign_id=campaign, text=text).exists():
        problems.append(f"campaign {campaign}: a refused turn was stored: {text!r}")
campaigns = spec["campaigns"]
players = Action.objects.filter(campaign_id__in=campaigns, kind="player").count()
in_flight = Action.objects.filter(campaign_id__in=campaigns, status__in=["pending", "streaming"]).count()
by_status = dict(Action.objects.filter(campaign_id__in=campaigns, kind="ai").values_list("status").annotate(n=Count("id")))
sources = dict(KnowledgeSource.objects.filter(campaign_id__in=campaigns).values_list("index_state").annotate(n=Count("id")))
print(json.dumps({"problems": problems, "players": players, "in_flight": in_flight, "narrations": by_status,
                  "sources": sources}))
"""


class Failed(Exception):
    """This round of a reader went wrong; the error is already recorded."""


class Limited(Exception):
    """A deliberate limit refused the request; already counted."""


class Capped(Exception):
    """The request cap is reached: the reader stops."""


@dataclass
class Recorder:
    """Everything the readers measure, shared between their threads."""

    max_requests: int
    samples: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: list[tuple[str, str]] = field(default_factory=list)
    limited: list[tuple[str, str]] = field(default_factory=list)
    turns: list[tuple[int, str]] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)
    uploads: int = 0
    requests: int = 0
    measured_requests: int = 0
    measuring: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take_request(self) -> None:
        with self.lock:
            if self.requests >= self.max_requests:
                raise Capped
            self.requests += 1
            if self.measuring:
                self.measured_requests += 1

    def sample(self, page: str, ms: float) -> None:
        with self.lock:
            self.samples[page].append(ms)

    def error(self, page: str, what: str) -> None:
        with self.lock:
            self.errors.append((page, what))

    def limit(self, page: str, what: str) -> None:
        with self.lock:
            self.limited.append((page, what))


def percentile(ordered: list[float], p: float) -> float:
    """Nearest rank: the smallest sample with at least p% of the samples at or below it."""
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


LORE = """# {title}

{title} is a tide-bell that hangs in the customs house at Westhaven, marked {marker}.
It rings on its own whenever a smuggler's boat slips past the harbour chain at night.

## Who keeps it

Warden Tamsin Hale oils its clapper every dawn and writes each ringing in a salt-stained ledger.
The ledger says the bell rang three times on the night the seal of House Venn was broken.
"""


class Reader:
    """One reader: a browser's requests, in a thread of its own."""

    def __init__(self, number: int, *, username: str, password: str, campaign: int, stack: Stack,
                 recorder: Recorder, run: str, upload_every: int, think: float):
        self.number = number
        self.username = username
        self.password = password
        self.campaign = campaign
        self.recorder = recorder
        self.run = run
        self.upload_every = upload_every
        self.think = think
        self.https = stack.https
        self.turn = 0
        self.client = httpx.Client(
            base_url=stack.base_url, timeout=PAGE_TIMEOUT, follow_redirects=False,
            headers={"Origin": stack.origin, "Referer": stack.origin + "/", **stack.proxy_headers()},
        )

    # ------------------------------------------------------------ HTTP

    def call(self, page: str, method: str, path: str, *, expect: tuple[int, ...] = (200,), **kwargs) -> httpx.Response:
        self.recorder.take_request()
        started = time.perf_counter()
        try:
            response = self.client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            self.recorder.error(page, f"{method} {path}: {type(exc).__name__}: {exc}")
            raise Failed from exc
        elapsed = (time.perf_counter() - started) * 1000
        self._plain_cookies()
        if response.status_code == 429:
            self.recorder.limit(page, f"{method} {path} -> 429")
            raise Limited
        if response.status_code not in expect:
            self.recorder.error(page, f"{method} {path} -> {response.status_code}: {_snippet(response.text)}")
            raise Failed
        self.recorder.sample(page, elapsed)
        return response

    def _plain_cookies(self) -> None:
        """The proxy would carry the secure cookies over TLS; on plain loopback the jar must be told to send them."""
        if self.https:
            for cookie in self.client.cookies.jar:
                cookie.secure = False

    def csrf(self) -> str:
        return self.client.cookies["csrftoken"]

    # ------------------------------------------------------------ the reader's rounds

    def log_in(self) -> bool:
        """One attempt: True when logged in, False when the site said it was
        busy (for the pacer to try again); Failed when refused."""
        page = self.call("login page", "GET", "/accounts/login/", expect=(200, *BUSY_STATUSES))
        if page.status_code in BUSY_STATUSES:
            return False
        response = self.call("login", "POST", "/accounts/login/", expect=(302, *BUSY_STATUSES), data={
            "username": self.username, "password": self.password, "csrfmiddlewaretoken": self.csrf()})
        if response.status_code in BUSY_STATUSES:
            return False
        if "/accounts/login/" in response.headers.get("location", ""):
            self.recorder.error("login", f"{self.username} was refused")
            raise Failed
        return True

    def pause(self) -> None:
        """The reader reading, before they click or type again (`--think`).
        Never between a turn, its stream and the story that follows: the
        page's JavaScript makes those at once."""
        if self.think:
            time.sleep(self.think)

    def round(self) -> None:
        play = f"/campaigns/{self.campaign}/"
        self.call("campaign list", "GET", "/campaigns/")
        self.pause()
        page = self.call("play", "GET", play).text
        self.pause()
        inspectable = [int(n) for n in re.findall(rf'href="{play}actions/(\d+)/context/"', page)]
        if inspectable:
            self.call("inspector", "GET", f"{play}actions/{max(inspectable)}/context/")
            self.pause()
        self.call("library", "GET", f"{play}library/")
        self.pause()
        self.turn += 1
        stream, action = self.submit_turn(play)
        self.follow(stream)
        story = self.call("play (story partial)", "GET", play, headers={"HX-Request": "true"}).text
        article = re.search(rf'<article class="action ai status-(\w+)" id="action-{action}"', story)
        if not article or article.group(1) != "done":
            self.recorder.error("play (story partial)", f"narration #{action} is "
                                f"{article.group(1) if article else 'missing'} after its stream's done")
            raise Failed
        self.pause()
        if self.upload_every and self.turn % self.upload_every == 0:
            self.upload(play)
            self.pause()

    def submit_turn(self, play: str) -> tuple[str, int]:
        marker = f"load {self.run} reader {self.number:02d} turn {self.turn:04d}"
        text = f"I ask the harbourmaster about the tide-bell. [{marker}]"
        response = self.call("turn submit", "POST", f"{play}turn/", headers={"HX-Request": "true"},
                             data={"text": text, "csrfmiddlewaretoken": self.csrf()})
        if "turn-accepted" not in response.headers.get("HX-Trigger", ""):
            refusal = re.search(r'<p class="error" role="alert">(.*?)</p>', response.text, re.DOTALL)
            reason = refusal.group(1).strip() if refusal else _snippet(response.text)
            with self.recorder.lock:
                self.recorder.refused.append((self.campaign, text))
            if READER_CAP_WORDS in reason:
                self.recorder.limit("turn submit", reason)
                raise Limited
            self.recorder.error("turn submit", f"refused: {reason}")
            raise Failed
        with self.recorder.lock:
            self.recorder.turns.append((self.campaign, text))
        match = re.search(rf'sse-connect="({play}actions/(\d+)/stream/[^"]*)"', response.text)
        if not match:
            self.recorder.error("turn submit", f"no narration stream in the story: {_snippet(response.text)}")
            raise Failed
        return match.group(1).replace("&amp;", "&"), int(match.group(2))

    def follow(self, path: str) -> None:
        """The stream as htmx's SSE extension reads it, to its `done` event."""
        self.recorder.take_request()
        started = time.perf_counter()
        first_event = first_chunk = None
        done = False
        try:
            with self.client.stream("GET", path, timeout=STREAM_TIMEOUT) as response:
                if response.status_code != 200:
                    self.recorder.error("stream: done", f"GET {path} -> {response.status_code}")
                    raise Failed
                event = None
                for line in response.iter_lines():
                    now = time.perf_counter()
                    if line.startswith("event: "):
                        event = line[len("event: "):]
                        first_event = first_event or now
                    elif line.startswith("data:") and event == "chunk":
                        first_chunk = first_chunk or now
                    elif line.startswith("data:") and event == "done":
                        done = True
        except httpx.HTTPError as exc:
            self.recorder.error("stream: done", f"GET {path}: {type(exc).__name__}: {exc}")
            raise Failed from exc
        finished = time.perf_counter()
        if not done:
            self.recorder.error("stream: done", f"GET {path} ended without its done event")
            raise Failed
        if first_chunk is None:
            self.recorder.error("stream: first chunk", f"GET {path} streamed no text")
            raise Failed
        for page, moment in (("stream: first event", first_event), ("stream: first chunk", first_chunk),
                             ("stream: done", finished)):
            self.recorder.sample(page, (moment - started) * 1000)

    def upload(self, play: str) -> None:
        marker = f"{self.run}-r{self.number:02d}-t{self.turn:04d}"
        body = LORE.format(title=f"The tide-bell {marker}", marker=marker).encode()
        response = self.call("upload", "POST", f"{play}library/upload/", headers={"HX-Request": "true"},
                             data={"classification": "reference", "visibility": "visible",
                                   "csrfmiddlewaretoken": self.csrf()},
                             files={"files": (f"tide-bell-{marker}.md", body, "text/markdown")})
        if 'class="ok-note">Imported 1 file' not in response.text:
            problems = re.findall(r'<li class="error">(.*?)</li>', response.text, re.DOTALL)
            self.recorder.error("upload", f"not imported: {problems or _snippet(response.text)}")
            raise Failed
        with self.recorder.lock:
            self.recorder.uploads += 1

    def play(self, *, start: threading.Barrier, clock: dict, pacer: LoginPacer) -> None:
        """Logs in (at the pacer's pace), waits for every reader, then plays rounds until the time is up."""
        try:
            logged_in = pacer.log_in(self.log_in)
            if not logged_in:
                self.recorder.error("login", f"{self.username}: still busy after {pacer.attempts} attempts")
        except (Failed, Limited, Capped):
            logged_in = False
        try:
            start.wait()
        except threading.BrokenBarrierError:
            self.recorder.error("login", f"{self.username}: the other readers did not all log in")
            return
        while logged_in and time.monotonic() < clock["end"]:
            try:
                self.round()
            except Capped:
                return
            except (Failed, Limited):
                time.sleep(1)  # one bad round must not become a tight loop of them
            except Exception as exc:  # noqa: BLE001 - a reader that dies is an error of the run, not a silent stop
                self.recorder.error("reader", f"{self.username} stopped: {type(exc).__name__}: {exc}")
                return
        self.client.close()


def _snippet(text: str) -> str:
    return re.sub(r"\s+", " ", text)[:300]


# ---------------------------------------------------------------- the run


def setup(stack: Stack, readers: int) -> tuple[str, list[dict]]:
    password = secrets.token_urlsafe(16)
    made = stack.shell(SETUP, {"readers": readers, "password": password, "model_url": stack.model_url})
    stack.manage("calibrate_embeddings", "--model", "demo-embed", "--endpoint", str(made["profile"]))
    say(f"made {readers} readers, each with a campaign on endpoint profile #{made['profile']}")
    return password, made["readers"]


def run_load(stack: Stack, args) -> int:
    password, accounts = setup(stack, args.readers)
    recorder = Recorder(max_requests=args.max_requests)
    run = secrets.token_hex(3)
    readers = [Reader(n, username=a["username"], password=password, campaign=a["campaign"], stack=stack,
                      recorder=recorder, run=run, upload_every=args.upload_every, think=args.think)
               for n, a in enumerate(accounts)]
    say(f"{len(readers)} readers log in, then play for {args.seconds:g} s")
    try:
        return _play(stack, args, recorder, readers, accounts)
    finally:
        for reader in readers:
            reader.client.close()  # on the way out early too, so the web process is not kept waiting


def _play(stack: Stack, args, recorder: Recorder, readers: list[Reader], accounts: list[dict]) -> int:
    clock = {"end": math.inf}
    usage = {}

    def release() -> None:
        """Runs once, when the last reader has logged in: the clock starts."""
        usage["before"] = cpu_usage(stack)
        clock["start"] = time.monotonic()
        clock["end"] = clock["start"] + args.seconds
        recorder.measuring = True

    start = threading.Barrier(len(readers), action=release, timeout=LOGIN_BUDGET)
    pacer = LoginPacer()
    usage["pacer"] = pacer
    threads = [threading.Thread(target=r.play, kwargs={"start": start, "clock": clock, "pacer": pacer},
                                name=r.username, daemon=True)
               for r in readers]
    with stack.sampler(every=0.5) as sampler:
        for thread in threads:
            thread.start()
        # The log-ins are bounded by the barrier's timeout, the rounds by the hard limit.
        while "start" not in clock and any(thread.is_alive() for thread in threads):
            time.sleep(0.1)
        for thread in threads:
            thread.join(timeout=max(0.0, clock["end"] + args.grace - time.monotonic()))
        finished = time.monotonic()
        usage["after"] = cpu_usage(stack)
        stuck = [thread.name for thread in threads if thread.is_alive()]
    for name in stuck:
        recorder.error("hard limit", f"{name} was still busy {args.grace:g} s after the end")
    for reader in readers:
        if reader.username in stuck:
            reader.client.close()  # unblocks its thread; a daemon, it does not hold the exit either way
    elapsed = finished - clock.get("start", finished)
    checked = stack.shell(CHECK, {"turns": recorder.turns, "refused": recorder.refused,
                                  "campaigns": [a["campaign"] for a in accounts]})
    return report(stack, args, recorder, sampler, elapsed, checked, usage)


def cpu_usage(stack: Stack) -> dict:
    """The counters whose differences say where the machine's CPU went."""
    busy, total = machine_cpu()
    return {"machine busy": busy, "machine": total, "processes": stack.cpu_seconds(),
            "load generator": time.process_time(), "postgres": stack.postgres_cpu_seconds(),
            "sessions": stack.sessions_opened()}


def print_cpu(before: dict, after: dict, elapsed: float) -> None:
    """Where the CPU went while the readers played: on a small machine the
    page times are mostly the wait for a core, so they are read beside this."""
    total = after["machine"] - before["machine"]
    busy = after["machine busy"] - before["machine busy"]
    ours = {name: after["processes"][name] - before["processes"].get(name, 0.0) for name in after["processes"]}
    ours["this load generator"] = after["load generator"] - before["load generator"]
    if after["postgres"] is not None and before["postgres"] is not None:
        ours["PostgreSQL (all databases)"] = after["postgres"] - before["postgres"]
    rest = busy - sum(ours.values())
    cores = total / elapsed if elapsed else 0
    print(f"CPU over the {elapsed:.1f} s ({cores:.1f} cores, {total:.0f} core-s): busy {busy:.0f} core-s "
          f"({busy / total * 100 if total else 0:.0f}%): "
          + ", ".join(f"{name} {seconds:.1f}" for name, seconds in ours.items())
          + f", everything else (Redis, other programs) {rest:.1f}")
    sessions = after["sessions"][0] - before["sessions"][0]
    everywhere = after["sessions"][1] - before["sessions"][1]
    print(f"PostgreSQL sessions opened: {sessions} ({sessions / elapsed if elapsed else 0:.0f}/s); "
          f"{everywhere} on the whole server")


def report(stack: Stack, args, recorder: Recorder, sampler, elapsed: float, checked: dict, usage: dict) -> int:
    failures = []
    rate = recorder.measured_requests / elapsed if elapsed > 0 else 0.0
    print(flush=True)
    print(f"Loremaster load: {args.readers} readers for {args.seconds:.0f} s "
          f"(measured {elapsed:.1f} s, grace {args.grace:g} s, upload every {args.upload_every} turns, "
          f"think {args.think:g} s)")
    pacer = usage.get("pacer")
    print(f"requests: {recorder.measured_requests} in {elapsed:.1f} s = {rate:.1f} req/s "
          f"(+{recorder.requests - recorder.measured_requests} to log in, a few at a time"
          f"{f', {pacer.retries} tried again after a busy answer' if pacer else ''}); "
          f"errors {len(recorder.errors)}; refused by a deliberate limit {len(recorder.limited)}")
    print(f"{'page':<22} {'count':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for page in PAGES:
        ordered = sorted(recorder.samples.get(page, []))
        if not ordered:
            print(f"{page:<22} {0:>6}")
            continue
        print(f"{page:<22} {len(ordered):>6} {percentile(ordered, 50):>8.0f} {percentile(ordered, 95):>8.0f} "
              f"{percentile(ordered, 99):>8.0f} {ordered[-1]:>8.0f}")
    print(f"turns: {len(recorder.turns)} accepted, {len(recorder.refused)} refused; uploads: {recorder.uploads}")
    print(f"PostgreSQL connections to {stack.database}: peak {sampler.peak}, mean {sampler.mean:.1f} "
          f"over {len(sampler.samples)} samples every 0.5 s (max_connections {stack.max_connections()})"
          + (f"; {sampler.failures} samples failed" if sampler.failures else ""))
    print(f"Redis: {stack.redis_url}")
    if "before" in usage:
        print_cpu(usage["before"], usage["after"], elapsed)
    if recorder.errors:
        failures.append(f"{len(recorder.errors)} errors")
        print("errors by page: " + ", ".join(f"{page} {count}" for page, count in
                                             Counter(page for page, _ in recorder.errors).most_common()))
        for page, what in recorder.errors[:20]:
            print(f"  {page}: {what}")
    if recorder.limited:
        print("refused by a deliberate limit (the first 5):")
        for page, what in recorder.limited[:5]:
            print(f"  {page}: {what}")
    print(f"database: {checked['players']} player actions stored for {len(recorder.turns)} accepted turns; "
          f"narrations by status {checked['narrations']}; still in flight {checked['in_flight']}; "
          f"lore sources by state {checked['sources']}")
    if checked["problems"]:
        failures.append(f"{len(checked['problems'])} turns not stored exactly once")
        for problem in checked["problems"][:20]:
            print(f"  {problem}")
    if checked["players"] != len(recorder.turns):
        failures.append(f"{checked['players']} player actions stored for {len(recorder.turns)} turns")
    if checked["in_flight"]:
        failures.append(f"{checked['in_flight']} narrations still in flight")
    if checked["sources"].get("failed"):
        failures.append(f"{checked['sources']['failed']} lore sources failed to index")
    print(f"every accepted turn is one player action with one done narration: "
          f"{'OK' if not checked['problems'] else 'NO'}")
    target = sorted(recorder.samples.get(TARGET_PAGE, []))
    if not target:
        failures.append("the play page was never measured")
    else:
        p95 = percentile(target, 95)
        verdict = "OK" if p95 < args.p95_ms else "OVER"
        print(f"play page p95 {p95:.0f} ms, target under {args.p95_ms:.0f} ms: {verdict}")
        if p95 >= args.p95_ms:
            failures.append(f"play page p95 {p95:.0f} ms")
    print(f"logs: {stack.work}")
    print(f"load {'FAILED: ' + '; '.join(failures) if failures else 'passed'}", flush=True)
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bin/load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--readers", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60, help="how long readers start new rounds")
    parser.add_argument("--grace", type=float, default=60,
                        help="how long after --seconds the last rounds may take before they count as stuck")
    parser.add_argument("--upload-every", type=int, default=5, metavar="TURNS",
                        help="each reader uploads a lore file every this many turns (0: never)")
    parser.add_argument("--think", type=float, default=1, metavar="SECONDS",
                        help="a reader's pause after each page it reads (0: none, a stress load)")
    parser.add_argument("--max-requests", type=int, default=100_000)
    parser.add_argument("--p95-ms", type=float, default=300, help="the play page's p95 must stay under this")
    parser.add_argument("--redis-db", type=int, default=12)
    parser.add_argument("--profile", choices=("readers", "shared-play"), default="readers",
                        help="readers: each plays alone (the options above); shared-play: groups play one "
                             "story each (scripts/sharedplay.py, the options below)")
    shared = parser.add_argument_group("shared-play")
    shared.add_argument("--campaigns", type=int, default=5)
    shared.add_argument("--players", type=int, default=4, help="players per campaign, beside its game master")
    shared.add_argument("--event-p95-ms", type=float, default=1000,
                        help="each event must reach each member's page within this (p95)")
    args = parser.parse_args(argv)
    if args.readers < 1 or args.seconds <= 0 or args.campaigns < 1 or args.players < 1:
        parser.error("--readers, --seconds, --campaigns and --players must be positive")

    exit_on_sigterm()

    def out_of_time(signum, frame):
        raise SystemExit("bin/load: the hard time limit was reached; cleaning up")

    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(int(SETUP_BUDGET + args.seconds + args.grace + 180))
    try:
        with Stack(label="load", redis_db=args.redis_db) as stack:
            if args.profile == "shared-play":
                from scripts.sharedplay import run_shared  # it imports this module's recorder
                return run_shared(stack, args)
            return run_load(stack, args)
    except StackError as exc:
        print(f"bin/load: {exc}", file=sys.stderr)
        return 2
    finally:
        signal.alarm(0)


if __name__ == "__main__":
    sys.exit(main())

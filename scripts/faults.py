"""Faults: the hosted processes killed and broken mid-work, then a check that nothing was lost (issue 13).

Started by `bin/faults`. `scripts.procs.Stack` brings up the Procfile's web,
worker and narrator on a fresh PostgreSQL database and a Redis server of the
stack's own (a private `redis-server` on a free loopback port, so restarting
it disturbs nobody), with the scripted model server beside them. Then:

1. Setup, through the ORM: two endpoint profiles at the model server (the
   usual one, and one with a small context window so that summaries fall
   due after a few turns) and, per scenario, three readers with a campaign
   each. The readers log in over HTTP before anything is measured.
2. Six scenarios, one after the other. In each, the three readers have a
   turn in flight (posted as the play page posts it: htmx, CSRF) when the
   fault lands, and each narration is followed as the page follows it: its
   event stream (reopened with Last-Event-ID when it ends without `done`,
   as EventSource does); on `done` the story partial the page swaps in,
   and, when the narration is still in flight there (a new worker restarted
   it), a new stream from the story's new offset. Never a full page reload.
   The model server's script (`/_demo/script`) makes those narrations
   stream slowly (a pause between pieces) so that a kill lands mid-stream.

   1. narrator: the narrator is killed (-9) mid-narration and restarted.
   2. import: each reader uploads a large lore file; the worker is killed
      (-9) while an index job runs, and restarted; the lore must settle
      within 30 s of the new worker being back (it resumes the batches
      already embedded).
   3. summary: on the small window, each reader plays until a summary is
      due; the summarizer is made slow; the worker is killed (-9) while a
      summary job runs, and restarted.
   4. redis: the Redis server is killed (-9) while the narrations stream,
      and started again on the same port (it keeps nothing: every queued
      message, the cache and the locks are gone).
   5. queues: the narrator is stopped (gracefully), the turns are posted so
      their messages wait in the queue, the queues are deleted (`DEL`), and
      the narrator is started again. With the narrator running the messages
      would be taken within milliseconds and there would be nothing to lose.
   6. model: the model server is killed mid-stream; those narrations must
      fail with a message the reader can read; it is started again a few
      seconds later, and each reader presses Retry (the same POST as the
      page's button), which must narrate the same action again, to the end.
   7. redisdown (scripts.outages): the private Redis is stopped for
      `--redis-down` seconds (30) while narrations stream and the readers
      keep reading (play page, story partial, list, library) and send a
      turn each: every page must answer (no 5xx), every turn be accepted
      (its narration then done, or failed with a message, the turn kept) or
      refused with a message (and not stored), and everything settle as the
      pages follow it once Redis is back.
   8. logins (scripts.outages): `--burst` accounts (50) log in at the same
      moment while the readers read their play pages: the log-ins' errors,
      and the readers' p95 during the burst against the quiet one (at most 2x).

   A supervisor (a thread of this script) starts a killed process again
   after `--restart-after` seconds, and so any process that ends on its own
   meanwhile: that is a crash the fault caused, reported as a problem, since
   without a supervisor the process would stay down.
3. It prints, per scenario, the narrations the fault caught in flight, the
   seconds from the fault until each settled (done or failed, as the story
   partial shows it), p50 and max, and the outcomes; then the checks, on the
   database through the ORM: every turn posted (a unique marker in each text)
   is one player action with one narration, done; nothing pending or
   streaming; every lore source ready, or failed with a reason; no index or
   derived job left queued or running, and a failed one has its error; no
   passage twice (same source and position, or the same text in a source);
   no summary twice for the same stretch, nor two for one job; no memory twice.

Readers log in a few at a time before anything is measured (scripts.procs.LoginPacer).

Exit status 1 when a narration took more than 60 s to settle after its fault
(or after its Retry), when lore took more than 30 s after the restarted worker
was back (ready and beating) or summaries more than 60 s, when a fault
did not land where it was meant to, when a process crashed, or when a check
fails; 2 when the stack could not be brought up. Bounded: each
scenario waits at most `--settle-limit` seconds, and an alarm ends the whole
run (cleaning up) after `--max-seconds`. Loopback only.
"""

from __future__ import annotations

import argparse
import html
import json
import math
import random
import re
import secrets
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import psycopg

from scripts import outages
from scripts.procs import BUSY_STATUSES, LoginPacer, Stack, StackError, Trouble, exit_on_sigterm, say

#: The issue's bound: every narration done or failed this soon after its fault.
SETTLE_SECONDS = 60.0
#: An import interrupted by its worker's death settles this soon after the worker is back (issue 23).
IMPORT_SETTLE_SECONDS = 30.0
READERS = 3
PAGE_TIMEOUT = httpx.Timeout(30, connect=5)
#: The stream sends a keep-alive every 15 s of silence.
STREAM_TIMEOUT = httpx.Timeout(40, connect=5)
#: A narration a fault should land in: about 17 pieces, this many seconds apart.
SLOW_PIECE_SECONDS = 0.4
#: The small window of the summary scenario: a summary falls due after about six turns.
SMALL_BUDGET, SMALL_OUTPUT = 1400, 150
#: Seconds the summarizer waits before it answers, in the summary scenario (the
#: profile's first-byte timeout is 30 s).
SUMMARY_STALL = 25
IN_FLIGHT = ("pending", "streaming")

SETUP = """
import json, os
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from storyapp import demo
from endpoints.models import EndpointProfile

spec = json.load(open(os.environ["STACK_INPUT"]))
common = dict(base_url=spec["model_url"], chat_model="demo-narrator", embedding_model="demo-embed",
              is_scripted_demo=True)
usual = EndpointProfile.objects.create(name="Faults: scripted demo", is_default=True, **common)
small = EndpointProfile.objects.create(name="Faults: small window", context_token_budget=spec["small_budget"],
                                       max_output_tokens=spec["small_output"], **common)
readers = []
for scenario, number, window in spec["readers"]:
    username = f"faults-{scenario}-{number}"
    get_user_model().objects.create_user(username=username, password=spec["password"])
    campaign = demo.ensure_campaign(username)
    campaign.endpoint = small if window == "small" else usual
    campaign.title = f"The Salt Road ({username})"
    campaign.save()
    readers.append({"scenario": scenario, "number": number, "username": username, "campaign": campaign.pk})
# The login burst's accounts: one hash for all (the same password), so the setup does not pay for fifty.
User = get_user_model()
hashed = make_password(spec["password"])
burst = [f"faults-burst-{n:02d}" for n in range(spec["burst"])]
User.objects.bulk_create([User(username=name, password=hashed) for name in burst])
print(json.dumps({"profile": usual.pk, "readers": readers, "burst": burst}))
"""

CHECK = """
import json, os
from django.db.models import Count
from knowledge.models import IndexJob, KnowledgeChunk, KnowledgeSource
from storyapp.models import Action, DerivedJob, Memory, Summary

spec = json.load(open(os.environ["STACK_INPUT"]))
campaigns = spec["campaigns"]
checks = {}

def check(name, problems):
    checks[name] = problems[:20] + ([f"... and {len(problems) - 20} more"] if len(problems) > 20 else [])

turns = []
may_fail = {tuple(turn) for turn in spec["may_fail"]}
for campaign, text in spec["turns"]:
    players = list(Action.objects.filter(campaign_id=campaign, kind="player", text=text).values_list("pk", flat=True))
    if len(players) != 1:
        turns.append(f"campaign {campaign}: {len(players)} player actions for {text!r}")
        continue
    narrations = list(Action.objects.filter(parent_id=players[0], kind="ai").values_list("pk", "status", "error"))
    kept = (campaign, text) in may_fail and len(narrations) == 1 and narrations[0][1] == "failed" and narrations[0][2]
    if not kept and (len(narrations) != 1 or narrations[0][1] != "done"):
        turns.append(f"campaign {campaign}: player action #{players[0]} has narrations {narrations}")
stored = Action.objects.filter(campaign_id__in=campaigns, kind="player").count()
if stored != len(spec["turns"]):
    turns.append(f"{stored} player actions stored for {len(spec['turns'])} turns posted")
for campaign, text in spec["refused"]:
    if Action.objects.filter(campaign_id=campaign, text=text).exists():
        turns.append(f"campaign {campaign}: a refused turn was stored: {text!r}")
check("every turn posted is one player action with one narration, done (or, while Redis was down, failed "
      "with a message, or refused and not stored)", turns)

in_flight = list(Action.objects.filter(campaign_id__in=campaigns, status__in=["pending", "streaming"])
                 .values_list("pk", "kind", "status"))
check("no action left pending or streaming", [f"action #{pk} ({kind}) is {status}" for pk, kind, status in in_flight])

sources = []
for pk, state, error in KnowledgeSource.objects.filter(campaign_id__in=campaigns).values_list("pk", "index_state", "error"):
    if state not in ("ready", "failed") or (state == "failed" and not error.strip()):
        sources.append(f"source #{pk} is {state} (error {error!r})")
for pk, source, state, error in IndexJob.objects.filter(source__campaign_id__in=campaigns).values_list(
        "pk", "source_id", "state", "error"):
    if state in ("queued", "running") or (state == "failed" and not error.strip()):
        sources.append(f"index job #{pk} of source #{source} is {state} (error {error[:200]!r})")
for pk, count, passages in KnowledgeSource.objects.filter(campaign_id__in=campaigns, index_state="ready").annotate(
        n=Count("chunks")).values_list("pk", "n", "passage_count"):
    if count != passages:
        sources.append(f"source #{pk} has {count} passages stored and says {passages}")
check("every lore source ready, or failed with a reason; no index job left queued or running", sources)

chunks = KnowledgeChunk.objects.filter(source__campaign_id__in=campaigns)
doubles = [f"source #{s}: position {i} {n} times" for s, i, n in
           chunks.values_list("source_id", "index").annotate(n=Count("id")).filter(n__gt=1).values_list("source_id", "index", "n")]
doubles += [f"source #{s}: one text {n} times" for s, n in
            chunks.values_list("source_id", "text").annotate(n=Count("id")).filter(n__gt=1).values_list("source_id", "n")]
check("no duplicate passages", doubles)

summaries = Summary.objects.filter(campaign_id__in=campaigns)
twice = [f"campaign {c}: summary after #{a} through #{t} level {lv} {n} times" for c, a, t, lv, n in
         summaries.values_list("campaign_id", "starts_after_id", "covers_through_id", "level").annotate(n=Count("id"))
         .filter(n__gt=1).values_list("campaign_id", "starts_after_id", "covers_through_id", "level", "n")]
twice += [f"job #{j}: {n} summaries" for j, n in summaries.exclude(job=None).values_list("job_id").annotate(
          n=Count("id")).filter(n__gt=1).values_list("job_id", "n")]
twice += [f"action #{a}: the memory {t[:60]!r} {n} times" for a, t, n in
          Memory.objects.filter(campaign_id__in=campaigns).values_list("anchor_id", "authority", "summary_id", "text")
          .annotate(n=Count("id")).filter(n__gt=1).values_list("anchor_id", "text", "n")]
check("no duplicate summary for one stretch or one job, no duplicate memory", twice)

jobs = [f"{kind} job #{pk} ({key}) is {state}" + (f": {error[:200]}" if error else "")
        for pk, kind, key, state, error in DerivedJob.objects.filter(campaign_id__in=campaigns).values_list(
            "pk", "kind", "key", "state", "error")
        if state in ("queued", "running") or (state == "failed" and not error.strip())]
check("every summary and memory job done, or failed with its error", jobs)

counts = {
    "player actions": stored,
    "narrations": dict(Action.objects.filter(campaign_id__in=campaigns, kind="ai").values_list("status")
                       .annotate(n=Count("id")).order_by()),
    "lore sources": dict(KnowledgeSource.objects.filter(campaign_id__in=campaigns).values_list("index_state")
                         .annotate(n=Count("id")).order_by()),
    "passages": chunks.count(),
    "summaries": summaries.count(),
    "derived jobs": dict(DerivedJob.objects.filter(campaign_id__in=campaigns).values_list("state")
                         .annotate(n=Count("id")).order_by()),
    "attempts over 1": Action.objects.filter(campaign_id__in=campaigns, kind="ai", attempts__gt=1).count(),
}
print(json.dumps({"checks": checks, "counts": counts}, default=str))
"""


def snippet(text: str) -> str:
    return re.sub(r"\s+", " ", text)[:300]


def percentile(ordered: list[float], p: float) -> float:
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


# ---------------------------------------------------------------- the model server's script


class ModelScript:
    """The demo model server's control API (demomodel/handler.py):
    steps for the next chat completions, or for the next summary requests."""

    def __init__(self, stack: Stack):
        self.root = stack.model_url.removesuffix("/v1")

    def add(self, *steps: dict, summaries: bool = False) -> None:
        response = httpx.post(f"{self.root}/_demo/script", json={"steps": list(steps), "summaries": summaries},
                              timeout=5)
        response.raise_for_status()

    def clear(self) -> None:
        httpx.delete(f"{self.root}/_demo/script", timeout=5).raise_for_status()


# ---------------------------------------------------------------- readers and what they follow


@dataclass
class Narration:
    """One narration as its reader's page sees it, from the post to its settling."""

    scenario: str
    reader: str
    campaign: int
    action: int
    text: str  # the turn's text (its marker); empty for a Retry
    posted: float
    kind: str = "turn"
    status: str = ""
    error: str = ""
    settled: float | None = None
    streams: int = 0
    restarts: int = 0
    reconnects: int = 0
    status_events: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    thread: threading.Thread | None = None

    def settled_after(self, moment: float) -> float | None:
        return None if self.settled is None else self.settled - moment


ARTICLE = r'<article class="action (\w+) status-(\w+)" id="action-{id}"(.*?)</article>'


def find_action(story: str, action_id: int) -> tuple[str, str, str] | None:
    """(status, stream path or "", error shown) of one action in a story partial."""
    match = re.search(ARTICLE.format(id=action_id), story, re.DOTALL)
    if not match:
        return None
    body = match.group(3)
    stream = re.search(r'sse-connect="([^"]+)"', body)
    error = re.search(r'<p class="error" role="alert">(.*?)</p>', body, re.DOTALL)
    return (match.group(2), html.unescape(stream.group(1)) if stream else "",
            html.unescape(error.group(1)).strip() if error else "")


class Reader:
    """One reader's browser: a cookie jar, the page's requests, and threads that follow its narrations."""

    def __init__(self, *, scenario: str, number: int, username: str, password: str, campaign: int, stack: Stack,
                 run: str):
        self.scenario = scenario
        self.number = number
        self.username = username
        self.password = password
        self.campaign = campaign
        self.run = run
        self.https = stack.https
        self.play = f"/campaigns/{campaign}/"
        self.turn = 0
        self.client = httpx.Client(
            base_url=stack.base_url, timeout=PAGE_TIMEOUT, follow_redirects=False,
            headers={"Origin": stack.origin, "Referer": stack.origin + self.play, **stack.proxy_headers()},
        )

    def request(self, method: str, path: str, *, expect: tuple[int, ...] = (200,), **kwargs) -> httpx.Response:
        try:
            response = self.client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise Trouble(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        if self.https:  # the proxy would carry the secure cookies over TLS; plain loopback must be told
            for cookie in self.client.cookies.jar:
                cookie.secure = False
        if response.status_code not in expect:
            raise Trouble(f"{method} {path} -> {response.status_code}: {snippet(response.text)}")
        return response

    def csrf(self) -> str:
        return self.client.cookies["csrftoken"]

    def log_in(self) -> bool:
        """One attempt: True when logged in, False when the site said it was
        busy (for procs.LoginPacer to try again); Trouble when refused."""
        if self.request("GET", "/accounts/login/", expect=(200, *BUSY_STATUSES)).status_code != 200:
            return False
        response = self.request("POST", "/accounts/login/", expect=(302, *BUSY_STATUSES), data={
            "username": self.username, "password": self.password, "csrfmiddlewaretoken": self.csrf()})
        if response.status_code != 302:
            return False
        if "/accounts/login/" in response.headers.get("location", ""):
            raise Trouble(f"{self.username} was refused at log-in")
        return True

    def story(self) -> str:
        """The story partial, as the page's `hx-get` on `sse:done` fetches it."""
        return self.request("GET", self.play, headers={"HX-Request": "true"}).text

    def next_text(self) -> str:
        self.turn += 1
        marker = f"faults {self.run} {self.scenario} reader {self.number} turn {self.turn:02d}"
        return f"I ask the harbourmaster about the tide-bell and the broken seal. [{marker}]"

    def post_turn(self, text: str) -> tuple[int, str]:
        """Posts a turn as the play page's form does; the new narration's id and stream path."""
        response = self.request("POST", f"{self.play}turn/", headers={"HX-Request": "true"},
                                data={"text": text, "csrfmiddlewaretoken": self.csrf()})
        if "turn-accepted" not in response.headers.get("HX-Trigger", ""):
            refusal = re.search(r'<p class="error" role="alert">(.*?)</p>', response.text, re.DOTALL)
            raise Trouble(f"turn refused: {refusal.group(1).strip() if refusal else snippet(response.text)}")
        match = re.search(rf'sse-connect="({self.play}actions/(\d+)/stream/[^"]*)"', response.text)
        if not match:
            raise Trouble(f"no narration stream in the story after the turn: {snippet(response.text)}")
        return int(match.group(2)), html.unescape(match.group(1))

    def press_retry(self, action_id: int) -> str:
        """The Retry button under a failed narration (the same POST); the stream path of that same action."""
        response = self.request("POST", f"{self.play}retry/", headers={"HX-Request": "true"},
                                data={"csrfmiddlewaretoken": self.csrf()})
        found = find_action(response.text, action_id)
        if found is None or found[0] not in IN_FLIGHT or not found[1]:
            raise Trouble(f"Retry did not narrate action #{action_id} again in place: {found}")
        return found[1]

    def upload(self, filename: str, body: bytes) -> None:
        response = self.request("POST", f"{self.play}library/upload/", headers={"HX-Request": "true"},
                                data={"classification": "reference", "visibility": "visible",
                                      "csrfmiddlewaretoken": self.csrf()},
                                files={"files": (filename, body, "text/markdown")})
        if 'class="ok-note">Imported 1 file' not in response.text:
            problems = re.findall(r'<li class="error">(.*?)</li>', response.text, re.DOTALL)
            raise Trouble(f"upload not imported: {problems or snippet(response.text)}")

    # ------------------------------------------------------------ following a narration

    def follow(self, narration: Narration, path: str, *, until: float) -> None:
        """Follows a narration as the page does until it settles (or `until`)."""
        narration.thread = threading.Thread(target=self._follow, args=(narration, path, until),
                                            name=f"follow-{narration.action}", daemon=True)
        narration.thread.start()

    def _follow(self, narration: Narration, path: str, until: float) -> None:
        try:
            self._follow_to_end(narration, path, until)
        except Trouble as exc:
            narration.problems.append(str(exc))
        except Exception as exc:  # noqa: BLE001 - a follower that dies is a problem of the run, not a silent stop
            narration.problems.append(f"the follower stopped: {type(exc).__name__}: {exc}")

    def _follow_to_end(self, narration: Narration, path: str, until: float) -> None:
        last_id = None
        while time.monotonic() < until:
            done = False
            headers = {"Accept": "text/event-stream"}
            if last_id is not None:
                headers["Last-Event-ID"] = last_id
            narration.streams += 1
            try:
                with self.client.stream("GET", path, headers=headers, timeout=STREAM_TIMEOUT) as response:
                    if response.status_code != 200:
                        raise Trouble(f"GET {path} -> {response.status_code}")
                    event = None
                    for line in response.iter_lines():
                        if line.startswith("event: "):
                            event = line[len("event: "):]
                        elif line.startswith("id: "):
                            last_id = line[len("id: "):]
                        elif line.startswith("data:") and event == "status":
                            text = html.unescape(line[len("data:"):].strip())
                            if text not in narration.status_events:
                                narration.status_events.append(text)
                        elif line.startswith("data:") and event == "done":
                            done = True
                            break
                        if time.monotonic() > until:
                            break
            except httpx.HTTPError:
                done = False
            if not done:
                # EventSource reconnects after the stream's `retry: 1000`, with the last id it saw.
                narration.reconnects += 1
                time.sleep(1)
                continue
            found = find_action(self.story(), narration.action)
            if found is None:
                raise Trouble(f"narration #{narration.action} is missing from the story after its done")
            status, stream, error = found
            if status in IN_FLIGHT:
                if not stream:
                    raise Trouble(f"narration #{narration.action} is {status} but the story opens no stream")
                # A new worker restarted the text: the story shows it and streams on from its new offset.
                narration.restarts += 1
                path, last_id = stream, None
                continue
            narration.status, narration.error, narration.settled = status, error, time.monotonic()
            return
        narration.problems.append(f"narration #{narration.action} had not settled when the scenario's time was up")


# ---------------------------------------------------------------- the database, read directly while faults run


class Database:
    """Plain SQL on the stack's database, for the polling a fault waits on (the ORM check comes at the end)."""

    def __init__(self, stack: Stack):
        self.conn = psycopg.connect(stack.database_url, autocommit=True, connect_timeout=5)

    def rows(self, sql: str, *params) -> list[tuple]:
        return self.conn.execute(sql, params).fetchall()

    def actions(self, ids: list[int]) -> dict[int, tuple[str, int]]:
        return {pk: (status, length) for pk, status, length in self.rows(
            "SELECT id, status, length(text) FROM storyapp_action WHERE id = ANY(%s)", ids)}

    def index_jobs(self, campaigns: list[int]) -> list[tuple]:
        return self.rows(
            "SELECT j.id, j.state, j.progress, j.step, j.source_id, j.attempts FROM knowledge_indexjob j "
            "JOIN knowledge_knowledgesource s ON s.id = j.source_id WHERE s.campaign_id = ANY(%s) ORDER BY j.id",
            campaigns)

    def sources(self, campaigns: list[int]) -> list[tuple]:
        return self.rows("SELECT id, index_state, error, passage_count FROM knowledge_knowledgesource "
                         "WHERE campaign_id = ANY(%s) ORDER BY id", campaigns)

    def worker_seen(self, name: str):
        """When the worker of this host:pid name last beat (ops.sweeper), or None."""
        rows = self.rows("SELECT seen FROM knowledge_workerheartbeat WHERE name = %s", name)
        return rows[0][0] if rows else None

    def derived_jobs(self, campaigns: list[int], kind: str) -> list[tuple]:
        return self.rows("SELECT id, state, attempts, key, error FROM storyapp_derivedjob "
                         "WHERE campaign_id = ANY(%s) AND kind = %s ORDER BY id", campaigns, kind)

    def close(self) -> None:
        self.conn.close()


def wait_for(condition: Callable[[], object], *, timeout: float, every: float = 0.1):
    """`condition()`'s first truthy value within `timeout` seconds, else None."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value or None
        time.sleep(every)


# ---------------------------------------------------------------- lore large enough to take a while to index

_WORD_LIST = ("tide bell harbour chain smuggler lantern salt ledger warden customs seal venn quay gull rope "
         "anchor tar brine cellar vault key coin debt ship mast sail storm fog reef lighthouse keeper "
         "oath guild archive map ink candle wax barrel crate net hook eel oyster pier ferry toll bridge "
         "canal lock sluice mill granary market stall spice silk wool dye tannery forge anvil ember "
         "chapel bellrope crypt shrine relic pilgrim abbot novice scribe herald captain bosun purser")
WORDS = tuple(_WORD_LIST.split())


def lore(marker: str, paragraphs: int, *, seed: int) -> bytes:
    """Markdown with a heading every eight paragraphs; every paragraph names
    its number, so no two passages hold the same text."""
    rng = random.Random(seed)
    lines = [f"# The harbour archive of Westhaven ({marker})", ""]
    for number in range(paragraphs):
        if number % 8 == 0:
            lines += [f"## Ledger {number // 8 + 1} of {marker}", ""]
        body = " ".join(rng.choice(WORDS) for _ in range(110))
        lines += [f"Entry {number} of {marker} records the {body}.", ""]
    return "\n".join(lines).encode()


# ---------------------------------------------------------------- scenarios


@dataclass
class Scenario:
    key: str
    title: str
    readers: list[Reader]
    narrations: list[Narration] = field(default_factory=list)
    retries: list[Narration] = field(default_factory=list)
    fault_at: float | None = None
    #: What the scenario's row in the table says after its narrations' figures.
    row_extra: str = ""
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def campaigns(self) -> list[int]:
        return [reader.campaign for reader in self.readers]

    def affected(self) -> list[Narration]:
        """The narrations the fault caught in flight: posted before it, not settled by it."""
        if self.fault_at is None:
            return []
        return [n for n in self.narrations if n.posted <= self.fault_at and (n.settled is None or n.settled > self.fault_at)]


class Run:
    """Everything the scenarios share: the stack, the readers, the model's script, the turns posted."""

    def __init__(self, stack: Stack, args, readers: dict[str, list[Reader]]):
        self.stack = stack
        self.args = args
        self.readers = readers
        self.model = ModelScript(stack)
        self.db = Database(stack)
        self.turns: list[tuple[int, str]] = []
        #: Turns stored whose narration may end failed with a message (sent while Redis was down).
        self.may_fail: list[tuple[int, str]] = []
        #: Turns refused with a message: they must not be stored.
        self.refused: list[tuple[int, str]] = []
        self.lock = threading.Lock()
        #: The supervisor's state: processes stopped on purpose, the crashes it saw.
        self.processes = threading.RLock()
        self.down: set[str] = set()
        self.crashes: list[tuple[str, str, int, str]] = []
        self.current: Scenario | None = None
        self.faulted: Scenario | None = None
        #: The login burst's accounts and their password (setup).
        self.burst: tuple[list[str], str] = ([], "")
        self.watching = threading.Event()
        self.watcher = threading.Thread(target=self.watch, name="supervisor", daemon=True)

    def scenario(self, key: str, title: str) -> Scenario:
        say(f"scenario {key}: {title}")
        self.current = Scenario(key=key, title=title, readers=self.readers[key])
        return self.current

    def post(self, scenario: Scenario, reader: Reader, *, follow: bool = True) -> Narration:
        """One turn posted and, unless told otherwise, followed until the scenario's time is up."""
        text = reader.next_text()
        posted = time.monotonic()
        action, path = reader.post_turn(text)
        return self.track(scenario, reader, text=text, action=action, path=path, posted=posted, follow=follow)

    def track(self, scenario: Scenario, reader: Reader, *, text: str, action: int, path: str, posted: float,
              kind: str = "turn", follow: bool = True) -> Narration:
        """A turn the web accepted: checked at the end, and followed as its page follows it."""
        with self.lock:
            self.turns.append((reader.campaign, text))
        narration = Narration(scenario=scenario.key, reader=reader.username, campaign=reader.campaign,
                              action=action, text=text, posted=posted, kind=kind)
        scenario.narrations.append(narration)
        if follow:
            reader.follow(narration, path, until=posted + self.args.settle_limit)
        return narration

    def post_all(self, scenario: Scenario, *, slow: bool = True, clear: bool = True) -> list[Narration]:
        """A turn from each reader of the scenario, in flight at once; slow ones for a fault to land in."""
        if clear:
            self.model.clear()
        if slow:
            self.model.add(*[{"delay": SLOW_PIECE_SECONDS}] * len(scenario.readers))
        return [self.post(scenario, reader) for reader in scenario.readers]

    def wait_streaming(self, scenario: Scenario, narrations: list[Narration], *, timeout: float = 20) -> bool:
        """Until every narration streams and has some text (so a kill lands mid-stream)."""
        ids = [n.action for n in narrations]

        def streaming():
            rows = self.db.actions(ids)
            return all(rows.get(pk, ("", 0))[0] == "streaming" and rows[pk][1] > 0 for pk in ids)

        if wait_for(streaming, timeout=timeout):
            return True
        scenario.problems.append(f"the narrations were not all streaming within {timeout:.0f} s: "
                                 f"{self.db.actions(ids)}")
        return False

    def in_flight_note(self, scenario: Scenario, narrations: list[Narration]) -> None:
        rows = self.db.actions([n.action for n in narrations])
        shown = ", ".join(f"#{pk} {status} ({length} chars)" for pk, (status, length) in sorted(rows.items()))
        scenario.notes.append(f"at the fault: {shown}")

    def fault(self, scenario: Scenario, what: str) -> None:
        self.faulted = scenario
        scenario.fault_at = time.monotonic()
        say(f"FAULT ({scenario.key}): {what}")
        scenario.notes.append(f"fault: {what}")

    def kill(self, name: str, *, sig: int = signal.SIGKILL) -> None:
        """Stops a process on purpose (the fault, or a step before it): the supervisor leaves it down."""
        with self.processes:
            self.down.add(name)
            self.stack.stop(name, sig=sig, timeout=5 if sig == signal.SIGKILL else 15)

    def start(self, name: str) -> None:
        with self.processes:
            self.stack.start(name)
            self.down.discard(name)
        if name == "model":
            self.stack.wait_model()

    def worker_back(self, scenario: Scenario, timeout: float = 60) -> float | None:
        """The moment the restarted worker is back, ready and beating (its
        first heartbeat row, written as it becomes ready); None if it is not."""
        name = f"{socket.gethostname()}:{self.stack.processes['worker'].pid}"
        if wait_for(lambda: self.db.worker_seen(name), timeout=timeout, every=0.1) is None:
            scenario.problems.append(f"the restarted worker {name} did not beat within {timeout:.0f} s")
            return None
        back = time.monotonic()
        scenario.notes.append(f"the worker was back (ready, beating) {back - scenario.fault_at:.1f} s after the fault")
        return back

    def supervise(self, name: str) -> None:
        """What a supervisor does after a process died: wait a moment, start it again."""
        time.sleep(self.args.restart_after)
        self.start(name)

    def watch(self) -> None:
        """The supervisor, in a thread: a process that ends when nobody stopped it
        is a crash the fault caused; it is recorded, and started again."""
        while not self.watching.wait(0.5):
            with self.processes:
                for name, proc in list(self.stack.processes.items()):
                    if name in self.down or proc.poll() is None:
                        continue
                    why = last_critical(self.stack.log_path(name))
                    # A process can take a while to die of a fault (finishing its tasks first): the
                    # crash belongs to the last fault, even when the next scenario has begun.
                    scenario = (self.faulted or self.current).key if (self.faulted or self.current) else "setup"
                    self.crashes.append((scenario, name, proc.returncode, why))
                    say(f"CRASH ({scenario}): {name} (pid {proc.pid}) ended with status {proc.returncode}: {why}; "
                        f"the supervisor starts it again")
                    time.sleep(self.args.restart_after)
                    self.stack.start(name)

    def settle(self, scenario: Scenario, narrations: list[Narration] | None = None) -> None:
        for narration in narrations if narrations is not None else scenario.narrations + scenario.retries:
            if narration.thread is not None:
                narration.thread.join(timeout=max(0.0, narration.posted + self.args.settle_limit + 5 - time.monotonic()))
                if narration.thread.is_alive():
                    narration.problems.append(f"narration #{narration.action}: its follower was still busy")

    def play_to_end(self, scenario: Scenario, reader: Reader) -> Narration:
        """A fast turn, followed to its end (the warm-up before a fault)."""
        narration = self.post(scenario, reader)
        self.settle(scenario, [narration])
        return narration

    # ------------------------------------------------------------ 1. the narrator killed mid-narration

    def narrator_killed(self) -> Scenario:
        scenario = self.scenario("narrator", "narrator killed (-9) mid-narration, restarted")
        narrations = self.post_all(scenario)
        if self.wait_streaming(scenario, narrations):
            time.sleep(1.5)
        self.in_flight_note(scenario, narrations)
        self.fault(scenario, "kill -9 the narrator's process group")
        self.kill("narrator")
        self.supervise("narrator")
        self.settle(scenario)
        return scenario

    # ------------------------------------------------------------ 2. the worker killed mid-import

    def worker_killed_mid_import(self) -> Scenario:
        scenario = self.scenario("import", "worker killed (-9) mid-import, restarted")
        self.model.clear()
        uploads = []

        def upload(reader: Reader) -> None:
            marker = f"{reader.run}-{reader.username}"
            try:
                reader.upload(f"harbour-archive-{marker}.md",
                              lore(marker, self.args.lore_paragraphs, seed=reader.campaign))
            except Trouble as exc:
                scenario.problems.append(f"{reader.username}: {exc}")

        for reader in scenario.readers:
            thread = threading.Thread(target=upload, args=(reader,), daemon=True)
            thread.start()
            uploads.append(thread)

        def running():
            jobs = self.db.index_jobs(scenario.campaigns)
            busy = [j for j in jobs if j[1] == "running" and j[2] >= 10]
            return busy if busy else None

        busy = wait_for(running, timeout=60, every=0.05)
        if not busy:
            scenario.problems.append(f"no index job was caught running: {self.db.index_jobs(scenario.campaigns)}")
        # The turns now, so they are in flight when the worker dies mid-import.
        narrations = self.post_all(scenario)
        self.wait_streaming(scenario, narrations, timeout=10)
        for thread in uploads:
            thread.join(timeout=60)
        self.in_flight_note(scenario, narrations)
        scenario.notes.append("index jobs at the fault: " + "; ".join(
            f"#{pk} {state} {progress}% ({step})" for pk, state, progress, step, *_ in self.db.index_jobs(scenario.campaigns)))
        self.fault(scenario, "kill -9 the worker's process group (its prefork children too)")
        self.kill("worker")
        self.supervise("worker")
        back = self.worker_back(scenario)

        def sources_settled():
            rows = self.db.sources(scenario.campaigns)
            return rows if len(rows) == len(scenario.readers) and all(r[1] in ("ready", "failed") for r in rows) else None

        settled = wait_for(sources_settled, timeout=self.args.settle_limit, every=0.25)
        now = time.monotonic()
        after, since_back = now - scenario.fault_at, now - (back or scenario.fault_at)
        if settled and since_back > IMPORT_SETTLE_SECONDS:
            scenario.problems.append(f"the lore sources took {since_back:.0f} s to settle after the worker was back "
                                     f"(at most {IMPORT_SETTLE_SECONDS:.0f} s)")
        if settled:
            scenario.notes.append(f"lore sources settled {after:.1f} s after the fault, {since_back:.1f} s after the "
                                  "worker was back: " + "; ".join(
                f"#{pk} {state}, {passages} passages" + (f", {error}" if error else "") for pk, state, error, passages in settled))
            scenario.row_extra = f"lore settled {since_back:.1f} s after the worker was back (at most {IMPORT_SETTLE_SECONDS:.0f})"
        else:
            scenario.problems.append(f"lore sources not settled {after:.0f} s after the fault: "
                                     f"{self.db.sources(scenario.campaigns)}")
            scenario.row_extra = "lore NOT settled"
        scenario.notes.append("index jobs after: " + "; ".join(
            f"#{pk} {state} (attempts {attempts}, {step})"
            for pk, state, _, step, _, attempts in self.db.index_jobs(scenario.campaigns)))
        self.settle(scenario)
        return scenario

    # ------------------------------------------------------------ 3. the worker killed mid-summary

    def worker_killed_mid_summary(self) -> Scenario:
        scenario = self.scenario("summary", "worker killed (-9) mid-summary, restarted")
        self.model.clear()
        self.model.add(*[{"stall": SUMMARY_STALL}] * len(scenario.readers), summaries=True)
        campaigns = scenario.campaigns

        def warm_up(reader: Reader) -> None:
            """Fast turns until this campaign's first summary is due (a connection
            of its own: psycopg connections are not shared between threads)."""
            db = Database(self.stack)
            try:
                for _ in range(self.args.warmup_turns):
                    self.play_to_end(scenario, reader)
                    if db.derived_jobs([reader.campaign], "summary"):
                        return
            except Trouble as exc:
                scenario.problems.append(f"{reader.username} warming up: {exc}")
            finally:
                db.close()

        threads = [threading.Thread(target=warm_up, args=(r,), daemon=True) for r in scenario.readers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=self.args.settle_limit * 2)
        warm = len(scenario.narrations)

        def running():
            jobs = self.db.derived_jobs(campaigns, "summary")
            return jobs if any(state == "running" for _, state, *_ in jobs) else None

        if not wait_for(running, timeout=10):
            scenario.problems.append(f"no summary job was caught running after {warm} warm-up turns: "
                                     f"{self.db.derived_jobs(campaigns, 'summary')}")
        narrations = self.post_all(scenario, clear=False)  # the summarizer's stalls stay queued
        self.wait_streaming(scenario, narrations)
        self.in_flight_note(scenario, narrations)
        jobs = self.db.derived_jobs(campaigns, "summary")
        scenario.notes.append(f"after {warm} warm-up turns, summary jobs at the fault: " + "; ".join(
            f"#{pk} {state} (attempt {attempts}, {key})" for pk, state, attempts, key, _ in jobs))
        if not any(state == "running" for _, state, *_ in jobs):
            scenario.problems.append("the fault missed: no summary job was running when the worker was killed")
        self.fault(scenario, "kill -9 the worker's process group while summaries run")
        self.kill("worker")
        self.supervise("worker")

        def summaries_settled():
            jobs = self.db.derived_jobs(campaigns, "summary")
            return jobs if jobs and all(state in ("done", "failed") for _, state, *_ in jobs) else None

        settled = wait_for(summaries_settled, timeout=self.args.settle_limit, every=0.25)
        after = time.monotonic() - scenario.fault_at
        jobs = self.db.derived_jobs(campaigns, "summary")
        scenario.notes.append(f"summary jobs {'settled' if settled else 'NOT settled'} {after:.1f} s after the fault: "
                              + "; ".join(f"#{pk} {state} (attempts {attempts})" + (f": {error[:120]}" if error else "")
                                          for pk, state, attempts, _, error in jobs))
        if not settled:
            scenario.problems.append(f"summary jobs not settled {after:.0f} s after the fault")
        elif after > SETTLE_SECONDS:
            scenario.problems.append(f"the summary jobs took {after:.0f} s to settle after the fault")
        memories = self.db.derived_jobs(campaigns, "memories")
        open_memories = [pk for pk, state, *_ in memories if state not in ("done", "failed")]
        if open_memories:
            wait_for(lambda: all(s in ("done", "failed") for _, s, *_ in self.db.derived_jobs(campaigns, "memories")),
                     timeout=max(0.0, scenario.fault_at + self.args.settle_limit - time.monotonic()), every=0.5)
        self.settle(scenario)
        return scenario

    # ------------------------------------------------------------ 4. Redis restarted

    def redis_restarted(self) -> Scenario:
        scenario = self.scenario("redis", "Redis killed (-9) mid-narration and started again on the same port")
        narrations = self.post_all(scenario)
        if self.wait_streaming(scenario, narrations):
            time.sleep(1.0)
        self.in_flight_note(scenario, narrations)
        keys = sorted(key.decode() for key in self.stack.redis().keys("*"))
        scenario.notes.append(f"Redis keys before: {', '.join(keys)}")
        self.fault(scenario, f"kill -9 redis-server on port {self.stack.redis_port}; it comes back empty")
        self.kill("redis")
        self.supervise("redis")
        self.settle(scenario)
        return scenario

    # ------------------------------------------------------------ 5. the queues deleted

    def queues_deleted(self) -> Scenario:
        scenario = self.scenario("queues", "the queues deleted while turns wait in them")
        self.kill("narrator", sig=signal.SIGTERM)  # gracefully: nothing runs, the messages will wait in the queue
        self.model.clear()
        narrations = [self.post(scenario, reader) for reader in scenario.readers]
        client = self.stack.redis()
        wait_for(lambda: client.llen("narration") >= len(narrations), timeout=5)
        keys = sorted(key.decode() for key in client.keys("*"))
        lengths = {name: client.llen(name) for name in ("narration", "celery")}
        self.in_flight_note(scenario, narrations)
        scenario.notes.append(f"Redis keys: {', '.join(keys)}; queue lengths {lengths}")
        if lengths["narration"] < len(narrations):
            scenario.problems.append(f"the turns' messages were not waiting in the narration queue: {lengths}")
        self.fault(scenario, "DEL narration celery on the stack's Redis (what redis-cli -p PORT DEL does)")
        deleted = client.delete("narration", "celery")
        scenario.notes.append(f"DEL narration celery removed {deleted} keys; the narrator starts again")
        self.start("narrator")
        self.settle(scenario)
        return scenario

    # ------------------------------------------------------------ 6. the model endpoint stopped mid-stream

    def model_stopped(self) -> Scenario:
        scenario = self.scenario("model", "model server killed mid-stream, started again, then Retry")
        narrations = self.post_all(scenario)
        if self.wait_streaming(scenario, narrations):
            time.sleep(1.0)
        self.in_flight_note(scenario, narrations)
        self.fault(scenario, "kill -9 the model server")
        self.kill("model")
        back_at = scenario.fault_at + self.args.model_down
        for narration in narrations:  # they should fail, and quickly, while the model is down
            narration.thread.join(timeout=max(0.0, back_at - time.monotonic()))
        time.sleep(max(0.0, back_at - time.monotonic()))
        self.start("model")
        scenario.notes.append(f"model server started again {time.monotonic() - scenario.fault_at:.1f} s after the fault")
        for narration in narrations:
            narration.thread.join(timeout=max(0.0, scenario.fault_at + 30 - time.monotonic()))
        for narration, reader in zip(narrations, scenario.readers, strict=True):
            if narration.status != "failed":
                scenario.problems.append(f"narration #{narration.action} ended {narration.status or 'unsettled'}, "
                                         "not failed, when the model server went away")
                continue
            if not narration.error:
                scenario.problems.append(f"narration #{narration.action} failed without a message for its reader")
            pressed = time.monotonic()
            try:
                path = reader.press_retry(narration.action)
            except Trouble as exc:
                scenario.problems.append(f"{reader.username}: {exc}")
                continue
            retry = Narration(scenario=scenario.key, reader=reader.username, campaign=reader.campaign,
                              action=narration.action, text="", posted=pressed, kind="retry")
            scenario.retries.append(retry)
            reader.follow(retry, path, until=pressed + self.args.settle_limit)
        self.settle(scenario)
        return scenario


SCENARIOS = {
    "narrator": Run.narrator_killed,
    "import": Run.worker_killed_mid_import,
    "summary": Run.worker_killed_mid_summary,
    "redis": Run.redis_restarted,
    "queues": Run.queues_deleted,
    "model": Run.model_stopped,
    "redisdown": outages.redis_stopped,
    "logins": outages.login_burst,
}


# ---------------------------------------------------------------- the run


def setup(stack: Stack, scenarios: list[str], run: str, *, burst: int) -> tuple[dict[str, list[Reader]], list[str], str]:
    """The readers of each scenario, logged in; the login burst's accounts and their password."""
    password = secrets.token_urlsafe(16)
    wanted = [(key, number, "small" if key == "summary" else "usual") for key in scenarios for number in range(READERS)]
    made = stack.shell(SETUP, {"readers": wanted, "password": password, "model_url": stack.model_url,
                               "small_budget": SMALL_BUDGET, "small_output": SMALL_OUTPUT,
                               "burst": burst if "logins" in scenarios else 0})
    stack.manage("calibrate_embeddings", "--model", "demo-embed", "--endpoint", str(made["profile"]))
    readers: dict[str, list[Reader]] = {key: [] for key in scenarios}
    for account in made["readers"]:
        readers[account["scenario"]].append(Reader(
            scenario=account["scenario"], number=account["number"], username=account["username"],
            password=password, campaign=account["campaign"], stack=stack, run=run))
    everyone = [reader for group in readers.values() for reader in group]
    failures = []

    pacer = LoginPacer()

    def log_in(reader: Reader) -> None:
        try:
            if not pacer.log_in(reader.log_in):
                failures.append(f"{reader.username}: still busy after {pacer.attempts} attempts")
        except Trouble as exc:
            failures.append(str(exc))

    threads = [threading.Thread(target=log_in, args=(r,), daemon=True) for r in everyone]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    if failures:
        raise StackError(f"readers could not log in: {failures}")
    say(f"{len(everyone)} readers logged in, a few at a time ({pacer.retries} tried again after a busy answer), "
        f"{READERS} per scenario, each with a campaign")
    return readers, made["burst"], password


def report(run: Run, scenarios: list[Scenario], checked: dict, started: float) -> int:
    failures = []
    print(flush=True)
    print(f"Loremaster faults: {len(scenarios)} scenarios, {READERS} readers each, "
          f"{time.monotonic() - started:.0f} s (limit {run.args.max_seconds:.0f} s); "
          f"supervisor restarts after {run.args.restart_after:g} s; Redis private on port {run.stack.redis_port}; "
          f"crashes the supervisor repaired: {len(run.crashes)}")
    print(f"{'scenario':<10} {'affected':>8} {'settled p50 s':>13} {'max s':>7}  outcomes")
    for scenario in scenarios:
        affected = scenario.affected()
        times = sorted(t for t in (n.settled_after(scenario.fault_at) for n in affected) if t is not None)
        outcomes = Counter(n.status or "unsettled" for n in affected)
        line = (f"{scenario.key:<10} {len(affected):>8} "
                + (f"{percentile(times, 50):>13.1f} {times[-1]:>7.1f}" if times else f"{'-':>13} {'-':>7}")
                + "  " + "; ".join(part for part in (
                    ", ".join(f"{status} {count}" for status, count in sorted(outcomes.items())), scenario.row_extra)
                    if part))
        if scenario.retries:
            retried = sorted(t for t in (n.settled_after(n.posted) for n in scenario.retries) if t is not None)
            line += (f"; after Retry: {', '.join(f'{s} {c}' for s, c in sorted(Counter(n.status or 'unsettled' for n in scenario.retries).items()))}"
                     + (f" in p50 {percentile(retried, 50):.1f} s, max {retried[-1]:.1f} s" if retried else ""))
        print(line)
    for scenario in scenarios:
        print(f"-- {scenario.key}: {scenario.title}")
        for note in scenario.notes:
            print(f"   {note}")
        for narration in scenario.narrations + scenario.retries:
            if narration in scenario.affected() or narration.kind != "turn":
                moment = narration.posted if narration.kind != "turn" else scenario.fault_at
                after = narration.settled_after(moment)
                since = {"turn": "fault", "retry": "Retry"}.get(narration.kind, "post")
                print(f"   {narration.kind} #{narration.action} ({narration.reader}): {narration.status or 'unsettled'}"
                      + (f" {after:.1f} s after the {since}" if after is not None else "")
                      + f"; streams {narration.streams}, restarted {narration.restarts}, reconnected {narration.reconnects}"
                      + (f"; status events: {' | '.join(narration.status_events)}" if narration.status_events else "")
                      + (f"; error shown: {narration.error}" if narration.error else ""))
        late = [n for n in scenario.affected() if _or_inf(n.settled_after(scenario.fault_at)) > SETTLE_SECONDS]
        late += [n for n in scenario.retries if _or_inf(n.settled_after(n.posted)) > SETTLE_SECONDS]
        for narration in late:
            scenario.problems.append(f"narration #{narration.action} ({narration.kind}) did not settle within "
                                     f"{SETTLE_SECONDS:.0f} s")
        if scenario.fault_at is not None and not scenario.affected():
            scenario.problems.append("the fault caught no narration in flight")
        for narration in scenario.narrations + scenario.retries:
            scenario.problems += narration.problems
        # Narrations may fail where the fault is the model's, or Redis's (with a message, the turn kept).
        failed = [n for n in scenario.narrations if n.status == "failed"]
        if scenario.key not in ("model", "redisdown"):
            scenario.problems += [f"narration #{n.action} failed: {n.error}" for n in failed]
        scenario.problems += [f"narration #{n.action} failed without a message" for n in failed if not n.error]
        scenario.problems += [f"{name} crashed (exit status {status}), the supervisor started it again: {why}"
                              for key, name, status, why in run.crashes if key == scenario.key]
        for problem in scenario.problems:
            print(f"   PROBLEM: {problem}")
        if scenario.problems:
            failures.append(f"{scenario.key}: {len(scenario.problems)} problems")
    print(f"database: {json.dumps(checked['counts'])}")
    for name, problems in checked["checks"].items():
        print(f"check: {name}: {'OK' if not problems else 'NO'}")
        for problem in problems:
            print(f"   {problem}")
        if problems:
            failures.append(name)
    every = [n for s in scenarios for n in s.affected()] + [n for s in scenarios for n in s.retries]
    slowest = max((_or_inf(n.settled_after(n.posted if n.kind == "retry" else s.fault_at))
                   for s in scenarios for n in s.affected() + s.retries), default=0.0)
    # The log-in burst alone has no narration in flight: nothing to settle.
    caught = every or all(s.key == "logins" for s in scenarios)
    verdict = "OK" if caught and slowest <= SETTLE_SECONDS else "NO"
    print(f"check: every narration a fault caught settled (done or failed) within {SETTLE_SECONDS:.0f} s, "
          f"with no page reload: {verdict} ({len(every)} narrations, slowest {slowest:.1f} s)")
    if verdict != "OK":
        failures.append("settling time")
    print(f"logs: {run.stack.work}")
    print(f"faults {'FAILED: ' + '; '.join(failures) if failures else 'passed'}", flush=True)
    return 1 if failures else 0


def last_critical(log) -> str:
    """The last CRITICAL or ERROR line's message in a process's log (JSON lines), for a crash report."""
    found = ""
    try:
        lines = log.read_text(errors="replace").splitlines()[-400:]
    except OSError:
        return ""
    for line in lines:
        if '"level": "CRITICAL"' in line or ('"level": "ERROR"' in line and not found):
            try:
                found = json.loads(line).get("message", line)[:300]
            except ValueError:
                found = line[:300]
    return found


def _or_inf(seconds: float | None) -> float:
    return math.inf if seconds is None else seconds


def run_faults(stack: Stack, args, started: float) -> int:
    run_id = secrets.token_hex(3)
    readers, burst, password = setup(stack, args.scenarios, run_id, burst=args.burst)
    run = Run(stack, args, readers)
    run.burst = (burst, password)
    run.watcher.start()
    done = []
    try:
        for key in args.scenarios:
            scenario_started = time.monotonic()
            try:
                scenario = SCENARIOS[key](run)
            except (Trouble, StackError, httpx.HTTPError) as exc:
                scenario = run.current if run.current and run.current.key == key else Scenario(
                    key=key, title="(stopped)", readers=readers[key])
                scenario.problems.append(f"the scenario stopped: {type(exc).__name__}: {exc}")
            done.append(scenario)
            say(f"scenario {key} took {time.monotonic() - scenario_started:.0f} s")
            # The next fault starts from a whole stack, as after any supervisor's restart, and
            # a few quiet seconds: a process dying of this fault should do so before the next.
            time.sleep(args.quiet)
            ready = wait_for(lambda: (stack.readiness() or {}).get("status") == "ready", timeout=60, every=0.5)
            if not ready:
                scenario.problems.append(f"the stack was not ready again within 60 s: {stack.readiness()}")
        run.watching.set()
        run.watcher.join(timeout=30)
        checked = stack.shell(CHECK, {"turns": run.turns, "may_fail": run.may_fail, "refused": run.refused,
                                      "campaigns": [r.campaign for g in readers.values() for r in g]})
        return report(run, done, checked, started)
    finally:
        run.watching.set()
        run.db.close()
        for group in readers.values():
            for reader in group:
                reader.client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bin/faults", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS),
                        help=f"which, in order, comma-separated (default: all: {','.join(SCENARIOS)})")
    parser.add_argument("--restart-after", type=float, default=1.0, metavar="SECONDS",
                        help="how long the supervisor waits before it starts a killed process again")
    parser.add_argument("--model-down", type=float, default=4.0, metavar="SECONDS",
                        help="how long the model server stays down in the model scenario")
    parser.add_argument("--settle-limit", type=float, default=90.0, metavar="SECONDS",
                        help="how long a scenario waits for its work to settle before it counts as stuck")
    parser.add_argument("--lore-paragraphs", type=int, default=2500,
                        help="paragraphs in each lore file of the import scenario (about 800 bytes each)")
    parser.add_argument("--warmup-turns", type=int, default=10,
                        help="the most turns a summary reader plays before its first summary is due")
    parser.add_argument("--quiet", type=float, default=3.0, metavar="SECONDS",
                        help="the pause between one scenario's end and the next's start")
    parser.add_argument("--redis-down", type=float, default=30.0, metavar="SECONDS",
                        help="how long Redis stays stopped in the redisdown scenario")
    parser.add_argument("--burst", type=int, default=50, help="log-ins at once in the logins scenario")
    parser.add_argument("--max-seconds", type=float, default=900, help="hard limit on the whole run, setup included")
    args = parser.parse_args(argv)
    args.scenarios = [key.strip() for key in args.scenarios.split(",") if key.strip()]
    unknown = [key for key in args.scenarios if key not in SCENARIOS]
    if unknown or not args.scenarios:
        parser.error(f"unknown scenarios {unknown}; choose from {', '.join(SCENARIOS)}")

    exit_on_sigterm()
    started = time.monotonic()

    def out_of_time(signum, frame):
        raise SystemExit("bin/faults: the hard time limit was reached; cleaning up")

    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(int(args.max_seconds))
    try:
        with Stack(label="faults", private_redis=True) as stack:
            return run_faults(stack, args, started)
    except StackError as exc:
        print(f"bin/faults: {exc}", file=sys.stderr)
        return 2
    finally:
        signal.alarm(0)


if __name__ == "__main__":
    sys.exit(main())

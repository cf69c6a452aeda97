"""The shared-play profile of bin/load (issue 27): groups playing one story each.

`bin/load --profile shared-play` brings up the same hosted stack as the
readers profile (scripts.procs.Stack: the Procfile's web, worker and
narrator on a fresh PostgreSQL database and a Redis db of their own, the
scripted demo model on loopback). Then:

1. Setup, through the ORM: `--campaigns` campaigns (5) in free turn order,
   each with its owner, the game master, and `--players` players (4), each
   in a seat of their own, invited as the invitation page does
   (storyapp.members.invite). The game master follows the story and
   directs; the players act.
2. Every member logs in (a few at a time, scripts.procs.LoginPacer), opens
   the play page and holds the campaign's event stream open from the
   page's position in the log (`?after=`, then Last-Event-ID on a
   reconnect), as static/js/live.js does; a changed story is fetched again
   (the story partial, one request at a time, as live.js coalesces them).
3. For `--seconds` (60) each player sends an action through the page's form
   (POST turn/ with HX-Request and CSRF) every 3 to 8 s, at random: a
   person typing a line, not a script. Actions sent while a narration is
   written wait their place (storyapp.turnorder) and are narrated in order.
4. After the clock, the streams stay open until every action is narrated
   (or `--grace` runs out), then the database is checked: every action the
   server accepted is exactly one player action with its typed text,
   attributed to the member and their seat, with one narration done under
   it; none is still waiting; nothing is in flight.
5. Latency: each member's stream records when each event arrives; the
   event's `created` (the web or worker process's clock, on this machine)
   is read after the run, and the difference is the time from the change
   being stored to the member's page hearing of it. Every event a member
   may see must reach them.

Errors: a 5xx, an unexpected status, a connection error, a stream that
ended or failed without the server asking for a reconnect, an action
refused in free play. A 429 (a quota) is a deliberate limit, counted apart,
as is a stream the server ends asking the page to come back later (a busy
database pool). PASS needs 0 errors, every action exactly once, every event
received, and the events' p95 at or under `--event-p95-ms` (1000).
"""

from __future__ import annotations

import random
import re
import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from scripts.load import PAGE_TIMEOUT, Recorder, _snippet, cpu_usage, percentile, print_cpu
from scripts.procs import BUSY_STATUSES, LoginPacer, Stack, say

#: A page's event stream is silent for 15 s at most (its keep-alive); 30 s without a byte is dead.
STREAM_TIMEOUT = httpx.Timeout(30, connect=5)
#: Seconds between a player's actions: a person reading the story, then typing a line.
ACT_EVERY = (3.0, 8.0)
#: The reconnect delay every event stream opens with (views.events).
FIRST_RETRY_MS = 1000
PAGES = ("login page", "login", "play", "turn submit", "play (story partial)")

SETUP = """
import json, os
from django.contrib.auth import get_user_model
from storyapp import demo, members
from storyapp.models import Campaign
from endpoints.models import EndpointProfile

spec = json.load(open(os.environ["STACK_INPUT"]))
profile = EndpointProfile.objects.create(
    name="Load: scripted demo", base_url=spec["model_url"], chat_model="demo-narrator",
    embedding_model="demo-embed", is_scripted_demo=True, is_default=True,
)
make = get_user_model().objects.create_user
campaigns = []
for number in range(spec["campaigns"]):
    owner = f"load-gm-{number:02d}"
    make(username=owner, password=spec["password"])
    campaign = demo.ensure_campaign(owner)
    campaign.endpoint = profile
    campaign.title = f"The Salt Road (table {number:02d})"
    campaign.turn_mode = Campaign.TurnMode.FREE
    campaign.save()
    seated = [{"username": owner, "seat": "", "role": "gm"}]
    for seat in range(spec["players"]):
        username = f"load-t{number:02d}-p{seat}"
        make(username=username, password=spec["password"])
        name = f"Seat {seat} of table {number:02d}"
        members.invite(campaign=campaign, username=username, role="player", seat_name=name,
                       seat_description="A traveller on the salt road.")
        seated.append({"username": username, "seat": name, "role": "player"})
    campaigns.append({"campaign": campaign.pk, "members": seated})
print(json.dumps({"profile": profile.pk, "campaigns": campaigns}))
"""

#: Narrated yet? What waits or streams in the load's campaigns.
BACKLOG = """
import json, os
from storyapp.models import Action, WaitingTurn
spec = json.load(open(os.environ["STACK_INPUT"]))
waiting = WaitingTurn.objects.filter(campaign_id__in=spec["campaigns"]).count()
flying = Action.objects.filter(campaign_id__in=spec["campaigns"], status__in=["pending", "streaming"]).count()
print(json.dumps({"waiting": waiting, "in_flight": flying}))
"""

CHECK = """
import json, os
from django.db.models import Count
from storyapp.models import Action, CampaignEvent, WaitingTurn

spec = json.load(open(os.environ["STACK_INPUT"]))
problems = []
for campaign, username, seat, text in spec["turns"]:
    found = list(Action.objects.filter(campaign_id=campaign, kind="player", text=text)
                 .values_list("pk", "author__username", "seat_name"))
    if len(found) != 1:
        problems.append(f"campaign {campaign}: {len(found)} player actions for {text!r}")
        continue
    pk, author, stored_seat = found[0]
    if (author, stored_seat) != (username, seat):
        problems.append(f"campaign {campaign}: action #{pk} is {author!r} in seat {stored_seat!r}, "
                        f"sent by {username!r} in seat {seat!r}")
    narrations = list(Action.objects.filter(parent_id=pk, kind="ai").values_list("status", "text"))
    if len(narrations) != 1 or narrations[0][0] != "done" or not narrations[0][1].strip():
        shown = [(status, len(text)) for status, text in narrations]
        problems.append(f"campaign {campaign}: action #{pk} has narrations (status, length) {shown}")
campaigns = spec["campaigns"]
players = Action.objects.filter(campaign_id__in=campaigns, kind="player").count()
in_flight = Action.objects.filter(campaign_id__in=campaigns, status__in=["pending", "streaming"]).count()
waiting = WaitingTurn.objects.filter(campaign_id__in=campaigns).count()
by_status = dict(Action.objects.filter(campaign_id__in=campaigns, kind="ai").values_list("status").annotate(n=Count("id")))
events = [[pk, campaign, audience, created.timestamp()] for pk, campaign, audience, created in
          CampaignEvent.objects.filter(campaign_id__in=campaigns).values_list("pk", "campaign_id", "audience", "created")]
print(json.dumps({"problems": problems, "players": players, "in_flight": in_flight, "waiting": waiting,
                  "narrations": by_status, "events": events}))
"""


class Failed(Exception):
    """This request went wrong; the error is already recorded."""


@dataclass
class Heard:
    """What one member's event stream received: event id -> wall-clock time,
    and what the member may see (the game master every event, a player
    those for everyone and for their seat)."""

    name: str
    campaign: int
    seat: str = ""
    game_master: bool = False
    after: int = 0
    at: dict[int, float] = field(default_factory=dict)
    connects: int = 0


class Member:
    """One member's browser: a thread acting (players) and fetching the story
    when it changed, and a thread holding the event stream open."""

    def __init__(self, *, username: str, seat: str, role: str, campaign: int, password: str, stack: Stack,
                 recorder: Recorder, run: str, rng: random.Random):
        self.username, self.seat, self.role, self.campaign = username, seat, role, campaign
        self.password = password
        self.recorder = recorder
        self.run = run
        self.rng = rng
        self.https = stack.https
        self.play_url = f"/campaigns/{campaign}/"
        self.heard = Heard(name=self.name, campaign=campaign, seat=seat, game_master=role == "gm")
        self.turn = 0
        self.wanted = threading.Event()
        self.listening = threading.Event()
        self.stopping = threading.Event()
        options = {"base_url": stack.base_url, "follow_redirects": False,
                   "headers": {"Origin": stack.origin, "Referer": stack.origin + "/", **stack.proxy_headers()}}
        self.client = httpx.Client(timeout=PAGE_TIMEOUT, **options)
        self.options = options

    @property
    def name(self) -> str:
        return f"{self.username} (campaign {self.campaign})"

    # ------------------------------------------------------------ HTTP

    def call(self, page: str, method: str, path: str, *, expect: tuple[int, ...] = (200,), **kwargs) -> httpx.Response:
        self.recorder.take_request()
        started = time.perf_counter()
        try:
            response = self.client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            self.recorder.error(page, f"{self.username}: {method} {path}: {type(exc).__name__}: {exc}")
            raise Failed from exc
        if self.https:
            for cookie in self.client.cookies.jar:
                cookie.secure = False
        if response.status_code == 429:
            self.recorder.limit(page, f"{self.username}: {method} {path} -> 429")
            raise Failed
        if response.status_code not in expect:
            self.recorder.error(page, f"{self.username}: {method} {path} -> {response.status_code}: "
                                f"{_snippet(response.text)}")
            raise Failed
        self.recorder.sample(page, (time.perf_counter() - started) * 1000)
        return response

    def log_in(self) -> bool:
        page = self.call("login page", "GET", "/accounts/login/", expect=(200, *BUSY_STATUSES))
        if page.status_code in BUSY_STATUSES:
            return False
        response = self.call("login", "POST", "/accounts/login/", expect=(302, *BUSY_STATUSES), data={
            "username": self.username, "password": self.password,
            "csrfmiddlewaretoken": self.client.cookies["csrftoken"]})
        if response.status_code in BUSY_STATUSES:
            return False
        if "/accounts/login/" in response.headers.get("location", ""):
            self.recorder.error("login", f"{self.username} was refused")
            raise Failed
        return True

    def open_page(self) -> None:
        """The play page, and where in the log it stands (live.js reads data-after)."""
        page = self.call("play", "GET", self.play_url).text
        found = re.search(r'id="live"[^>]*data-after="(\d+)"', page)
        if not found:
            self.recorder.error("play", f"{self.username}: the play page has no live events position")
            raise Failed
        self.heard.after = int(found.group(1))

    # ------------------------------------------------------------ the page's event stream

    def listen(self) -> None:
        """The EventSource: open, read, and reconnect from the last id when the server ends it."""
        last = self.heard.after
        client = httpx.Client(timeout=STREAM_TIMEOUT, cookies=self.client.cookies, **self.options)
        try:
            while not self.stopping.is_set():
                self.recorder.take_request()
                asked_back = False
                self.heard.connects += 1
                headers = {"Accept": "text/event-stream"}
                if self.heard.connects > 1:
                    headers["Last-Event-ID"] = str(last)
                try:
                    with client.stream("GET", f"{self.play_url}events/", params={"after": self.heard.after},
                                       headers=headers) as response:
                        if response.status_code != 200:
                            self.recorder.error("events", f"{self.username}: events -> {response.status_code}")
                            return
                        self.listening.set()
                        event = event_id = None
                        for line in response.iter_lines():
                            if line.startswith("event: "):
                                event = line[len("event: "):]
                            elif line.startswith("id: "):
                                event_id = int(line[len("id: "):])
                            elif line.startswith("retry: "):
                                # The first says how soon to reconnect; a longer one later, "come back later".
                                asked_back = int(line[len("retry: "):]) > FIRST_RETRY_MS
                            elif line == "" and event is not None:
                                if event == "change" and event_id is not None:
                                    self.heard.at.setdefault(event_id, time.time())
                                    last = max(last, event_id)
                                    self.wanted.set()
                                event = event_id = None
                            if self.stopping.is_set():
                                return
                except httpx.HTTPError as exc:
                    if self.stopping.is_set():
                        return
                    self.recorder.error("events", f"{self.username}: the stream failed: {type(exc).__name__}: {exc}")
                    time.sleep(1)
                    continue
                if self.stopping.is_set():
                    return
                if asked_back:
                    self.recorder.limit("events", f"{self.username}: the server asked the stream to come back later")
                    time.sleep(2)
                # The stream ends on its own after EVENTS_MAX_SECONDS; the browser reconnects.
        finally:
            client.close()

    # ------------------------------------------------------------ the page's actions

    def act(self) -> None:
        self.turn += 1
        marker = f"shared {self.run} {self.username} action {self.turn:04d}"
        text = f"I look along the quay for the harbourmaster. [{marker}]"
        response = self.call("turn submit", "POST", f"{self.play_url}turn/", headers={"HX-Request": "true"},
                             data={"text": text, "csrfmiddlewaretoken": self.client.cookies["csrftoken"]})
        if "turn-accepted" not in response.headers.get("HX-Trigger", ""):
            refusal = re.search(r'<p class="error" role="alert">(.*?)</p>', response.text, re.DOTALL)
            self.recorder.error("turn submit", f"{self.username}: refused in free play: "
                                f"{refusal.group(1).strip() if refusal else _snippet(response.text)}")
            with self.recorder.lock:
                self.recorder.refused.append((self.campaign, text))
            raise Failed
        with self.recorder.lock:
            self.recorder.turns.append((self.campaign, self.username, self.seat, text))
        self.wanted.clear()  # the answer is the story as it stands

    def refresh(self) -> None:
        """live.js: the story changed elsewhere, so #story is fetched again."""
        self.wanted.clear()
        self.call("play (story partial)", "GET", self.play_url, headers={"HX-Request": "true"})

    def play(self, *, start: threading.Barrier, clock: dict, pacer: LoginPacer) -> None:
        ready = False
        try:
            if not pacer.log_in(self.log_in):
                self.recorder.error("login", f"{self.username}: still busy after {pacer.attempts} attempts")
            else:
                self.open_page()
                threading.Thread(target=self.listen, name=f"{self.username} events", daemon=True).start()
                ready = self.listening.wait(30)
                if not ready:
                    self.recorder.error("events", f"{self.username}: the event stream did not open")
        except Failed:
            pass
        try:
            start.wait()
        except threading.BrokenBarrierError:
            self.recorder.error("login", f"{self.username}: the other members did not all get ready")
            return
        next_act = time.monotonic() + self.rng.uniform(*ACT_EVERY) if self.role == "player" else float("inf")
        while ready and not self.stopping.is_set():
            try:
                if time.monotonic() >= next_act and time.monotonic() < clock["end"]:
                    next_act = time.monotonic() + self.rng.uniform(*ACT_EVERY)
                    self.act()
                elif self.wanted.is_set():
                    self.refresh()
                else:
                    self.wanted.wait(0.1)
            except Failed:
                time.sleep(1)
            except Exception as exc:  # noqa: BLE001 - a member that dies is an error of the run, not a silent stop
                self.recorder.error("member", f"{self.username} stopped: {type(exc).__name__}: {exc}")
                return

    def close(self) -> None:
        self.stopping.set()
        self.client.close()


# ---------------------------------------------------------------- the run


def run_shared(stack: Stack, args) -> int:
    password = secrets.token_urlsafe(16)
    made = stack.shell(SETUP, {"campaigns": args.campaigns, "players": args.players, "password": password,
                               "model_url": stack.model_url})
    say(f"made {args.campaigns} campaigns, each with a game master and {args.players} players, "
        f"on endpoint profile #{made['profile']}")
    recorder = Recorder(max_requests=args.max_requests)
    run = secrets.token_hex(3)
    rng = random.Random(run)
    members = [Member(username=m["username"], seat=m["seat"], role=m["role"], campaign=c["campaign"],
                      password=password, stack=stack, recorder=recorder, run=run, rng=random.Random(rng.random()))
               for c in made["campaigns"] for m in c["members"]]
    campaigns = [c["campaign"] for c in made["campaigns"]]
    try:
        return _play(stack, args, recorder, members, campaigns)
    finally:
        for member in members:
            member.close()


def _play(stack: Stack, args, recorder: Recorder, members: list[Member], campaigns: list[int]) -> int:
    clock = {"end": float("inf")}

    usage = {}

    def release() -> None:
        usage["before"] = cpu_usage(stack)
        clock["start"] = time.monotonic()
        clock["end"] = clock["start"] + args.seconds
        recorder.measuring = True

    start = threading.Barrier(len(members), action=release, timeout=300)
    pacer = LoginPacer()
    threads = [threading.Thread(target=m.play, kwargs={"start": start, "clock": clock, "pacer": pacer},
                                name=m.username, daemon=True) for m in members]
    say(f"{len(members)} members log in and open their pages, then play for {args.seconds:g} s")
    with stack.sampler(every=0.5) as sampler:
        for thread in threads:
            thread.start()
        while "start" not in clock and any(thread.is_alive() for thread in threads):
            time.sleep(0.1)
        time.sleep(max(0.0, clock["end"] - time.monotonic()))
        played = time.monotonic() - clock.get("start", time.monotonic())
        usage["after"] = cpu_usage(stack)
        # The actions still waiting are narrated in order; the pages keep listening meanwhile.
        deadline = time.monotonic() + args.grace
        backlog = {}
        while time.monotonic() < deadline:
            backlog = stack.shell(BACKLOG, {"campaigns": campaigns})
            if not backlog["waiting"] and not backlog["in_flight"]:
                break
            time.sleep(1)
        drained = time.monotonic() - clock.get("end", time.monotonic())
        time.sleep(2)  # the last events reach the pages
        for member in members:
            member.stopping.set()
        for thread in threads:
            thread.join(timeout=10)
    if backlog.get("waiting") or backlog.get("in_flight"):
        recorder.error("hard limit", f"still {backlog['waiting']} waiting and {backlog['in_flight']} in flight "
                       f"{args.grace:g} s after the end")
    checked = stack.shell(CHECK, {"turns": recorder.turns, "campaigns": campaigns})
    return report(stack, args, recorder, sampler, members, checked, played=played, drained=drained, usage=usage)


def latencies(pages: list[Heard], events: list[list]) -> tuple[list[float], list[str]]:
    """Milliseconds from each event's creation (events: id, campaign,
    audience, created as a timestamp) to each page's stream receiving it,
    and the events a page should have received but did not."""
    samples, missing = [], []
    for page in pages:
        for pk, campaign, audience, created in events:
            if campaign != page.campaign or pk <= page.after:
                continue
            if not page.game_master and audience not in ("", page.seat):
                continue
            heard = page.at.get(pk)
            if heard is None:
                missing.append(f"{page.name} never received event #{pk}")
            else:
                samples.append(max(0.0, heard - created) * 1000)
    return samples, missing


def report(stack: Stack, args, recorder: Recorder, sampler, members: list[Member], checked: dict, *,
           played: float, drained: float, usage: dict) -> int:
    failures = []
    print(flush=True)
    players = sum(m.role == "player" for m in members)
    print(f"Loremaster load, shared play: {args.campaigns} campaigns x (1 game master + {args.players} players) "
          f"= {len(members)} members, {players} acting, for {args.seconds:.0f} s "
          f"(measured {played:.1f} s; the last actions narrated {drained:.1f} s after)")
    print(f"requests: {recorder.measured_requests} measured; errors {len(recorder.errors)}; "
          f"refused by a deliberate limit {len(recorder.limited)}; "
          f"event stream connections {sum(m.heard.connects for m in members)} for {len(members)} pages")
    print(f"{'page':<22} {'count':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for page in PAGES:
        ordered = sorted(recorder.samples.get(page, []))
        if ordered:
            print(f"{page:<22} {len(ordered):>6} {percentile(ordered, 50):>8.0f} {percentile(ordered, 95):>8.0f} "
                  f"{percentile(ordered, 99):>8.0f} {ordered[-1]:>8.0f}")
        else:
            print(f"{page:<22} {0:>6}")
    print(f"PostgreSQL connections to {stack.database}: peak {sampler.peak}, mean {sampler.mean:.1f} "
          f"(max_connections {stack.max_connections()})")
    if "before" in usage:
        print_cpu(usage["before"], usage["after"], played)
    if recorder.errors:
        failures.append(f"{len(recorder.errors)} errors")
        print("errors by page: " + ", ".join(f"{page} {count}" for page, count in
                                             Counter(page for page, _ in recorder.errors).most_common()))
        for page, what in recorder.errors[:20]:
            print(f"  error: {page}: {what}")
    for page, what in recorder.limited[:5]:
        print(f"  limit: {page}: {what}")

    print(f"actions: {len(recorder.turns)} accepted, {len(recorder.refused)} refused; stored: {checked['players']} "
          f"player actions; narrations by status {checked['narrations']}; still waiting {checked['waiting']}, "
          f"in flight {checked['in_flight']}")
    for problem in checked["problems"][:20]:
        print(f"  {problem}")
    once = (not checked["problems"] and checked["players"] == len(recorder.turns)
            and not checked["waiting"] and not checked["in_flight"])
    print(f"every accepted action stored exactly once, by its seat, narrated once: {'OK' if once else 'NO'}")
    if not once:
        failures.append("actions not stored exactly once")
    if not recorder.turns:
        failures.append("no action was accepted")

    samples, missing = latencies([m.heard for m in members], checked["events"])
    samples.sort()
    if samples:
        p95 = percentile(samples, 95)
        print(f"events to pages: {len(samples)} deliveries of {len(checked['events'])} events; median "
              f"{percentile(samples, 50):.0f} ms, p95 {p95:.0f} ms, max {samples[-1]:.0f} ms "
              f"(target p95 <= {args.event_p95_ms:.0f} ms)")
        if p95 > args.event_p95_ms:
            failures.append(f"events p95 {p95:.0f} ms")
    else:
        failures.append("no event reached a page")
    if missing:
        failures.append(f"{len(missing)} events never reached a page")
        for what in missing[:10]:
            print(f"  {what}")
    print(f"logs: {stack.work}")
    print(f"shared play: {'FAIL: ' + '; '.join(failures) if failures else 'PASS'} "
          f"(targets: 0 errors, every action exactly once, every event received, "
          f"p95 <= {args.event_p95_ms:.0f} ms)", flush=True)
    return 1 if failures else 0

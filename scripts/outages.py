"""Two faults of bin/faults measured as readers see them (issue 23): Redis
stopped for a while under load, and a burst of log-ins.

Their own module because they measure pages, not only narrations: readers
keep reading and playing through the fault, and what counts is every page
they were answered (a 5xx or no answer is an error), every turn they sent
(accepted, or refused with a message; a bare error is a problem), and,
after the fault, that each narration settles as its page follows it,
without a reload. Each returns its `faults.Scenario` with a row for the
table; they use the run's readers, model script and processes
(`faults.Run`), which they are handed.
"""

from __future__ import annotations

import html
import math
import re
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx

from scripts.procs import Trouble, say

if TYPE_CHECKING:
    from scripts.faults import Reader, Run, Scenario

#: The issue's bound for the burst: readers already playing keep a p95 within this factor of the quiet one.
BURST_SLOWDOWN = 2.0
#: Seconds the playing readers' pages are timed before the burst, for the quiet figure.
QUIET_SECONDS = 8.0
#: Seconds between a playing reader's pages (a quick reader).
READ_EVERY = 0.5
PAGE_TIMEOUT = httpx.Timeout(30, connect=5)


#: Every status: a page's answer is judged here, not refused by `Reader.request`.
ANY_STATUS = tuple(range(100, 600))


def percentile(ordered: list[float], p: float) -> float:
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


@dataclass
class Pages:
    """What the readers were answered while a fault lasted, shared between their threads."""

    times: list[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self, reader: Reader, label: str, path: str, **kwargs) -> str | None:
        """One page, timed; a 5xx or no answer is an error. Its text, or None."""
        started = time.monotonic()
        try:
            response = reader.request("GET", path, expect=ANY_STATUS, **kwargs)
        except Trouble as exc:
            with self.lock:
                self.errors.append(f"{reader.username} {label}: {str(exc)[:120]}")
            return None
        with self.lock:
            self.times.append((time.monotonic() - started) * 1000)
            self.statuses[response.status_code] += 1
            if response.status_code >= 500:
                self.errors.append(f"{reader.username} {label} -> {response.status_code}")
        return response.text if response.status_code == 200 else None

    def summary(self) -> str:
        ordered = sorted(self.times)
        p95 = f", p95 {percentile(ordered, 95):.0f} ms" if ordered else ""
        shown = ", ".join(f"{status} x{count}" for status, count in sorted(self.statuses.items()))
        return f"{sum(self.statuses.values())} pages ({shown}){p95}, {len(self.errors)} errors"


def keep_reading(reader: Reader, pages: Pages, until: float) -> None:
    """A reader reading while the fault lasts: the play page, the story partial, the list, the library."""
    play = reader.play
    views = (("play", play, {}), ("story", play, {"headers": {"HX-Request": "true"}}),
             ("campaign list", "/campaigns/", {}), ("library", f"{play}library/", {}))
    number = 0
    while time.monotonic() < until:
        label, path, kwargs = views[number % len(views)]
        pages.read(reader, label, path, **kwargs)
        number += 1
        time.sleep(READ_EVERY)


def try_turn(run: Run, scenario: Scenario, reader: Reader, outcomes: Counter) -> None:
    """A turn sent while the fault lasts: accepted (followed, and it may end
    failed with a message), refused with a message (never stored), or a
    bare error, which is a problem."""
    text = reader.next_text()
    posted = time.monotonic()
    try:
        response = reader.request("POST", f"{reader.play}turn/", expect=ANY_STATUS, headers={"HX-Request": "true"},
                                  data={"text": text, "csrfmiddlewaretoken": reader.csrf()})
    except (Trouble, KeyError) as exc:
        outcomes["no answer"] += 1
        scenario.problems.append(f"{reader.username}: a turn got no answer: {str(exc)[:120]}")
        run.refused.append((reader.campaign, text))
        return
    if "turn-accepted" in response.headers.get("HX-Trigger", ""):
        match = re.search(rf'sse-connect="({reader.play}actions/(\d+)/stream/[^"]*)"', response.text)
        if match is None:
            outcomes["accepted, no stream"] += 1
            scenario.problems.append(f"{reader.username}: a turn was accepted with no stream in the story")
            return
        outcomes["accepted"] += 1
        with run.lock:
            run.may_fail.append((reader.campaign, text))
        run.track(scenario, reader, text=text, action=int(match.group(2)), path=html.unescape(match.group(1)),
                  posted=posted, kind="outage turn")
        return
    message = re.search(r'<p class="error" role="alert">(.*?)</p>', response.text, re.DOTALL)
    run.refused.append((reader.campaign, text))
    if message and response.status_code < 500:
        outcomes["refused with a message"] += 1
        scenario.notes.append(f"{reader.username}: a turn refused ({response.status_code}): {message.group(1).strip()[:160]}")
    else:
        outcomes[f"bare {response.status_code}"] += 1
        scenario.problems.append(f"{reader.username}: a turn got a bare {response.status_code}")


def redis_stopped(run: Run) -> Scenario:
    """Redis stopped (TERM) for `--redis-down` seconds while the readers read
    and send turns, then started again (empty); every narration in flight or
    accepted meanwhile must settle as its page follows it."""
    down = run.args.redis_down
    scenario = run.scenario("redisdown", f"Redis stopped for {down:g} s under load, then started again")
    narrations = run.post_all(scenario)
    if run.wait_streaming(scenario, narrations):
        time.sleep(1.0)
    run.in_flight_note(scenario, narrations)
    run.fault(scenario, f"redis-server on port {run.stack.redis_port} stopped (TERM) for {down:g} s")
    run.kill("redis", sig=signal.SIGTERM)
    pages, outcomes = Pages(), Counter()
    until = scenario.fault_at + down
    readers = [threading.Thread(target=keep_reading, args=(r, pages, until), daemon=True) for r in scenario.readers]
    for thread in readers:
        thread.start()
    time.sleep(down / 3)
    for reader in scenario.readers:
        try_turn(run, scenario, reader, outcomes)
    for thread in readers:
        thread.join(timeout=max(0.0, until - time.monotonic()) + 35)
    time.sleep(max(0.0, until - time.monotonic()))
    run.start("redis")
    back = time.monotonic()
    scenario.notes.append(f"while Redis was down: {pages.summary()}; turns: "
                          + (", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())) or "none"))
    scenario.problems += [f"while Redis was down: {error}" for error in pages.errors[:10]]
    if len(pages.errors) > 10:
        scenario.problems.append(f"... and {len(pages.errors) - 10} more page errors while Redis was down")
    run.settle(scenario)
    after = [n for n in scenario.narrations if n.kind == "outage turn"]
    late = [n for n in after if n.settled is None or n.settled - back > run.args.settle_limit]
    scenario.problems += [f"turn #{n.action}, sent while Redis was down, had not settled after it came back" for n in late]
    settled = sorted(n.settled - back for n in after if n.settled is not None)
    scenario.row_extra = (f"while down: {pages.summary()}; turns " + (", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())) or "none")
                          + (f"; those settled {settled[-1]:.1f} s after Redis was back at the latest" if settled else ""))
    return scenario


def _time_plays(readers: list[Reader], pages: Pages, until: float | threading.Event) -> None:
    def read(reader: Reader) -> None:
        while not (until.is_set() if isinstance(until, threading.Event) else time.monotonic() >= until):
            pages.read(reader, "play", reader.play)
            time.sleep(READ_EVERY)

    threads = [threading.Thread(target=read, args=(r,), daemon=True) for r in readers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)


def _burst_login(run: Run, username: str, password: str, ready: threading.Barrier, results: list) -> None:
    """One browser of the burst: the login page, then, with all the others
    at once, the POST; (username, seconds or None, "" or what went wrong)."""
    stack = run.stack
    with httpx.Client(base_url=stack.base_url, timeout=PAGE_TIMEOUT, follow_redirects=False,
                      headers={"Origin": stack.origin, "Referer": stack.origin + "/accounts/login/",
                               **stack.proxy_headers()}) as client:
        try:
            client.get("/accounts/login/")
            problem = "" if "csrftoken" in client.cookies else "no CSRF cookie from the login page"
        except httpx.HTTPError as exc:
            problem = f"login page: {type(exc).__name__}"
        for cookie in client.cookies.jar:  # the proxy would carry the secure cookies over TLS
            cookie.secure = False
        try:
            ready.wait(timeout=60)
        except threading.BrokenBarrierError:
            pass
        if problem:
            results.append((username, None, problem))
            return
        started = time.monotonic()
        try:
            response = client.post("/accounts/login/", data={"username": username, "password": password,
                                                             "csrfmiddlewaretoken": client.cookies["csrftoken"]})
        except httpx.HTTPError as exc:
            results.append((username, time.monotonic() - started, type(exc).__name__))
            return
        ok = response.status_code == 302 and "/accounts/login/" not in response.headers.get("location", "")
        results.append((username, time.monotonic() - started, "" if ok else str(response.status_code)))


def login_burst(run: Run) -> Scenario:
    """`--burst` accounts log in at the same moment while the scenario's
    readers read their play pages: the burst's errors, and the readers' p95
    during the burst against the quiet one before it."""
    usernames, password = run.burst
    scenario = run.scenario("logins", f"a burst of {len(usernames)} log-ins at once while readers read")
    run.faulted = scenario
    quiet = Pages()
    _time_plays(scenario.readers, quiet, time.monotonic() + QUIET_SECONDS)
    results: list = []
    ready = threading.Barrier(len(usernames) + 1)
    burst = [threading.Thread(target=_burst_login, args=(run, name, password, ready, results), daemon=True)
             for name in usernames]
    for thread in burst:
        thread.start()
    try:
        ready.wait(timeout=60)
    except threading.BrokenBarrierError:
        scenario.problems.append("the burst's browsers were not all at the login page within 60 s")
    say(f"FAULT (logins): {len(usernames)} log-ins at once")
    during, over = Pages(), threading.Event()
    timer = threading.Thread(target=_time_plays, args=(scenario.readers, during, over), daemon=True)
    timer.start()
    for thread in burst:
        thread.join(timeout=90)
    over.set()
    timer.join(timeout=30)
    errors = [(name, why) for name, _, why in results if why]
    times = sorted(elapsed for _, elapsed, why in results if elapsed is not None and not why)
    quiet_p95 = percentile(sorted(quiet.times), 95) if quiet.times else None
    burst_p95 = percentile(sorted(during.times), 95) if during.times else None
    scenario.notes.append(f"quiet, before: {quiet.summary()}; during the burst: {during.summary()}")
    scenario.notes += [f"{name}: {why}" for name, why in errors[:10]]
    if errors:
        scenario.problems.append(f"{len(errors)} of {len(usernames)} log-ins failed: "
                                 + ", ".join(f"{why} x{n}" for why, n in Counter(w for _, w in errors).most_common()))
    scenario.problems += [f"a playing reader's page during the burst: {error}" for error in during.errors[:10]]
    slowdown = burst_p95 / quiet_p95 if quiet_p95 and burst_p95 is not None else None
    if slowdown is not None and slowdown > BURST_SLOWDOWN:
        scenario.problems.append(f"the playing readers' p95 went from {quiet_p95:.0f} ms to {burst_p95:.0f} ms "
                                 f"in the burst ({slowdown:.1f}x, at most {BURST_SLOWDOWN:g}x)")
    login_figures = (f"log-ins p50 {percentile(times, 50):.1f} s, max {times[-1]:.1f} s" if times else "no log-in went through")
    scenario.row_extra = (f"{len(usernames)} log-ins: ok {len(times)}, errors {len(errors)}; {login_figures}; "
                          f"readers' play p95 quiet {quiet_p95 or 0:.0f} ms, in the burst {burst_p95 or 0:.0f} ms"
                          + (f" ({slowdown:.1f}x)" if slowdown is not None else ""))
    return scenario

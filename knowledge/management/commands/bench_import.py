"""Import throughput and worker memory, measured on this machine.

1. Lexical: a generated Markdown file of --megabytes goes from upload to
   `ready` in-process (chunk, count, write passages and the lexical index);
   MB/s over the whole of it, and the chunking alone.
2. Embedding: a smaller file against a loopback demo model server this
   command starts itself; passages/s from upload to `ready`.
3. Memory: a fresh process indexes another file of --megabytes and reports
   its peak resident set (ru_maxrss), the figure a worker would reach.

Everything it creates (a reader, campaigns, endpoint profiles) is deleted
afterwards unless --keep.
"""

from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
import time
import uuid

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from demomodel import DemoModelServer
from endpoints.models import EndpointProfile
from knowledge import services
from knowledge.chunking import chunk_text
from knowledge.models import KnowledgeSource
from storyapp.models import Campaign

_SYLLABLES = "ka lo ri wen tha mar el dor ys ae bri gan hol vess tor un quel sar im ost".split()
_COMMON = ("the of and to in a is that it was for on with as his her at by from they this had "
           "tide harbour salt road ship captain guild lantern storm market temple seal oath").split()


def generated_markdown(size: int, *, seed: int = 7) -> str:
    """Deterministic lore-like Markdown of about `size` bytes: nested
    headings, paragraphs of varied length, the odd list."""
    rng = random.Random(seed)
    names = ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize() for _ in range(400)]
    words = _COMMON * 3 + [name.lower() for name in names]
    out: list[str] = []
    total = 0
    while total < size:
        level = rng.choice((1, 2, 2, 3, 3, 3))
        piece = f"{'#' * level} {rng.choice(names)} {rng.choice(names)}\n\n"
        for _ in range(rng.randint(1, 5)):
            sentences = []
            for _ in range(rng.randint(2, 9)):
                sentence = " ".join(rng.choice(words) for _ in range(rng.randint(6, 22)))
                sentences.append(sentence.capitalize() + rng.choice(".!?.."))
            piece += " ".join(sentences) + "\n\n"
        if rng.random() < 0.15:
            piece += "".join(f"- {rng.choice(names)} of {rng.choice(names)}\n" for _ in range(rng.randint(2, 6))) + "\n"
        out.append(piece)
        total += len(piece.encode())
    return "".join(out)[:size]


class Command(BaseCommand):
    help = "Measure import throughput (MB/s to ready, passages/s embedded) and peak worker memory."

    def add_arguments(self, parser):
        parser.add_argument("--megabytes", type=float, default=5.0, help="Size of the lexical and memory files.")
        parser.add_argument("--embed-megabytes", type=float, default=0.5, help="Size of the embedded file.")
        parser.add_argument("--keep", action="store_true", help="Keep the campaigns it creates.")
        parser.add_argument("--child", type=int, help=argparse_hidden())

    def handle(self, *args, megabytes, embed_megabytes, keep, child, **options):
        if child is not None:
            return self._child(child)
        size = int(megabytes * 1_000_000)
        tag = uuid.uuid4().hex[:8]
        owner = get_user_model().objects.create(username=f"bench-{tag}", is_active=False)
        lexical_profile = EndpointProfile.objects.create(
            name=f"bench-lexical-{tag}", base_url="http://127.0.0.1:9/v1", chat_model="none", embedding_model=""
        )
        campaign = Campaign.objects.create(owner=owner, title=f"Benchmark {tag}", endpoint=lexical_profile)
        profiles = [lexical_profile]
        try:
            text = generated_markdown(size)
            self._lexical(campaign, text)
            self._embedding(owner, tag, int(embed_megabytes * 1_000_000), profiles)
            self._memory(campaign, generated_markdown(size, seed=8))
        finally:
            if not keep:
                Campaign.objects.filter(owner=owner).delete()
                for profile in profiles:
                    profile.delete()
                owner.delete()

    def _lexical(self, campaign, text: str) -> None:
        megabytes = len(text.encode()) / 1_000_000
        services.count_tokens("warm up the tokenizer")
        started = time.perf_counter()
        passages = chunk_text(text, count=services.count_tokens)
        chunking = time.perf_counter() - started
        started = time.perf_counter()
        source = services.source_create(campaign=campaign, filename="bench.md", text=text, enqueue=False)
        source = services.source_index_now(source)
        elapsed = time.perf_counter() - started
        assert source.index_state == KnowledgeSource.IndexState.READY, source.error
        self.stdout.write(
            f"Lexical import: {megabytes:.2f} MB to ready in {elapsed:.2f} s = {megabytes / elapsed:.2f} MB/s "
            f"({source.passage_count} passages, {source.token_count} tokens); "
            f"chunking alone {megabytes / chunking:.2f} MB/s ({len(passages)} passages)"
        )

    def _embedding(self, owner, tag: str, size: int, profiles: list) -> None:
        with DemoModelServer(port=0, chunk_delay=0) as server:
            profile = EndpointProfile.objects.create(
                name=f"bench-embed-{tag}", base_url=server.base_url, chat_model="demo-narrator",
                embedding_model="demo-embed",
            )
            profiles.append(profile)
            campaign = Campaign.objects.create(owner=owner, title=f"Benchmark embed {tag}", endpoint=profile)
            text = generated_markdown(size, seed=9)
            started = time.perf_counter()
            source = services.source_create(campaign=campaign, filename="embed.md", text=text, enqueue=False)
            source = services.source_index_now(source)
            elapsed = time.perf_counter() - started
        assert source.index_state == KnowledgeSource.IndexState.READY, source.error
        self.stdout.write(
            f"Embedded import: {source.passage_count} passages ({size / 1_000_000:.2f} MB) to ready in "
            f"{elapsed:.2f} s = {source.passage_count / elapsed:.0f} passages/s "
            "(loopback demo server, batches of 64)"
        )

    def _memory(self, campaign, text: str) -> None:
        source = services.source_create(campaign=campaign, filename="memory.md", text=text, enqueue=False)
        output = subprocess.run(
            [sys.executable, str(settings.BASE_DIR / "manage.py"), "bench_import", "--child", str(source.pk)],
            check=True, capture_output=True, text=True,
        ).stdout
        report = json.loads(output.strip().splitlines()[-1])
        self.stdout.write(
            f"Worker peak memory indexing {len(text.encode()) / 1_000_000:.2f} MB: "
            f"{report['peak_mb'] - report['baseline_mb']:.0f} MB above its baseline of "
            f"{report['baseline_mb']:.0f} MB (tokenizer loaded), state {report['state']}"
        )

    def _child(self, source_id: int) -> None:
        """In a fresh process, as a worker would: index one source, report the
        peak. The baseline is the resident set once the tokenizer is loaded;
        the kernel's high-water mark is reset there (Linux clear_refs), so the
        peak is the import's own, not the tokenizer's loading spike."""
        services.count_tokens("load the tokenizer first, as a worker has it loaded")
        baseline = _resident_mb("VmRSS")
        reset = _reset_peak()
        source = services.source_index_now(KnowledgeSource.objects.get(pk=source_id))
        peak = _resident_mb("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        self.stdout.write(json.dumps({"peak_mb": peak, "baseline_mb": baseline, "state": source.index_state}))


def _resident_mb(field: str) -> float:
    """VmRSS (now) or VmHWM (the high-water mark) from /proc, in MB; ru_maxrss where there is no /proc."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def argparse_hidden():
    import argparse

    return argparse.SUPPRESS

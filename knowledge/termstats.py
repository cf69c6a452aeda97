"""How common each word is in a campaign's library: which query terms the
lexical ranking reads, and which are too common here to count as evidence.

A turn's query carries up to sixty terms, and ordinary story words ("door",
"city", "light") each occur in a good share of a large library, so an OR of
all of them matches most of it: on 100,000 passages the database scored
91,000 rows to keep 40 (600 ms in Postgres, 200 ms in SQLite). Those common
words are also the ones that say least: FTS5's bm25 gives a word in half the
passages no weight at all, and Postgres's ts_rank, which has no idea of
rarity, lets them drown out the word the scene is about.

So the ranking query reads the query's rarest terms, rarest first, while
their expected matches fit in RANK_MATCHES; the rarest is always read. In a
library small enough that every term fits, nothing changes. What a passage
matched is still tested against *every* term (the evidence admission reads,
knowledge.lexical), so admission's rules are unchanged for every passage the
ranking returns. What is given up, in a large library, is a passage whose
words in common with the query are all more common there than the ones
read: bm25 would have ranked it below the passages holding rarer words.

Frequencies are counted from an evenly spaced sample of the campaign's
passages (all of them up to SAMPLE_PASSAGES), with the query's own word
keys, cached per process and rebuilt when the library stamp changes. The
sample is deterministic, so every process chooses the same terms for the
same library; the counts are kept in a file named for the library's exact
revision (knowledge.segments.digest) so a fresh process reads them instead
of counting 2,000 passages again.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import connection

from . import segments
from .models import KnowledgeChunk
from .query.vocabulary import SHORT_TERM, passage_keys, stem, words

#: The matches the ranking query is expected to score, at most: about what
#: either database ranks in 10 ms on this machine's class of hardware.
RANK_MATCHES = 3000
#: Passages read to count word frequencies; a campaign this size or smaller
#: is counted exactly.
SAMPLE_PASSAGES = 2000
#: Campaign profiles kept per process (a few MB each at most).
CACHED_PROFILES = 16
#: A word in more than this share of the library's passages (and in more
#: than LIBRARY_COMMON_FLOOR of them) is common here: it ranks, it never
#: admits (knowledge.query.weighing.lexical_admits). "Harbour" in a harbour city's
#: lore says nothing about which harbour passage a scene needs. On the
#: hand-written evaluation libraries (about 45 passages) any share from 10 to
#: 25 % and any floor from 3 to 5 gave the same decisions.
LIBRARY_COMMON_SHARE = 0.2
LIBRARY_COMMON_FLOOR = 3
#: A word in more than this share of the passages (and more than
#: LIBRARY_COMMON_FLOOR of them) is broad here: it still counts, but two
#: broad words together are a generic pair, which does not admit
#: (knowledge.ranking). With two worlds in one library, "hull" and "cargo"
#: (17 % and 19 % of 48 passages) are in both.
LIBRARY_BROAD_SHARE = 0.1


@dataclass(frozen=True)
class TermProfile:
    """Document frequencies of word keys in a sample of one library."""

    stamp: tuple
    passages: int
    sampled: int
    counts: Counter

    def expected_matches(self, term: str) -> float:
        """The passages of the whole library a term is expected to match. A
        word absent from a partial sample is rarer than one passage in the
        sample, so it is counted at half of that."""
        keys = [stem(word) for word in words(term)] or [term]
        seen = min(self.counts.get(key, 0) for key in keys)
        if not self.sampled:
            return 0.0
        scale = self.passages / self.sampled
        if seen == 0:
            return 0.0 if self.sampled == self.passages else scale / 2
        return seen * scale


def distinctive_terms(terms: Sequence[str], profile: TermProfile) -> set[int]:
    """Indexes of the terms that are not common in this library."""
    limit = max(LIBRARY_COMMON_FLOOR, LIBRARY_COMMON_SHARE * profile.passages)
    return {i for i, term in enumerate(terms) if profile.expected_matches(term) <= limit}


def broad_terms(terms: Sequence[str], profile: TermProfile) -> set[int]:
    """Indexes of the terms in a broad share of this library's passages."""
    limit = max(LIBRARY_COMMON_FLOOR, LIBRARY_BROAD_SHARE * profile.passages)
    return {i for i, term in enumerate(terms) if profile.expected_matches(term) > limit}


def rank_terms(terms: Sequence[str], profile: TermProfile, budget: int | None = None) -> list[int]:
    """Indexes of the terms the ranking reads: rarest first while the sum of
    their expected matches stays within `budget` (RANK_MATCHES), the rarest
    always; in the order the query gave them."""
    budget = RANK_MATCHES if budget is None else budget
    # A short term may match every passage through the stemmer (query.vocabulary.SHORT_TERM).
    costs = [
        float(profile.passages) if len(term) <= SHORT_TERM else profile.expected_matches(term) for term in terms
    ]
    chosen: list[int] = []
    total = 0.0
    for index in sorted(range(len(terms)), key=lambda i: (costs[i], i)):
        if chosen and total + costs[index] > budget:
            break
        chosen.append(index)
        total += costs[index]
    return sorted(chosen)


_profiles: OrderedDict[tuple, TermProfile] = OrderedDict()
_lock = threading.Lock()


def profile_for(campaign_id: int, stamp: tuple) -> TermProfile:
    """The campaign's profile for this library stamp (see
    knowledge.selectors.library_stamp), counted afresh when it changed."""
    key = (connection.alias, str(connection.settings_dict.get("NAME")), campaign_id)
    with _lock:
        profile = _profiles.get(key)
        if profile is not None:
            _profiles.move_to_end(key)
    if profile is not None and profile.stamp == stamp:
        return profile
    profile = _stored(campaign_id, stamp)
    with _lock:
        _profiles[key] = profile
        _profiles.move_to_end(key)
        while len(_profiles) > CACHED_PROFILES:
            _profiles.popitem(last=False)
    return profile


def _count(campaign_id: int, stamp: tuple) -> TermProfile:
    ids = list(KnowledgeChunk.objects.filter(campaign_id=campaign_id).order_by("pk").values_list("pk", flat=True))
    passages = len(ids)
    if passages > SAMPLE_PASSAGES:
        step = passages / SAMPLE_PASSAGES
        ids = [ids[int(i * step)] for i in range(SAMPLE_PASSAGES)]
    counts: Counter = Counter()
    for offset in range(0, len(ids), 500):
        rows = KnowledgeChunk.objects.filter(pk__in=ids[offset : offset + 500]).values_list("heading_path", "text")
        for heading_path, text in rows:
            counts.update(passage_keys(heading_path, text))
    return TermProfile(stamp=stamp, passages=passages, sampled=len(ids), counts=counts)


def keep(campaign_id: int) -> None:
    """Counts the library's words into its file now (the worker, after the
    last swap of a batch), so that no turn counts them."""
    _stored(campaign_id, None)


def _stored(campaign_id: int, stamp: tuple | None) -> TermProfile:
    """The profile from its file, or counted and written there. A file that
    cannot be read whole is counted again."""
    directory = segments.database_dir() / "terms"
    version = segments.versions(campaign_id, stamp)
    path = directory / f"{campaign_id}-{segments.digest(version)}.json"
    try:
        held = json.loads(path.read_text())
        return TermProfile(stamp=stamp, passages=held["passages"], sampled=held["sampled"], counts=Counter(held["counts"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    profile = _count(campaign_id, stamp)
    if segments.versions(campaign_id) != version:
        return profile  # a swap landed while counting: these counts are not that revision's
    directory.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".terms-")
    with os.fdopen(fd, "w") as f:
        json.dump({"passages": profile.passages, "sampled": profile.sampled, "counts": profile.counts}, f)
    os.replace(temporary, path)
    for old in directory.glob(f"{campaign_id}-*.json"):
        if old != path:
            old.unlink(missing_ok=True)
    return profile


def clear_cache() -> None:
    with _lock:
        _profiles.clear()

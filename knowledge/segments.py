"""A source's vectors on disk, one segment file per (source revision, model),
memory-mapped by every process that reads the library, so a fresh process's
first turn maps files instead of decoding every vector row through the ORM,
and the matrix is page cache shared between workers, not each one's memory.

The files are a cache derived from the database: a missing, stale or
damaged segment is rebuilt from the vector rows (written to a temporary
file and renamed into place), so a wiped var directory or several machines
stay correct. A segment is named by the source's id, revision and `updated`
time, under a directory per database (connection alias and name) and per
model: every swap bumps the revision, and a database recreated with the
same ids (a test run, a restored dump) has other `updated` times. A
segment built by a reader is written only when the source's revision did
not move while its rows were read.

Old segments are unlinked when their source's revision changes or the
source is deleted; a process that still maps one keeps its pages (Linux
frees an unlinked file's pages when the last map closes).
"""

from __future__ import annotations

import hashlib
import mmap
import os
import tempfile
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import connection

from endpoints.embeddings import DTYPE

from .models import KnowledgeEmbedding, KnowledgeSource

MAGIC = b"LMVSEG02"
#: magic, rows, width, reserved: 8 bytes each, so every array starts aligned.
HEADER = 32
#: Sources whose missing segments one query reads.
BUILD_BATCH = 200
#: A library of more sources than this is also kept as one merged file:
#: mapping 2,000 files took 55-85 ms on this machine, one file under 1 ms.
MERGE_ABOVE = 64


@dataclass(frozen=True)
class Segment:
    """Vectors from one model, a row per passage (its id and source), ids
    ascending, rows unit length: one source's, or a whole library merged."""

    source_ids: np.ndarray
    chunk_ids: np.ndarray
    shares: np.ndarray
    matrix: np.ndarray

    @property
    def size(self) -> int:
        return int(self.chunk_ids.size)

    @property
    def width(self) -> int:
        return int(self.matrix.shape[1])


#: (source id, revision, updated) of one source row.
Version = tuple[int, int, object]

#: The last versions read per campaign, with the library stamp they were
#: read under, for a few campaigns.
_versions: OrderedDict[tuple, tuple[tuple, list[Version]]] = OrderedDict()
REMEMBERED = 16


def versions(campaign_id: int, stamp: tuple | None = None) -> list[Version]:
    """Every source of the campaign, with what names its segment. Given the
    library stamp, the last answer for that stamp is reused: the library and
    the word counts both ask on a turn after the library changed."""
    key = (connection.alias, str(connection.settings_dict.get("NAME")), campaign_id)
    if stamp is not None and (last := _versions.get(key)) is not None and last[0] == stamp:
        return last[1]
    rows = list(
        KnowledgeSource.objects.filter(campaign_id=campaign_id).order_by("pk").values_list("pk", "revision", "updated")
    )
    if stamp is not None:
        _versions[key] = (stamp, rows)
        _versions.move_to_end(key)
        while len(_versions) > REMEMBERED:
            _versions.popitem(last=False)
    return rows


def clear() -> None:
    """Forgets the versions remembered in this process."""
    _versions.clear()


def digest(rows: Iterable[Version]) -> str:
    """A name for a library's exact revision: its sources' versions."""
    return hashlib.sha1(repr([(pk, rev, _stamp(at)) for pk, rev, at in rows]).encode()).hexdigest()[:20]


def database_dir() -> Path:
    """This connection's database's directory: two databases never share files."""
    name = f"{connection.alias}\0{connection.settings_dict.get('NAME')}"
    return Path(settings.VAR_DIR) / "libraries" / hashlib.sha1(name.encode()).hexdigest()[:16]


def _model_dir(model: str) -> Path:
    return database_dir() / hashlib.sha1(model.encode()).hexdigest()[:16]


def _stamp(at) -> str:
    return str(int(at.timestamp() * 1_000_000)) if at is not None else "0"


def path_for(version: Version, model: str) -> Path:
    return Path(_name(str(_model_dir(model)), version))


def _name(directory: str, version: Version) -> str:
    pk, revision, updated = version
    return f"{directory}/{pk}/{revision}-{_stamp(updated)}.seg"


def load(campaign_id: int, model: str, stamp: tuple | None = None) -> list[Segment]:
    """The campaign's segments for `model`, in source order; missing or
    damaged ones rebuilt from the database. A library of many sources is
    read from its merged file, written from its segments when absent."""
    rows = versions(campaign_id, stamp)
    directory = str(_model_dir(model))
    merged = f"{directory}/c{campaign_id}-{digest(rows)}.lib" if len(rows) > MERGE_ABOVE else None
    if merged and (whole := read(merged)) is not None:
        return [whole]
    found: list[Segment | None] = [read(_name(directory, v)) for v in rows]
    missing = [v for v, segment in zip(rows, found, strict=True) if segment is None]
    built: dict[int, tuple[Segment, bool]] = {}
    for offset in range(0, len(missing), BUILD_BATCH):
        built.update(_build(missing[offset : offset + BUILD_BATCH], model))
    loaded = [segment if segment is not None else built[v[0]][0] for v, segment in zip(rows, found, strict=True)]
    if merged and all(kept for _, kept in built.values()):
        _merge(merged, campaign_id, loaded)
    return loaded


def _merge(path: str, campaign_id: int, parts: list[Segment]) -> None:
    """One file of the library's rows in passage id order, from segments
    that are all this version's; the campaign's older merged files unlinked."""
    live = [s for s in parts if s.size]
    if not live or len({s.width for s in live}) != 1:
        return  # mixed widths: the library's own rule picks among them
    ids = np.concatenate([s.chunk_ids for s in live])
    order = np.argsort(ids, kind="stable")
    whole = Segment(
        np.concatenate([s.source_ids for s in live])[order], ids[order],
        np.concatenate([s.shares for s in live])[order], np.concatenate([s.matrix for s in live])[order],
    )
    _write(Path(path), whole)
    for old in Path(path).parent.glob(f"c{campaign_id}-*.lib"):
        if str(old) != path:
            old.unlink(missing_ok=True)


def read(path: Path | str) -> Segment | None:
    """The mapped segment, or None if it is absent or not whole."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None  # empty, or not a regular file
    finally:
        os.close(fd)
    size = len(mapped)
    if size < HEADER or mapped[:8] != MAGIC:
        return None
    rows, width = (int(x) for x in np.frombuffer(mapped, dtype=np.int64, count=2, offset=8))
    if rows < 0 or width < 0 or size != HEADER + rows * (24 + 4 * width):
        return None
    sources = np.frombuffer(mapped, dtype=np.int64, count=rows, offset=HEADER)
    ids = np.frombuffer(mapped, dtype=np.int64, count=rows, offset=HEADER + 8 * rows)
    shares = np.frombuffer(mapped, dtype=np.float64, count=rows, offset=HEADER + 16 * rows)
    matrix = np.frombuffer(mapped, dtype=DTYPE, count=rows * width, offset=HEADER + 24 * rows).reshape(rows, width)
    return Segment(sources, ids, shares, matrix)


def store(version: Version, model: str, chunk_ids, vectors: list[bytes], shares) -> Segment:
    """Stores one source's vectors (as the embedding rows hold them) as its
    segment, and unlinks the source's older segments."""
    return write(version, model, _segment(version[0], chunk_ids, vectors, shares))


def write(version: Version, model: str, segment: Segment) -> Segment:
    path = path_for(version, model)
    _write(path, segment)
    forget(version[0], keep=path)
    return segment


def _write(path: Path, segment: Segment) -> None:
    """The file, whole or not at all (a temporary file renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = MAGIC + np.asarray([segment.size, segment.width, 0], dtype=np.int64).tobytes()
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".seg-")
    try:
        with os.fdopen(fd, "wb") as f:
            for part in (header, segment.source_ids, segment.chunk_ids, segment.shares, segment.matrix):
                f.write(part if isinstance(part, bytes) else np.ascontiguousarray(part).data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def forget(source_id: int, *, keep: Path | None = None) -> None:
    """Unlinks the source's segments (all but `keep`), for every model."""
    root = database_dir()
    if not root.is_dir():
        return
    # A directory per source, so this lists its few files, not the library's.
    for path in root.glob(f"*/{source_id}/*.seg"):
        if path != keep:
            path.unlink(missing_ok=True)


def _build(missing: list[Version], model: str) -> dict[int, tuple[Segment, bool]]:
    """Segments for these sources from their vector rows (one query); each
    written to disk (and True) only if its source's version did not move
    meanwhile."""
    by_source: dict[int, tuple[list, list, list]] = {v[0]: ([], [], []) for v in missing}
    rows = (
        KnowledgeEmbedding.objects.filter(model=model, chunk__source_id__in=list(by_source))
        .order_by("chunk_id")
        .values_list("chunk_id", "chunk__source_id", "dimensions", "vector", "neutral_share")
    )
    widths: dict[int, int] = {}
    for chunk_id, source_id, dimensions, vector, share in rows.iterator(chunk_size=5000):
        if widths.setdefault(source_id, dimensions) != dimensions:
            continue  # a vector of another width cannot be compared; skip it
        ids, blobs, shares = by_source[source_id]
        ids.append(chunk_id)
        blobs.append(bytes(vector))
        shares.append(share)
    now = {v[0]: v for v in KnowledgeSource.objects.filter(pk__in=list(by_source)).values_list("pk", "revision", "updated")}
    built = {}
    for version in missing:
        segment = _segment(version[0], *by_source[version[0]])
        # Written only if the rows read are this version's (a swap commits
        # its vectors and its revision together).
        kept = now.get(version[0]) == version
        built[version[0]] = (write(version, model, segment) if kept else segment, kept)
    return built


def _segment(source_id: int, chunk_ids, blobs: list[bytes], shares) -> Segment:
    """Rows sorted by passage id, normalized as the library compares them."""
    ids = np.asarray(chunk_ids, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    width = len(blobs[0]) // DTYPE.itemsize if blobs else 0
    matrix = np.frombuffer(b"".join(blobs), dtype=DTYPE).reshape(len(blobs), width)[order]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    matrix = matrix / norms
    share = np.asarray([np.nan if s is None else s for s in shares], dtype=np.float64).reshape(-1)[order]
    return Segment(
        np.full(ids.size, source_id, dtype=np.int64), ids[order], share, np.ascontiguousarray(matrix, dtype=DTYPE)
    )

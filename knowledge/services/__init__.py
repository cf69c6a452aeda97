"""Writes to the library: importing sources, indexing them, and the jobs that do it.

The pipeline (DESIGN.md §4), one `IndexJob` at a time per source:

    upload ─▶ source (pending) + job (queued) ─▶ on commit: Celery task
    task ─▶ job_run: claim ─▶ chunk ─▶ embed (if the campaign has a model)
         ─▶ swap: old passages out, new passages, lexical rows and vectors
            in, source ready, job done — one transaction.

Everything slow (chunking, the embedding calls) happens before the swap and
outside any transaction, so the old passages stay searchable until the new
ones replace them, and a worker killed mid-job leaves them as they were. The
job row is claimed with a conditional UPDATE, so a duplicate delivery finds
nothing to do, and a job whose worker died (stale heartbeat, or a dead
process on this host) is put back in the queue by `jobs_recover`.

The modules, each importing only those listed after it:

- `uploads`: storing uploaded files, unread, for their jobs; importing a
  batch of files read in the calling process, each on its own.
- `lorebooks`: storing a lorebook as a source with its entries, and giving
  the book back as SillyTavern World Info.
- `entries`: editing a lorebook's entries (change, add, delete) and its
  World Info settings.
- `regexcaps`: the regex keys a book and a campaign may hold, checked
  before a book or an edited entry is stored.
- `sources`: what a reader or an importer does to a source (create,
  change its settings, delete, re-index).
- `indexing`: running one job: the claim, reading an upload, chunking, the
  lore-size check, embedding, the swap.
- `parsing`: the job's reading of an uploaded file and the storing of what
  it holds at the swap.
- `measure`: what a source would take stored, against the lore-size limits.
- `books`: a lorebook's text, title and import report.
- `reading`: a file's text or lorebook, the refusals, names and hashes, and
  the always-include guard.
- `liveness`: putting the jobs of dead workers back in the queue, and
  re-sending lost messages (knowledge's part of the workers' sweep).
- `jobs`: making and sending job rows, and what an operator does to them.

Callers use `services.X` or `from knowledge.services import X`; every such
name is re-exported here.
"""

from .indexing import (
    MAX_RETRIES,
    campaigns_using,
    count_tokens,
    embeddings_refresh,
    embeddings_refresh_for_profile,
    job_claim,
    job_run,
)
from .jobs import dispatch, fair_share, job_cancel, job_retry
from .liveness import jobs_reclaim, jobs_recover, jobs_resend_lost
from .entries import book_settings_update, entry_create, entry_delete, entry_update
from .lorebooks import book_of, lorebook_create, world_info_of, world_info_stream
from .reading import (
    ALLOWED_SUFFIXES,
    LOREBOOK_SUFFIXES,
    DuplicateSource,
    ImportRefused,
    content_hash,
    human_size,
    read_upload,
    source_always_include_check,
    source_text_from_upload,
    title_for,
)
from .sources import (
    source_create,
    source_delete,
    source_index_now,
    source_reindex,
    source_update,
)
from .uploads import ImportResult, source_upload, sources_import, sources_upload

__all__ = [
    "ALLOWED_SUFFIXES",
    "LOREBOOK_SUFFIXES",
    "book_of",
    "book_settings_update",
    "entry_create",
    "entry_delete",
    "entry_update",
    "lorebook_create",
    "read_upload",
    "world_info_of",
    "world_info_stream",
    "MAX_RETRIES",
    "DuplicateSource",
    "ImportRefused",
    "ImportResult",
    "content_hash",
    "count_tokens",
    "campaigns_using",
    "embeddings_refresh",
    "embeddings_refresh_for_profile",
    "human_size",
    "fair_share",
    "dispatch",
    "job_cancel",
    "jobs_resend_lost",
    "job_claim",
    "job_retry",
    "job_run",
    "jobs_reclaim",
    "jobs_recover",
    "source_always_include_check",
    "source_create",
    "source_delete",
    "source_index_now",
    "source_reindex",
    "source_text_from_upload",
    "source_update",
    "sources_import",
    "sources_upload",
    "source_upload",
    "title_for",
]

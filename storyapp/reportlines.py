"""The inspector's lines that explain a figure: this turn's token ratio as
the two counts it is of, and why the prompt had the summary it had.

Each line says which case it is, so a reader is never left to guess between
two explanations ("fits the window, or no summary was written yet"). Plain
values in (the report as `inspector.readable` reads it), plain values out.
"""

from __future__ import annotations


def this_turn(tokens: dict) -> dict | None:
    """The server's count of this prompt against ours, as the two numbers
    its ratio is of: the whole prompt when the reply's usage counted it, the
    bare text when the server's tokenizer did (`ours` is None for a report
    from before that count was kept). None when the server did not count."""
    servers = tokens.get("server_prompt_tokens")
    if not servers:
        return None
    usage = tokens.get("server_count_source") != "tokenizer"
    ours = tokens.get("server_compared_to") or (tokens.get("total") if usage else None)
    ratio = round(servers / ours, 3) if ours else tokens.get("ratio")
    return {"servers": servers, "ours": ours, "usage": usage, "ratio": ratio}


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else f"{text}."


def summary_line(summary: dict | None, *, total: int, included: int, jobs: list[dict]) -> str:
    """What the summary used covers, and why the dropped actions it does not
    cover are in none: the story fit the window, or their summary was not
    written yet, was being written, or failed (and why). `jobs` are the
    report's unfinished summary jobs on this lineage, newest first."""
    dropped = max(0, total - included)
    covered = summary["covers_actions"] if summary else 0
    uncovered = max(0, dropped - covered)
    if summary:
        parts = len(summary["parts"])
        line = f"covers {_plural(covered, 'action')}, through action #{summary['covers_through']}"
        line += f", in {parts} parts" if parts > 1 else ""
        if not uncovered:
            return f"{line}."
        line += f"; {_plural(uncovered, 'dropped action')} after it {'is' if uncovered == 1 else 'are'} not in it"
    elif not dropped:
        return f"none needed: the whole story fit the window ({total} of {_plural(total, 'action')} sent)."
    else:
        line = f"none: {dropped} of {total} actions did not fit the window"
    pending = next((job for job in jobs if job["state"] in ("queued", "running")), None)
    failed = next((job for job in jobs if job["state"] == "failed"), None)
    if pending:
        doing = "being written" if pending["state"] == "running" else "waiting for a worker"
        last = f" (its last attempt failed: {pending['error'].rstrip('.')})" if pending["error"] else ""
        return f"{line}; their summary was {doing} when this prompt was built{last}."
    if failed:
        why = _sentence(failed["error"] or "no reason was recorded")
        return f"{line}; their summary failed after {_plural(failed['attempts'], 'attempt')}: {why}"
    return (f"{line}; no summary of them was written yet (one is asked for once enough of the story "
            "has fallen out of the window).")


def world_info_line(*, considered: int, activated: int, budget: int, used: int) -> str:
    """What World Info did with its budget: how many entries it weighed,
    how many it took, and what they cost of the share of the window it may
    spend."""
    share = f"{used:,} of its {budget:,}-token budget" if budget else f"{used:,} tokens (no budget recorded)"
    entries = f"{considered} {'entry' if considered == 1 else 'entries'}"
    return f"{entries} considered, {activated} activated, using {share}."

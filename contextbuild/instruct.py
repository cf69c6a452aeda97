"""A conversation rendered in a model's instruct template, for completions mode.

A completions endpoint (llama.cpp's `/v1/completions` and `/completion`,
KoboldCpp's, vLLM's) takes the prompt raw: an instruct model fed plain
"Reader:"/"Narrator:" labels never sees the format it was trained on, and
writes worse or leaks its own turn markers into the story. So completions
mode renders the very conversation chat mode sends (the builder makes it
once) in the model's template: each message between its role's prefix and
suffix, ending on the assistant's prefix, where the model writes the
narration. "Continue" ends on the last narration's own text instead, with
no suffix, so the model goes on with it.

The templates are data (contextbuild/data/instruct_templates.json), written
from each format's own chat template, read once per process. A format with
no system role (Llama 2, Mistral before V7, Gemma) carries the system text
in the first user turn, as its own template does. "plain" is the labelled
transcript, for base models that know no template. Pure: the file is part
of the package.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TEMPLATES_FILE = Path(__file__).parent / "data" / "instruct_templates.json"
PLAIN = "plain"
SYSTEM, USER, ASSISTANT = "system", "user", "assistant"


@dataclass(frozen=True)
class Template:
    """One instruct format. `system` is None when the format has no system
    role; then `system_join` joins the system text to the first user turn's
    (`system_wrap` around it, Llama 2's `<<SYS>>`)."""

    name: str
    label: str
    bos: str
    system: tuple[str, str] | None
    user: tuple[str, str]
    assistant: tuple[str, str]
    stop: tuple[str, ...]
    markers: tuple[str, ...]
    generation_prompt: str
    strip: bool = False
    system_join: str = "\n\n"
    system_wrap: tuple[str, str] = ("", "")


@cache
def templates() -> dict[str, Template]:
    """Every template, by name, in the file's order (read once per process)."""
    raw = json.loads(TEMPLATES_FILE.read_text(encoding="utf-8"))
    return {name: _template(name, spec) for name, spec in raw.items() if not name.startswith("_")}


def _template(name: str, spec: dict) -> Template:
    assistant = tuple(spec["assistant"])
    return Template(
        name=name,
        label=spec["label"],
        bos=spec.get("bos", ""),
        system=tuple(spec["system"]) if spec.get("system") is not None else None,
        user=tuple(spec["user"]),
        assistant=assistant,
        stop=tuple(spec.get("stop", ())),
        markers=tuple(spec.get("markers", ())),
        generation_prompt=spec.get("generation_prompt", assistant[0]),
        strip=bool(spec.get("strip", False)),
        system_join=spec.get("system_join", "\n\n"),
        system_wrap=tuple(spec.get("system_wrap", ("", ""))),
    )


def template(name: str) -> Template:
    """The named template; an unknown name is "plain" (a profile saved with a
    template this build no longer has still narrates)."""
    return templates().get(name) or templates()[PLAIN]


def render(messages: list[dict], name: str, *, continue_last: bool = False) -> str:
    """The prompt text for a completions endpoint: `messages` (a system
    message, then user and assistant turns; system messages later on are
    instructions placed in the story, World Info at a depth) in the named
    template, ending on the assistant's prefix, or, with `continue_last`, on
    the last message's own text (it must be the assistant's).

    One pass over the conversation as it is, which is what nearly every
    turn sends; a conversation the format cannot carry as it is (a system
    message later on where the format has none, two turns of one role) is
    folded first (`_carried`)."""
    chosen = template(name)
    affixes = _affix_table(chosen)
    folding, strip = chosen.system is None, chosen.strip
    parts = [chosen.bos]
    previous, start = None, 0
    if folding and len(messages) > 1 and messages[0]["role"] == SYSTEM and messages[1]["role"] == USER:
        # The usual shape: one system message, then the story.
        first = _with_system([messages[0]["content"]], messages[1]["content"], chosen, opening=True)
        prefix, suffix = affixes[USER]
        parts += (prefix, first.strip() if strip else first, suffix)
        previous, start = USER, 2
    for message in messages[start:]:
        role = message["role"]
        if (role == previous and role != SYSTEM) or (folding and role == SYSTEM):
            return _rendered(_carried(messages, chosen), chosen, continue_last)
        prefix, suffix = affixes[role]
        content = message["content"]
        parts += (prefix, content.strip() if strip else content, suffix)
        previous = role
    return _ended(parts, chosen, previous, continue_last)


def _rendered(turns: list[tuple[str, str]], chosen: Template, continue_last: bool) -> str:
    affixes = _affix_table(chosen)
    parts = [chosen.bos]
    for role, content in turns:
        prefix, suffix = affixes[role]
        parts += (prefix, content.strip() if chosen.strip else content, suffix)
    return _ended(parts, chosen, turns[-1][0] if turns else None, continue_last)


def _ended(parts: list[str], chosen: Template, last_role: str | None, continue_last: bool) -> str:
    if not continue_last:
        parts.append(chosen.generation_prompt)
    elif last_role != ASSISTANT:
        raise ValueError("continue_last needs the conversation to end on the narrator's turn")
    else:
        parts.pop()  # the last narration goes on: no end of turn after it
    return "".join(parts)


@cache
def _affix_table(chosen: Template) -> dict[str, tuple[str, str]]:
    return {SYSTEM: chosen.system or chosen.user, USER: chosen.user, ASSISTANT: chosen.assistant}


def _carried(messages: list[dict], chosen: Template) -> list[tuple[str, str]]:
    """The turns as the format can carry them. Without a system role, the
    opening system text goes into the first user turn and a later system
    message joins the user turn after it (or before it, at the end); any
    two turns of one role that end up adjacent are joined, since these
    formats alternate."""
    turns = [(m["role"], m["content"]) for m in messages]
    if chosen.system is None:
        turns = _fold_system(turns, chosen)
    joined: list[tuple[str, str]] = []
    for role, content in turns:
        if joined and joined[-1][0] == role and role != SYSTEM:
            joined[-1] = (role, joined[-1][1] + "\n\n" + content)
        else:
            joined.append((role, content))
    return joined


def _fold_system(turns: list[tuple[str, str]], chosen: Template) -> list[tuple[str, str]]:
    folded: list[tuple[str, str]] = []
    pending: list[str] = []
    for role, content in turns:
        if role == SYSTEM:
            pending.append(content)
            continue
        if role == USER and pending:
            content = _with_system(pending, content, chosen, opening=not folded)
            pending = []
        folded.append((role, content))
    if pending:
        folded.append((USER, "\n\n".join(pending)))
    return folded


def _with_system(pending: list[str], content: str, chosen: Template, *, opening: bool) -> str:
    """A user turn carrying the system text before it: the opening one as
    the format's template puts it (Llama 2 wraps it in `<<SYS>>`)."""
    system = "\n\n".join(pending)
    if opening:
        return chosen.system_wrap[0] + system + chosen.system_wrap[1] + chosen.system_join + content
    return system + "\n\n" + content


def stop_sequences(name: str) -> tuple[str, ...]:
    """Where a reply in this template ends: the format's end-of-turn and the
    start of the next turn, so the model never writes the reader's."""
    return template(name).stop


def detect(chat_template: str = "", model_name: str = "") -> tuple[str, str]:
    """The template a server's chat template (or, lacking one, its model's
    name) points to, and why: marker strings, as KoboldCpp's AutoGuess
    reads them. No chat template and no telling name is "plain"."""
    text = chat_template or ""
    for name, chosen in templates().items():
        if any(marker in text for marker in chosen.markers):
            return _refined(name, text), f"its chat template has “{_first_marker(chosen, text)}”"
    lowered = model_name.lower()
    for hint, name in NAME_HINTS:
        if hint in lowered:
            return name, f"the model's name has “{hint}”"
    return PLAIN, "the server gave no chat template and the model's name says nothing of one"


def _first_marker(chosen: Template, text: str) -> str:
    return next(marker for marker in chosen.markers if marker in text)


def _refined(name: str, text: str) -> str:
    """Formats whose markers overlap: a Mistral template with a system
    prompt tag is V7 Tekken."""
    if name == "mistral-v3" and "[SYSTEM_PROMPT]" in text:
        return "mistral-v7-tekken"
    return name


#: Model-name fragments that name a format, checked in order when the server
#: shows no chat template (the more specific first).
NAME_HINTS = (
    ("llama-3", "llama3"), ("llama3", "llama3"), ("llama-2", "llama2"), ("llama2", "llama2"),
    ("mistral-nemo", "mistral-v3-tekken"), ("nemo", "mistral-v3-tekken"), ("mistral-small-24b", "mistral-v7-tekken"),
    ("mistral", "mistral-v3"), ("mixtral", "mistral-v3"), ("gemma", "gemma"), ("phi-3", "phi3"), ("phi3", "phi3"),
    ("command-r", "command-r"), ("deepseek", "deepseek"), ("glm-4", "glm4"), ("glm4", "glm4"),
    ("qwen", "chatml"), ("smollm", "chatml"), ("hermes", "chatml"), ("yi-", "chatml"),
    ("vicuna", "vicuna"), ("alpaca", "alpaca"), ("pygmalion", "metharme"), ("metharme", "metharme"),
)


#: A speaker's label a model sometimes writes before its narration.
_LEADING_LABEL = re.compile(r"^\s*(?:narrator|assistant|model|gm|game master)\s*:\s*", re.IGNORECASE)


@cache
def _turn_markers() -> re.Pattern:
    """Every template's turn markers that cannot be prose: special tokens in
    angle or square brackets, and the labelled formats' markers at a line's
    start."""
    found = set()
    for chosen in templates().values():
        affixes = [*chosen.user, *chosen.assistant, *(chosen.system or ()), *chosen.stop, chosen.bos]
        for piece in affixes:
            piece = piece.strip()
            if piece and re.search(r"[<\[｜]", piece):
                found.add(piece)
    lines = ("Reader:", "### Instruction", "USER:")
    pattern = "|".join(sorted(map(re.escape, found), key=len, reverse=True))
    return re.compile(pattern + "|" + "|".join(r"\n\s*" + re.escape(line) for line in lines))


def trimmed_reply(text: str, *, speakers: tuple[str, ...] = ()) -> str:
    """The reply up to the first turn marker of any template (a server that
    ignored the stop strings, a template detected wrong), without a speaker's
    label the model put first: neither may become story.

    `speakers` are the characters whose actions the prompt sent under their
    names ("Mara: I open the door", a shared story's seats): a line the model
    begins with one of those labels is the model writing that player's turn,
    which the narrator must never do, so the reply ends there too (what
    follows, a state block included, belongs to the invented turn, as after
    a template's turn marker); a first line so labelled is dropped."""
    match = _turn_markers().search(text)
    if match is not None:
        text = text[: match.start()]
    names = [name.strip() for name in speakers if name.strip()]
    if names:
        labels = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
        label = rf"[ \t]*(?:\*\*)?(?:{labels})(?:\*\*)?[ \t]*:"
        # A reply that opens as a seat (SmolLM2 restating the player's turn
        # under a name) loses that line; the narration is what follows.
        opening = re.match(rf"\s*{label}[^\n]*(?:\n|$)", text, re.IGNORECASE)
        if opening is not None:
            text = text[opening.end():]
        turn = re.search(rf"\n{label}", text, re.IGNORECASE)
        if turn is not None:
            text = text[: turn.start()]
    return _LEADING_LABEL.sub("", text, count=1)


def continuing(messages: list[dict], cue: str) -> list[dict]:
    """The conversation for "Continue" in completions mode: it ends on the
    last narration, so the model goes on with its own text. The turn's live
    sections (the author's note, the state, ...) move into the reader's turn
    before that narration, and the cue asking to continue is left out. A
    conversation that does not end on a narration and the cue is unchanged."""
    if len(messages) < 3 or messages[-2]["role"] != ASSISTANT or not messages[-1]["content"].endswith(cue):
        return messages
    *before, narration, last = [dict(m) for m in messages]
    live = last["content"][: -len(cue)].rstrip()
    if live and before and before[-1]["role"] == USER:
        before[-1]["content"] += "\n\n" + live
    elif live:
        before.append({"role": USER, "content": live})
    return [*before, narration]

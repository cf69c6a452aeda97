"""A small story for the World Info conformance suite: messages newest
first, as the engine reads them, and a turn's evaluation in one call."""

from __future__ import annotations

from worldinfo.engine import evaluate
from worldinfo.records import BookSettings, Inputs, Message, Result


def words(text: str) -> int:
    return len(text.split())


def messages(*texts: str) -> tuple[Message, ...]:
    """Messages given oldest first, returned newest first; a text may be
    "Name: words" to set who speaks."""
    made = []
    for text in texts:
        name, _, said = text.partition(": ") if ": " in text else ("", "", text)
        made.append(Message(name=name, text=said))
    return tuple(reversed(made))


def run(entries, story=("",), *, book: BookSettings | None = None, regex_search=None, **given) -> Result:
    books = given.pop("books", None) or {"book": book or BookSettings()}
    story = messages(*story)
    given.setdefault("chat_length", len(story))
    given.setdefault("budget_tokens", 8192)
    given.setdefault("seed", "seed")
    inputs = Inputs(entries=tuple(entries), books=books, messages=story, **given)
    return evaluate(inputs, count=words, regex_search=regex_search)


def titles(result: Result) -> list[str]:
    return [d.entry for d in result.activated]


def decision(result: Result, title: str):
    return next(d for d in result.decisions if d.entry == title)

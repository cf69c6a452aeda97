"""Regex keys that cannot hold a worker (issue 23, findings 2 and 3): a
compile bomb is refused at import and at an entry's edit, quickly and with
a reason; a book or a campaign past its regex-key limit is refused at
import; rows stored before the limits are skipped at turn time with the
reason in World Info's notes; and a campaign's keys are compiled once, in
its loaded lorebooks, and freed with them (those the library still has are
kept when it changes)."""

import gc
import html
import json
import time
import weakref

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django.urls import reverse

from contextbuild.tokens import count_tokens
from knowledge import retrieval, services
from knowledge.models import KnowledgeSource, LoreEntry
from knowledge.worldinfo import loading
from worldinfo.engine import evaluate
from worldinfo.records import Inputs, Message
from tests.knowledge.test_entry_editor import posted

HX = {"HTTP_HX_REQUEST": "true"}
BOMB = "/(?#{n})(?:(?:(?:a{{100}}){{100}}){{100}})/"


@pytest.fixture(autouse=True)
def fresh_cache():
    retrieval.clear_cache()
    yield
    retrieval.clear_cache()


def world_info(keys_by_entry) -> bytes:
    """A SillyTavern World Info file, one entry per list of keys."""
    entries = {
        str(i): {"uid": i, "key": list(keys), "comment": f"Entry {i}", "content": f"Lore number {i} of the harbour."}
        for i, keys in enumerate(keys_by_entry)
    }
    return json.dumps({"entries": entries}).encode()


def upload(campaign, name, data):
    return services.sources_import(campaign=campaign, files=[(name, data)], enqueue=False)


def ask(campaign, text):
    """The campaign's World Info for a story of one message, and the
    turn's regex search (its refusals)."""
    books, patterns = loading.books_for(campaign.pk)
    search = loading.TurnRegex(patterns)
    inputs = Inputs(entries=books.entries, books=books.settings, messages=(Message("Mara", text),),
                    chat_length=1, budget_tokens=8192, seed="test")
    return evaluate(inputs, count=count_tokens, regex_search=search), search


def activated(campaign, text) -> set[str]:
    return {d.entry for d in ask(campaign, text)[0].activated}


def test_the_compile_bomb_file_is_refused_at_import_naming_the_key_and_why(campaign, compiles):
    data = world_info([[BOMB.format(n=i)] for i in range(4)])
    assert len(data) < 1000
    started = time.perf_counter()
    result = upload(campaign, "bomb.json", data)
    assert time.perf_counter() - started < 1.0
    [refusal] = result.refused
    assert refusal.startswith("bomb.json: the entry “Entry 0” cannot be used: the pattern /(?#0)")
    assert "repeats too much" in refusal
    assert compiles == [] and not KnowledgeSource.objects.filter(campaign=campaign).exists()


def test_the_library_page_shows_the_refusal_of_the_compile_bomb(
    reader, campaign, compiles, django_capture_on_commit_callbacks
):
    """An upload is read by its index job, so the refusal is the job's, on the library page."""
    bomb = SimpleUploadedFile("bomb.json", world_info([[BOMB.format(n=1)]]))
    url = reverse("library_upload", kwargs={"pk": campaign.pk})
    with django_capture_on_commit_callbacks(execute=True):
        reader.post(url, {"files": [bomb], "classification": "", "visibility": "visible"}, **HX)
    body = html.unescape(reader.get(reverse("library", kwargs={"pk": campaign.pk})).content.decode())
    assert "bomb.json: the entry “Entry 0” cannot be used" in body and "repeats too much" in body
    assert compiles == [] and not LoreEntry.objects.filter(source__campaign=campaign).exists()


def test_a_book_of_6000_regex_keys_is_refused_at_import(campaign):
    result = upload(campaign, "many.json", world_info([[f"/harbou?r{i}/i"] for i in range(6000)]))
    assert result.refused == ["many.json: this book has 6,000 regex keys; the limit is 500 per book."]
    assert not LoreEntry.objects.exists()


@override_settings(KNOWLEDGE_REGEX_KEYS_PER_CAMPAIGN=5)
def test_a_book_that_would_take_the_campaign_past_its_regex_keys_is_refused(campaign):
    assert not upload(campaign, "first.json", world_info([["/quay/", "/dock/"], ["/pier/"]])).problems
    result = upload(campaign, "second.json", world_info([["/mast/", "/sail/"], ["/keel/"]]))
    assert result.refused == [
        "second.json: with this book the campaign would have 6 regex keys; the limit is 5 per campaign."
    ]


@pytest.fixture
def book(campaign):
    [source] = upload(campaign, "harbour.json", world_info([["lamplighters", "/lamp ?oil/i"], ["/quay/"]])).created
    return services.source_index_now(source)


def edit(client, campaign, source, entry, keys):
    url = reverse("entry_edit", kwargs={"pk": campaign.pk, "source_id": source.pk, "entry_id": entry.pk})
    return client.post(url, posted(entry, title="Edited", keys=keys, text="Changed.", enabled=True), **HX)


def test_the_editor_refuses_the_compile_bomb_quickly_with_a_400(reader, campaign, book, compiles):
    entry = book.entries.get(position=0)
    started = time.perf_counter()
    response = edit(reader, campaign, book, entry, f"lamplighters, {BOMB.format(n=1)}")
    assert time.perf_counter() - started < 1.0
    assert response.status_code == 400 and "repeats too much" in response.content.decode()
    assert compiles == []
    entry.refresh_from_db()
    assert entry.title == "Entry 0" and entry.regex_keys == ["/lamp ?oil/i"]


@override_settings(KNOWLEDGE_REGEX_KEYS_PER_BOOK=3)
def test_the_editor_refuses_an_entry_that_takes_its_book_past_the_limit(reader, campaign, book):
    entry = book.entries.get(position=1)
    response = edit(reader, campaign, book, entry, "/quay/, /dock/, /pier/")
    assert response.status_code == 400
    assert "this book has 4 regex keys; the limit is 3 per book" in response.content.decode()
    assert edit(reader, campaign, book, entry, "/quay/, /dock/").status_code == 200


def test_a_stored_bomb_is_skipped_at_turn_time_with_its_reason_in_the_decisions(campaign, book, compiles):
    LoreEntry.objects.filter(source=book, position=1).update(regex_keys=[BOMB.format(n=i) for i in range(4)])
    started = time.perf_counter()
    result, search = ask(campaign, "The quay is quiet. " + "a" * 300)
    assert time.perf_counter() - started < 1.0
    assert compiles == ["lamp ?oil"]  # the other entry's key; no bomb
    [skipped] = [d for d in result.skipped if d.entry == "Entry 1"]
    assert skipped.how == "no_key" and "not tried" in skipped.reason
    assert search.notes()[0].startswith("A regex key is not used: the pattern /(?#0)")
    assert "repeats too much" in search.notes()[0]


@override_settings(KNOWLEDGE_REGEX_KEYS_PER_BOOK=1000, KNOWLEDGE_REGEX_KEYS_PER_CAMPAIGN=1000)
def test_a_campaigns_regex_keys_are_compiled_once_across_turns_and_freed_with_its_index(campaign, compiles):
    keys = [["/lanterns?/i"]] + [[f"/harbou?r ?{i}\\b/i"] for i in range(1, 600)]
    [source] = upload(campaign, "big.json", world_info(keys)).created
    services.source_index_now(source)
    # The first turns compile what their deadline allows, in the book's
    # order; every later turn reuses them and compiles only the rest.
    for _ in range(10):
        assert "Entry 0" in activated(campaign, "The lanterns swing.")
        if len(compiles) == 600:
            break
    ask(campaign, "Two lanterns swing.")
    assert len(compiles) == len(set(compiles)) == 600
    [(_, _, table)] = loading._cache.values()
    assert table.compiles == 600
    freed = weakref.ref(table)
    entry = source.entries.get(position=0)
    services.entry_update(entry=entry, title="Lamps", keys="/lamps?/i", text="Lamps.", enabled=True)
    services.source_index_now(KnowledgeSource.objects.get(pk=source.pk))
    del table
    assert "Lamps" in activated(campaign, "The lamps swing.")
    # The new index keeps the 599 keys the book still has and compiles the one it gained.
    assert compiles[600:] == ["lamps?"]
    [(_, _, table)] = loading._cache.values()
    assert (table.held, table.compiles) == (600, 1)
    gc.collect()
    assert freed() is None

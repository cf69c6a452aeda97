"""The library pages (per campaign).

Every library view loads the campaign through `_campaign_for`, the reader's
own (`Campaign.objects.of_reader`: another reader's campaign is a 404), and the source through `_source_for`,
which looks it up within that campaign.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from itertools import islice

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import RequestDataTooBig, TooManyFilesSent
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.text import slugify
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

import quotas
from storyapp.models import Campaign

from . import selectors, services
from .forms import BookSettingsForm, EntryForm, LimitedUploadHandler, NewEntryForm, SourceForm, UploadOptionsForm
from .models import KnowledgeSource, LoreEntry

LIBRARY = "knowledge/library.html"


def _campaign_for(request: HttpRequest, pk: int) -> Campaign:
    """The library is the game master's alone: to the story's players and
    watchers, as to everyone else, it answers as missing."""
    return get_object_or_404(Campaign.objects.of_reader(request.user), pk=pk)


def _source_for(request: HttpRequest, pk: int, source_id: int) -> KnowledgeSource:
    campaign = _campaign_for(request, pk)
    # The text of a big book is megabytes that no page of a source shows.
    sources = KnowledgeSource.objects.select_related("campaign").defer("content", "upload")
    return get_object_or_404(sources, pk=source_id, campaign=campaign)


def _library_context(campaign: Campaign, **extra) -> dict:
    sources = selectors.library_sources(campaign)
    return {
        "campaign": campaign,
        "sources": sources,
        "in_flight": selectors.in_flight(sources),
        "upload_form": UploadOptionsForm(),
        "max_upload_bytes": settings.KNOWLEDGE_MAX_UPLOAD_BYTES,
        "max_files": settings.KNOWLEDGE_MAX_FILES_PER_UPLOAD,
        **extra,
    }


@login_required
@require_GET
def library(request: HttpRequest, pk: int) -> HttpResponse:
    """The page; an htmx poll (`?poll=1`) gets the poller and each source's
    state as out-of-band swaps, so forms being edited are left alone; a
    row's own poll (`?row=ID`, an upload not read yet) gets that row whole,
    since what the worker read changes its title, class and tools."""
    campaign = _campaign_for(request, pk)
    context = _library_context(campaign)
    template = LIBRARY
    if request.htmx and request.GET.get("row", "").isdigit():
        wanted = int(request.GET["row"])
        source = next((s for s in context["sources"] if s.pk == wanted), None)
        if source is None:
            return HttpResponse("")  # deleted meanwhile: the row goes
        return render(request, LIBRARY + "#row", {**context, "source": source})
    if request.htmx and request.GET.get("poll"):
        context["oob"] = True
        template += "#poll"
    elif request.htmx:
        template += "#library"
    return render(request, template, context)


@csrf_exempt
@login_required
@require_POST
def library_upload(request: HttpRequest, pk: int) -> HttpResponse:
    """Uploads one or many files.

    The size limits bite before the body is read: the request's declared
    length first, then each file as it streams in (the upload handler stops
    reading a file past the limit). Upload handlers can only be changed
    before the CSRF check reads the body, hence csrf_exempt here and
    csrf_protect on the inner view.
    """
    campaign = _campaign_for(request, pk)
    declared = int(request.META.get("CONTENT_LENGTH") or 0)
    if declared > settings.KNOWLEDGE_MAX_REQUEST_BYTES:
        limit = services.human_size(settings.KNOWLEDGE_MAX_REQUEST_BYTES)
        return _upload_response(request, campaign, status=413, refused=[
            f"This upload is {services.human_size(declared)}, over the {limit} a single upload may carry. "
            "Upload the files in smaller groups."
        ])
    handler = LimitedUploadHandler(request, limit=settings.KNOWLEDGE_MAX_UPLOAD_BYTES)
    request.upload_handlers.insert(0, handler)
    try:
        return _library_upload(request, campaign, handler)
    except (TooManyFilesSent, RequestDataTooBig):
        # Raised while the CSRF check parses the body, before the view's own
        # handling: the friendly refusal, not a bare 400 (nothing is written).
        return _too_many_files(request, campaign)


@csrf_protect
def _library_upload(request: HttpRequest, campaign: Campaign, handler: LimitedUploadHandler) -> HttpResponse:
    limit = services.human_size(settings.KNOWLEDGE_MAX_UPLOAD_BYTES)
    uploads = request.FILES.getlist("files")
    refused = [f"{name}: the file is over the {limit} limit." for name in handler.too_large]
    form = UploadOptionsForm(request.POST)
    if not form.is_valid():
        errors = [str(e) for field_errors in form.errors.values() for e in field_errors]
        return _upload_response(request, campaign, refused=errors)
    if len(uploads) > settings.KNOWLEDGE_MAX_FILES_PER_UPLOAD:
        return _too_many_files(request, campaign)
    if not uploads and not refused:
        return _upload_response(request, campaign, refused=["Choose one or more files to upload."])
    try:
        quotas.spend(quotas.UPLOADS, request.user.pk, amount=len(uploads))
    except quotas.OverQuota as exc:
        # The library as it is, the refusal above it, and a 429 (htmx swaps it in).
        page = render(request, LIBRARY + ("#library" if request.htmx else ""),
                      _library_context(campaign, refused=[str(exc)]))
        return quotas.over_quota(page, exc)
    result = services.sources_upload(
        campaign=campaign,
        files=((upload.name, upload.read()) for upload in uploads),
        classification=form.cleaned_data["classification"] or None,
        visibility=form.cleaned_data["visibility"],
        always_include=form.cleaned_data["always_include"],
    )
    return _upload_response(
        request, campaign, created=result.created, duplicates=result.duplicates, refused=refused + result.refused,
    )


def _too_many_files(request: HttpRequest, campaign: Campaign) -> HttpResponse:
    return _upload_response(request, campaign, refused=[
        f"Upload at most {settings.KNOWLEDGE_MAX_FILES_PER_UPLOAD} files at a time."
    ])


def _upload_response(request, campaign, *, created=(), duplicates=(), refused=(), reports=(), status=400) -> HttpResponse:
    """Non-htmx: messages and a redirect. htmx: the library section with the
    outcome listed above it, a 200 when a file was taken, else `status` (a
    refusal, which base.html's rule swaps in too). `reports` say what each
    lorebook brought."""
    if not request.htmx:
        if created:
            messages.success(request, f"Imported {len(created)} file{'s' if len(created) != 1 else ''}; indexing has started.")
        for line in reports:
            messages.info(request, line)
        for problem in [*duplicates, *refused]:
            messages.error(request, problem)
        return redirect("library", pk=campaign.pk)
    context = _library_context(campaign, created=created, duplicates=duplicates, refused=refused, reports=reports)
    refusal = not created and (duplicates or refused)
    return render(request, LIBRARY + "#library", context, status=status if refusal else 200)


def _book_context(source: KnowledgeSource, **extra) -> dict:
    return {"campaign": source.campaign, "source": source, **extra}


@login_required
@require_GET
def source_detail(request: HttpRequest, pk: int, source_id: int) -> HttpResponse:
    """The source's passages as they were indexed, heading trails included;
    for a lorebook, its entries, a form for a new one, its World Info
    settings and what the file kept. An entry's editor is asked for when
    it is opened (`entry_edit`): forty fields for each of a page's hundred
    entries made the page take seconds."""
    source = _source_for(request, pk, source_id)
    return render(request, "knowledge/source_detail.html", _book_context(
        source,
        passages=[] if source.is_lorebook else selectors.source_passages(source),
        entries=selectors.source_entries(source, page=request.GET.get("page")) if source.is_lorebook else None,
        kept=selectors.kept_fields(source) if source.is_lorebook else [],
        jobs=source.jobs.order_by("-created")[:10],
        new_entry=NewEntryForm(auto_id="new-entry-%s"),
        book_form=BookSettingsForm.for_source(source) if source.is_lorebook else None,
    ))


def _answer(request: HttpRequest, source: KnowledgeSource, *, error: str, saved: str, partial: str,
            context: dict) -> HttpResponse:
    """A book edit's answer: without htmx, the outcome as a message and the
    source's page; with htmx, the edited part (a 400 with the reader's
    draft and the reason when refused, which base.html's rule swaps in)."""
    if not request.htmx:
        if error:
            messages.error(request, error)
        else:
            messages.success(request, saved)
        return redirect("source_detail", pk=source.campaign_id, source_id=source.pk)
    return render(request, f"knowledge/source_detail.html#{partial}", _book_context(source, **context),
                  status=400 if error else 200)


@login_required
@require_http_methods(["GET", "POST"])
def entry_edit(request: HttpRequest, pk: int, source_id: int, entry_id: int) -> HttpResponse:
    """GET: the entry's editor (htmx, when the reader opens it), or a page
    of the entry with its editor open (no JavaScript). POST: saves the
    entry (its text, keys and every World Info setting) and re-indexes its
    book; htmx gets the entry back, with the outcome in it."""
    source = _source_for(request, pk, source_id)
    entry = get_object_or_404(LoreEntry, pk=entry_id, source=source)
    if request.method == "GET":
        entry = selectors.entry_view(entry)
        entry.form = EntryForm.for_entry(entry)
        template = "knowledge/source_detail.html#editor" if request.htmx else "knowledge/entry_edit.html"
        return render(request, template, _book_context(source, entry=entry))
    form = EntryForm.for_entry(entry, data=request.POST)
    error = form.problems()
    if form.is_valid():
        data = form.cleaned_data
        try:
            services.entry_update(
                entry=entry, title=data["title"], keys=data["keys"], text=data["text"], enabled=data["enabled"],
                constant=data["constant"], secondary_keys=data["secondary_keys"], settings=form.settings(),
                secret_seat=data["secret_seat"],
            )
        except services.ImportRefused as exc:
            error = str(exc)
    entry = selectors.entry_view(LoreEntry.objects.get(pk=entry.pk))
    entry.form = form if error else None
    return _answer(request, source, error=f"{entry}: {error}" if error and not request.htmx else error,
                   saved=f"Saved “{entry}”; the book is being re-indexed.", partial="entry",
                   context={"entry": entry, "entry_error": error, "entry_saved": not error})


@login_required
@require_POST
def entry_add(request: HttpRequest, pk: int, source_id: int) -> HttpResponse:
    """Adds an entry at the end of the book and re-indexes it; htmx gets the
    form back, emptied, with the new entry under it to edit."""
    source = _source_for(request, pk, source_id)
    if not source.is_lorebook:
        raise Http404("Only lorebooks have entries.")
    form = NewEntryForm(request.POST, auto_id="new-entry-%s")
    error, added = form.problems(), None
    if form.is_valid():
        try:
            added = services.entry_create(source=source, **form.cleaned_data)
        except services.ImportRefused as exc:
            error = str(exc)
    if added is not None:
        added = selectors.entry_view(added)
        form = NewEntryForm(auto_id="new-entry-%s")
    return _answer(request, source, error=error, saved=f"Added “{added}”; the book is being re-indexed.",
                   partial="add", context={"new_entry": form, "added": added, "add_error": error})


@login_required
@require_http_methods(["GET", "POST"])
def entry_delete(request: HttpRequest, pk: int, source_id: int, entry_id: int) -> HttpResponse:
    """Asks first (the page without JavaScript; htmx asks in the browser),
    then deletes the entry and re-indexes its book."""
    source = _source_for(request, pk, source_id)
    entry = get_object_or_404(LoreEntry, pk=entry_id, source=source)
    if request.method == "GET":
        return render(request, "knowledge/entry_delete.html", _book_context(source, entry=entry))
    title, error = str(entry), ""
    try:
        services.entry_delete(entry=entry)
    except services.ImportRefused as exc:
        error = str(exc)
    context = {"deleted": title}
    if error:
        entry = selectors.entry_view(LoreEntry.objects.get(pk=entry_id))
        entry.form = EntryForm.for_entry(entry)
        context = {"entry": entry, "entry_error": error}
    return _answer(request, source, error=error, saved=f"Deleted “{title}”; the book is being re-indexed.",
                   partial="entry" if error else "deleted", context=context)


@login_required
@require_POST
def book_settings(request: HttpRequest, pk: int, source_id: int) -> HttpResponse:
    """Saves a lorebook's World Info settings (no re-index: the passages
    are the same); htmx gets the settings form back."""
    source = _source_for(request, pk, source_id)
    if not source.is_lorebook:
        raise Http404("Only lorebooks have World Info settings.")
    form = BookSettingsForm.for_source(source, data=request.POST)
    error = form.problems()
    if form.is_valid():
        services.book_settings_update(source=source, settings=form.book_settings())
        form = BookSettingsForm.for_source(source)
    return _answer(request, source, error=error, saved="Saved the book's World Info settings.", partial="settings",
                   context={"book_form": form, "settings_error": error, "settings_saved": not error})


@login_required
@require_GET
def source_export(request: HttpRequest, pk: int, source_id: int) -> HttpResponse:
    """The lorebook, edits included, as SillyTavern World Info JSON."""
    source = _source_for(request, pk, source_id)
    if not source.is_lorebook:
        raise Http404("Only lorebooks export as World Info.")
    response = StreamingHttpResponse(
        _in_batches(services.world_info_stream(source)), content_type="application/json; charset=utf-8"
    )
    name = slugify(source.title) or f"lorebook-{source.pk}"
    response["Content-Disposition"] = f'attachment; filename="{name}.json"'
    return response


async def _in_batches(pieces: Iterator[str], *, size: int = 200) -> AsyncIterator[bytes]:
    """A sync iterator (that reads the database) served by ASGI a batch at
    a time: Django would read a sync iterator whole before sending it."""
    def take() -> bytes:
        return "".join(islice(pieces, size)).encode()

    while batch := await sync_to_async(take)():
        yield batch


def _row_response(request: HttpRequest, source: KnowledgeSource, *, draft=None, error: str = "") -> HttpResponse:
    """A source's row; refused, it answers 400 with the reader's choices
    (`draft`) kept in its fields and the reason under them."""
    campaign = source.campaign
    sources = selectors.library_sources(campaign)
    row = next((s for s in sources if s.pk == source.pk), None)
    if row is None:
        raise Http404("No such source.")
    return render(request, LIBRARY + "#row", {
        "campaign": campaign,
        "source": row,
        "draft": draft,
        "row_error": error,
        "in_flight": selectors.in_flight(sources),
        "poll_oob": True,
    }, status=400 if error else 200)


@login_required
@require_POST
def source_edit(request: HttpRequest, pk: int, source_id: int) -> HttpResponse:
    source = _source_for(request, pk, source_id)
    form = SourceForm(request.POST, instance=KnowledgeSource.objects.get(pk=source.pk))
    error = ""
    if form.is_valid():
        services.source_update(source=source, **form.cleaned_data)
    else:
        error = " ".join(str(e) for errors in form.errors.values() for e in errors)
    if not request.htmx:
        if error:
            messages.error(request, f"{source.title}: {error}")
        return redirect("library", pk=pk)
    source.refresh_from_db()
    draft = {
        "title": request.POST.get("title", ""),
        "classification": request.POST.get("classification", ""),
        "visibility": request.POST.get("visibility", ""),
        "always_include": bool(request.POST.get("always_include")),
        "enabled": bool(request.POST.get("enabled")),
        "secret_seat": request.POST.get("secret_seat", ""),
    } if error else None
    return _row_response(request, source, draft=draft, error=error)


@login_required
@require_POST
def source_reindex(request: HttpRequest, pk: int, source_id: int) -> HttpResponse:
    source = _source_for(request, pk, source_id)
    services.source_reindex(source=source)
    if not request.htmx:
        messages.success(request, f"Re-indexing “{source.title}”.")
        return redirect("library", pk=pk)
    source.refresh_from_db()
    return _row_response(request, source)


@login_required
@require_http_methods(["GET", "POST"])
def source_delete(request: HttpRequest, pk: int, source_id: int) -> HttpResponse:
    source = _source_for(request, pk, source_id)
    if request.method == "POST":
        title = source.title
        services.source_delete(source=source)
        messages.success(request, f"Deleted “{title}” and its passages.")
        return redirect("library", pk=pk)
    return render(request, "knowledge/source_delete.html", {"campaign": source.campaign, "source": source})

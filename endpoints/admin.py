"""The profile admin: the form with its write-only key, the server's
window as last probed (or being probed, asked again until it answers), and
the "Test connection" page."""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpResponseNotAllowed, JsonResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from contextbuild import instruct

from . import instructprobe, samplers, window
from .embeddings import model_of
from .forms import PREFIX, EndpointProfileForm
from .localembed import is_local
from .models import EndpointProfile
from .probeline import window_line
from .probing import check_connection
from .status import embedding_status, local_problem
from .tasks import probe_endpoint


@admin.register(EndpointProfile)
class EndpointProfileAdmin(admin.ModelAdmin):
    form = EndpointProfileForm
    list_display = ["name", "base_url", "chat_model", "embedding_model", "context_token_budget", "is_default", "has_key"]
    list_filter = ["is_default", "is_scripted_demo"]
    search_fields = ["name", "base_url", "chat_model"]
    readonly_fields = [
        "server_window", "detected_instruct_template", "sampler_support", "token_ratio", "semantic_search", "connection",
    ]
    fieldsets = [
        (None, {"fields": ["name", "base_url", "api_key", "clear_api_key", "chat_model", "is_default", "connection"]}),
        ("How prompts are sent", {"fields": [
            "api_mode", "instruct_template", "detected_instruct_template", "temperature", "max_output_tokens",
            "thinking", "reasoning_reserve_tokens",
        ]}),
        ("Window and timing", {"fields": [
            "context_token_budget", "learned_window_tokens", "server_window", "token_ratio",
            "first_byte_timeout_seconds", "timeout_seconds", "max_concurrent_requests",
        ]}),
        ("Samplers", {"fields": ["backend", "sampler_support", *(PREFIX + name for name in samplers.settings())],
                      "description": "Empty settings are left to the server. Only what this kind of server reads is sent."}),
        ("Semantic search", {"fields": ["embedding_model", "semantic_search"]}),
    ]

    class Media:
        js = ["endpoints/window_line.js"]

    @admin.display(boolean=True, description="API key")
    def has_key(self, obj: EndpointProfile) -> bool:
        return obj.has_api_key

    @admin.display(description="Server's window")
    def server_window(self, obj: EndpointProfile) -> str:
        line = window_line(obj, now=timezone.now())
        if not line.checking:
            return line.text
        url = reverse("admin:endpoints_endpointprofile_window", args=[obj.pk])
        return format_html('<span role="status" data-window-poll="{}">{}</span>', url, line.text)

    @admin.display(description="Detected template")
    def detected_instruct_template(self, obj: EndpointProfile) -> str:
        return template_line(obj)

    @admin.display(description="Samplers on this server")
    def sampler_support(self, obj: EndpointProfile) -> str:
        kind, why = samplers.backend_of(obj)
        rows = format_html_join(
            "", "<tr><th scope='row'>{}</th><td>{}</td><td>{}</td></tr>",
            ((r["label"], "—" if r["value"] is None else r["value"], r["effect"]) for r in samplers.rows(obj)),
        )
        return format_html(
            "<p>{} ({}).</p><table class='sampler-support'><thead><tr><th>Setting</th><th>Here</th>"
            "<th>What this server does with it</th></tr></thead><tbody>{}</tbody></table>",
            samplers.backends()[kind]["label"], why, rows,
        )

    @admin.display(description="Semantic search")
    def semantic_search(self, obj: EndpointProfile) -> str:
        return embedding_status(obj, now=timezone.now())

    @admin.display(description="Connection")
    def connection(self, obj: EndpointProfile) -> str:
        if obj.pk is None:
            return "Save the profile first."
        # A button of the change form (which carries the CSRF token), posted
        # to the test instead: a form may not hold another form.
        url = reverse("admin:endpoints_endpointprofile_test", args=[obj.pk])
        return format_html(
            '<button type="submit" class="button" formaction="{}" formmethod="post" formnovalidate>'
            "Test connection</button>",
            url,
        )

    def save_model(self, request, obj: EndpointProfile, form, change) -> None:
        """A saved profile may point at another server or model: what was
        probed is forgotten and the server is asked again."""
        obj.probed_at = None
        obj.probed_window_tokens = None
        obj.probe_note = ""
        obj.token_ratio = None
        super().save_model(request, obj, form, change)
        problem = local_problem(obj, now=timezone.now())
        if problem:
            messages.warning(request, problem)
        transaction.on_commit(lambda: probe_endpoint.delay(obj.pk))

    def get_urls(self):
        test = path(
            "<int:profile_id>/test-connection/", self.admin_site.admin_view(self.test_connection),
            name="endpoints_endpointprofile_test",
        )
        line = path(
            "<int:profile_id>/server-window/", self.admin_site.admin_view(self.server_window_line),
            name="endpoints_endpointprofile_window",
        )
        return [test, line, *super().get_urls()]

    def server_window_line(self, request, profile_id: int) -> JsonResponse:
        """The "Server's window" line as it is now, for the change page to
        ask again while the probe its save queued is under way."""
        profile = get_object_or_404(EndpointProfile, pk=profile_id)
        if not self.has_view_permission(request, profile):
            raise PermissionDenied
        if request.method != "GET":
            return HttpResponseNotAllowed(["GET"])
        line = window_line(profile, now=timezone.now())
        return JsonResponse({"text": line.text, "checking": line.checking})

    def test_connection(self, request, profile_id: int):
        """GET shows the page with its button; POST (CSRF-checked, by an admin
        who may change the profile) asks the server: its models, the probed
        window and whether embeddings work (at what width), or says plainly
        what failed. The probe found is kept, as a turn's would be."""
        profile = get_object_or_404(EndpointProfile, pk=profile_id)
        if not self.has_view_permission(request, profile):
            raise PermissionDenied
        if request.method not in ("GET", "POST"):
            return HttpResponseNotAllowed(["GET", "POST"])
        check = None
        if request.method == "POST":
            if not self.has_change_permission(request, profile):
                raise PermissionDenied
            check = _checked(profile)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Test connection: {profile.name}",
            "profile": profile,
            "check": check,
            "template_line": template_line(profile),
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/endpoints/endpointprofile/test_connection.html", context)


def _checked(profile: EndpointProfile):
    """Runs the connection check and keeps the window it probed."""
    window.forget_probe(profile)
    local = is_local(model_of(profile))
    # A local model is not the server's to answer for: the workers run it.
    check = check_connection(profile, embedding_model="" if local else model_of(profile))
    if local and not check.refused:
        check.embedding_error = embedding_status(profile, now=timezone.now())
    if check.window is not None:
        window.store_probe(profile, check.window)
    if not check.refused and not check.models_error:
        instructprobe.store_detection(profile)
    return check


def template_line(profile: EndpointProfile) -> str:
    """What completions mode renders in, and why: the admin's choice, or
    what the server's model was detected as."""
    chosen = instruct.template(profile.template_name)
    if profile.instruct_template:
        line = f"{chosen.label}, chosen on this profile."
        if profile.detected_template and profile.detected_template != profile.instruct_template:
            line += f" The server's model was detected as {instruct.template(profile.detected_template).label}."
        return line
    if profile.detected_template:
        return f"{chosen.label}: {profile.detected_template_why}."
    return "Not detected yet: the server is asked on the next turn or connection test (plain labels until then)."

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from knowledge.embeddings import model_of
from knowledge.localembed import is_local
from knowledge.selectors import embedding_status, local_problem

from . import lineage, modelclient, prompting
from .forms import EndpointProfileForm
from .models import Action, Campaign, ContextSnapshot, EndpointProfile

STORY_PREVIEW = 50


@admin.register(EndpointProfile)
class EndpointProfileAdmin(admin.ModelAdmin):
    form = EndpointProfileForm
    list_display = ["name", "base_url", "chat_model", "embedding_model", "context_token_budget", "is_default", "has_key"]
    list_filter = ["is_default", "is_scripted_demo"]
    search_fields = ["name", "base_url", "chat_model"]
    readonly_fields = ["server_window", "token_ratio", "semantic_search", "connection"]

    @admin.display(boolean=True, description="API key")
    def has_key(self, obj: EndpointProfile) -> bool:
        return obj.has_api_key

    @admin.display(description="Server's window")
    def server_window(self, obj: EndpointProfile) -> str:
        if obj.pk is None or obj.probed_at is None:
            return "Not asked yet: the server is asked when the profile is saved and before the next turn."
        if obj.probed_window_tokens:
            return f"{obj.probed_window_tokens:,} tokens, from {obj.probed_window_source} ({obj.probed_window_detail})"
        return f"Not verified: {obj.probed_window_detail or obj.probed_window_source}"

    @admin.display(description="Semantic search")
    def semantic_search(self, obj: EndpointProfile) -> str:
        return embedding_status(obj, now=timezone.now())

    @admin.display(description="Connection")
    def connection(self, obj: EndpointProfile) -> str:
        if obj.pk is None:
            return "Save the profile first."
        url = reverse("admin:storyapp_endpointprofile_test", args=[obj.pk])
        return format_html('<a class="button" href="{}">Test connection</a>', url)

    def save_model(self, request, obj: EndpointProfile, form, change) -> None:
        """A saved profile may point at another server or model: what was
        probed is forgotten and the server is asked again."""
        obj.probed_at = None
        obj.probed_window_tokens = None
        obj.token_ratio = None
        super().save_model(request, obj, form, change)
        problem = local_problem(obj, now=timezone.now())
        if problem:
            messages.warning(request, problem)
        from .tasks import probe_endpoint

        transaction.on_commit(lambda: probe_endpoint.delay(obj.pk))

    def get_urls(self):
        test = path(
            "<int:profile_id>/test-connection/", self.admin_site.admin_view(self.test_connection),
            name="storyapp_endpointprofile_test",
        )
        return [test, *super().get_urls()]

    def test_connection(self, request, profile_id: int):
        """Lists the server's models, the probed window and whether embeddings
        work (at what width), or says plainly what failed. The probe found
        here is kept, as a turn's would be."""
        profile = get_object_or_404(EndpointProfile, pk=profile_id)
        if not self.has_view_permission(request, profile):
            raise PermissionDenied
        prompting.forget_probe(profile)
        local = is_local(model_of(profile))
        # A local model is not the server's to answer for: the workers run it.
        check = modelclient.check_connection(profile, embedding_model="" if local else model_of(profile))
        if local:
            check.embedding_error = embedding_status(profile, now=timezone.now())
        if check.window is not None:
            prompting.store_probe(profile, check.window)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Test connection: {profile.name}",
            "profile": profile,
            "check": check,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/storyapp/endpointprofile/test_connection.html", context)


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ["title", "owner", "endpoint", "narration_length", "updated"]
    list_filter = ["narration_length", "endpoint", "owner"]
    search_fields = ["title", "owner__username", "plot_essentials"]
    raw_id_fields = ["owner", "head"]
    readonly_fields = ["story", "created", "updated"]

    @admin.display(description=f"Story (the newest {STORY_PREVIEW} actions of the lineage)")
    def story(self, obj: Campaign) -> str:
        actions = lineage.tail(obj.pk, obj.head_id, STORY_PREVIEW)
        if not actions:
            return "Not started."
        rows = format_html_join(
            "", "<p><strong>{}</strong> {}</p>", ((a.get_kind_display(), a.text) for a in actions)
        )
        return format_html('<div style="max-height:30rem;overflow:auto;white-space:pre-wrap">{}</div>', rows)


@admin.register(Action)
class ActionAdmin(admin.ModelAdmin):
    list_display = ["id", "campaign", "kind", "status", "depth", "created"]
    list_filter = ["kind", "status"]
    search_fields = ["text", "campaign__title"]
    raw_id_fields = ["campaign", "parent"]

    def has_add_permission(self, request) -> bool:
        return False  # actions are written by play, never typed in raw

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ContextSnapshot)
class ContextSnapshotAdmin(admin.ModelAdmin):
    list_display = ["action", "created"]
    raw_id_fields = ["action"]

    def has_add_permission(self, request) -> bool:
        return False  # a snapshot records what a narration was sent; it cannot be made up

    def has_change_permission(self, request, obj=None) -> bool:
        return False

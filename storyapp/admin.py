from django.contrib import admin
from django.utils.html import format_html, format_html_join

from . import lineage
from .models import Action, Campaign, ContextSnapshot, Membership

STORY_PREVIEW = 50


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]
    fields = ["user", "role", "seat_name", "seat_description", "joined", "last_seen"]
    readonly_fields = ["joined", "last_seen"]


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    inlines = [MembershipInline]
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


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["campaign", "user", "role", "seat_name", "joined"]
    list_filter = ["role", "campaign"]
    search_fields = ["user__username", "campaign__title", "seat_name"]
    raw_id_fields = ["campaign", "user"]

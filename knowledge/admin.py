from django.contrib import admin, messages
from django.utils import timezone

from . import services
from .models import IndexJob, KnowledgeChunk, KnowledgeSource


@admin.action(description="Re-index the selected sources")
def reindex_sources(modeladmin, request, queryset):
    for source in queryset:
        services.source_reindex(source=source)
    messages.success(request, f"Queued {queryset.count()} source(s) for re-indexing.")


class IndexJobInline(admin.TabularInline):
    model = IndexJob
    extra = 0
    can_delete = False
    fields = ["kind", "state", "attempts", "progress", "step", "created", "finished", "error"]
    readonly_fields = fields
    ordering = ["-created"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(KnowledgeSource)
class KnowledgeSourceAdmin(admin.ModelAdmin):
    list_display = ["title", "campaign", "classification", "visibility", "always_include", "enabled",
                    "index_state", "passage_count", "token_count", "embedding_model", "updated"]
    list_filter = ["index_state", "classification", "visibility", "enabled"]
    search_fields = ["title", "original_filename", "campaign__title", "sha256"]
    raw_id_fields = ["campaign"]
    readonly_fields = ["original_filename", "sha256", "size_bytes", "index_state", "error", "passage_count",
                       "token_count", "indexed_sha256", "embedding_model", "indexed_at", "created", "updated", "content"]
    actions = [reindex_sources]
    inlines = [IndexJobInline]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("campaign")

    def has_add_permission(self, request) -> bool:
        return False  # sources come in through the library or import_knowledge


@admin.action(description="Retry the selected finished jobs")
def retry_jobs(modeladmin, request, queryset):
    for job in queryset.exclude(state__in=IndexJob.ACTIVE):
        services.job_retry(job=job)
    messages.success(request, "Queued the selected jobs again.")


@admin.action(description="Cancel the selected queued or running jobs")
def cancel_jobs(modeladmin, request, queryset):
    for job in queryset.in_flight():
        services.job_cancel(job=job, now=timezone.now())


@admin.action(description="Re-index the sources of the selected jobs")
def reindex_job_sources(modeladmin, request, queryset):
    for job in queryset.select_related("source"):
        services.source_reindex(source=job.source)


@admin.register(IndexJob)
class IndexJobAdmin(admin.ModelAdmin):
    list_display = ["id", "source", "kind", "state", "attempts", "progress", "step", "created", "finished"]
    list_filter = ["state", "kind"]
    search_fields = ["source__title", "source__campaign__title", "error", "task_id"]
    raw_id_fields = ["source"]
    actions = [retry_jobs, cancel_jobs, reindex_job_sources]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(KnowledgeChunk)
class KnowledgeChunkAdmin(admin.ModelAdmin):
    list_display = ["source", "index", "heading_path", "token_count"]
    search_fields = ["heading_path", "source__title"]
    raw_id_fields = ["source", "campaign"]
    exclude = ["search"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

from django.urls import path

from . import views

urlpatterns = [
    path("campaigns/<int:pk>/library/", views.library, name="library"),
    path("campaigns/<int:pk>/library/upload/", views.library_upload, name="library_upload"),
    path("campaigns/<int:pk>/library/<int:source_id>/", views.source_detail, name="source_detail"),
    path("campaigns/<int:pk>/library/<int:source_id>/edit/", views.source_edit, name="source_edit"),
    path("campaigns/<int:pk>/library/<int:source_id>/reindex/", views.source_reindex, name="source_reindex"),
    path("campaigns/<int:pk>/library/<int:source_id>/delete/", views.source_delete, name="source_delete"),
    path("campaigns/<int:pk>/library/<int:source_id>/export.json", views.source_export, name="source_export"),
    path(
        "campaigns/<int:pk>/library/<int:source_id>/entries/<int:entry_id>/",
        views.entry_edit,
        name="entry_edit",
    ),
    path("campaigns/<int:pk>/library/<int:source_id>/entries/new/", views.entry_add, name="entry_add"),
    path(
        "campaigns/<int:pk>/library/<int:source_id>/entries/<int:entry_id>/delete/",
        views.entry_delete,
        name="entry_delete",
    ),
    path("campaigns/<int:pk>/library/<int:source_id>/world-info/", views.book_settings, name="book_settings"),
]

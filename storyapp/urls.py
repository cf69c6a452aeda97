from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

from . import views
from .limits import ThrottledAuthenticationForm

campaign_patterns = [
    path("", views.campaign_play, name="campaign_play"),
    path("edit/", views.campaign_edit, name="campaign_edit"),
    path("delete/", views.campaign_delete, name="campaign_delete"),
    path("story/earlier/", views.story_earlier, name="story_earlier"),
    path("turn/", views.turn_submit, name="turn_submit"),
    path("undo/", views.turn_undo, name="turn_undo"),
    path("redo/", views.turn_redo, name="turn_redo"),
    path("retry/", views.turn_retry, name="turn_retry"),
    path("actions/<int:action_id>/", views.action_detail, name="action_detail"),
    path("actions/<int:action_id>/edit/", views.action_edit, name="action_edit"),
    path("actions/<int:action_id>/choose/", views.alternative_choose, name="alternative_choose"),
    path("actions/<int:action_id>/stop/", views.narration_stop, name="narration_stop"),
    path("actions/<int:action_id>/stream/", views.action_stream, name="action_stream"),
    path("actions/<int:action_id>/context/", views.context_inspector, name="context_inspector"),
    path("actions/<int:action_id>/jump/", views.branch_jump, name="branch_jump"),
    path("actions/<int:action_id>/delete/", views.action_delete, name="action_delete"),
    path("memory/", views.campaign_memory, name="campaign_memory"),
    path("state/", views.campaign_state, name="campaign_state"),
    path("branches/", views.campaign_branches, name="campaign_branches"),
    path("export/story.md", views.story_export, {"as_html": False}, name="story_export_markdown"),
    path("export/story.html", views.story_export, {"as_html": True}, name="story_export_html"),
    path("export/bundle.json", views.campaign_export_bundle, name="campaign_export_bundle"),
]

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="campaign_list", permanent=False)),
    path("accounts/login/", auth_views.LoginView.as_view(authentication_form=ThrottledAuthenticationForm),
         name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("endpoints.urls")),
    path("admin/", admin.site.urls),
    path("campaigns/", views.campaign_list, name="campaign_list"),
    path("campaigns/new/", views.campaign_create, name="campaign_create"),
    path("campaigns/new/from-card/", views.campaign_from_card, name="campaign_from_card"),
    path("campaigns/import/", views.campaign_import, name="campaign_import"),
    path("campaigns/<int:pk>/", include(campaign_patterns)),
    path("", include("knowledge.urls")),
    path("models/", views.connect_model, name="connect_model"),
    path("", include("ops.urls")),
]

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from .logins import ThrottledAdminAuthenticationForm, ThrottledAuthenticationForm
from .views import (
    account,
    branches,
    campaigns,
    connect,
    derived,
    events,
    export,
    inspector,
    members,
    panel,
    play,
    review,
    stream,
    turns,
)

campaign_patterns = [
    path("", play.campaign_play, name="campaign_play"),
    path("edit/", campaigns.campaign_edit, name="campaign_edit"),
    path("delete/", campaigns.campaign_delete, name="campaign_delete"),
    path("story/earlier/", play.story_earlier, name="story_earlier"),
    path("turn/", play.turn_submit, name="turn_submit"),
    path("undo/", play.turn_undo, name="turn_undo"),
    path("redo/", play.turn_redo, name="turn_redo"),
    path("retry/", play.turn_retry, name="turn_retry"),
    path("turn-order/", turns.campaign_turn_order, name="campaign_turn_order"),
    path("turn-order/close/", turns.round_close, name="round_close"),
    path("turn-order/pass/", turns.turn_pass, name="turn_pass"),
    path("actions/<int:action_id>/", play.action_detail, name="action_detail"),
    path("actions/<int:action_id>/edit/", play.action_edit, name="action_edit"),
    path("actions/<int:action_id>/choose/", play.alternative_choose, name="alternative_choose"),
    path("actions/<int:action_id>/stop/", play.narration_stop, name="narration_stop"),
    path("actions/<int:action_id>/approve/", review.narration_approve_view, name="narration_approve"),
    path("whispers/", review.whisper_send, name="whisper_send"),
    path("whispers/panel/", review.whispers_panel_view, name="whispers_panel"),
    path("actions/<int:action_id>/stream/", stream.action_stream, name="action_stream"),
    path("events/", events.campaign_events, name="campaign_events"),
    path("actions/<int:action_id>/context/", inspector.context_inspector, name="context_inspector"),
    path("actions/<int:action_id>/jump/", branches.branch_jump, name="branch_jump"),
    path("actions/<int:action_id>/delete/", play.action_delete, name="action_delete"),
    path("derived/<int:job_id>/retry/", derived.derived_retry, name="derived_retry"),
    path("memory/", panel.campaign_memory, name="campaign_memory"),
    path("state/", panel.campaign_state, name="campaign_state"),
    path("branches/", branches.campaign_branches, name="campaign_branches"),
    path("export/story.md", export.story_export, {"as_html": False}, name="story_export_markdown"),
    path("export/story.html", export.story_export, {"as_html": True}, name="story_export_html"),
    path("export/bundle.json", export.campaign_export_bundle, name="campaign_export_bundle"),
    path("members/", members.campaign_members, name="campaign_members"),
    path("members/invite/", members.member_invite, name="member_invite"),
    path("members/seat/", members.seat_edit, name="seat_edit"),
    path("members/leave/", members.member_leave, name="member_leave"),
    path("members/<int:member_id>/", members.member_change, name="member_change"),
    path("members/<int:member_id>/remove/", members.member_remove, name="member_remove"),
    path("members/<int:member_id>/hand-over/", members.campaign_hand_over, name="campaign_hand_over"),
]

# The admin's log-in goes through the same throttle as the reader's.
admin.site.login_form = ThrottledAdminAuthenticationForm

#: A request that found the database pool exhausted answers 503, not 500.
handler500 = "storyapp.views.busy.server_error"

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="campaign_list", permanent=False)),
    # Every page links its icon; this is for what browsers ask of a page that
    # links none (a JSON answer such as /readyz, a file opened on its own).
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("accounts/login/", auth_views.LoginView.as_view(authentication_form=ThrottledAuthenticationForm),
         name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password/", account.PasswordChange.as_view(), name="password_change"),
    path("accounts/password/done/", account.PasswordChangeDone.as_view(), name="password_change_done"),
    path("", include("endpoints.urls")),
    # The admin's own password change is not throttled: staff use the readers' page.
    path("admin/password_change/", RedirectView.as_view(pattern_name="password_change", permanent=False)),
    path("admin/", admin.site.urls),
    path("campaigns/", campaigns.campaign_list, name="campaign_list"),
    path("campaigns/new/", campaigns.campaign_create, name="campaign_create"),
    path("campaigns/new/from-card/", campaigns.campaign_from_card, name="campaign_from_card"),
    path("campaigns/import/", campaigns.campaign_import, name="campaign_import"),
    path("campaigns/<int:pk>/", include(campaign_patterns)),
    path("", include("knowledge.urls")),
    path("models/", connect.connect_model, name="connect_model"),
    path("", include("ops.urls")),
]

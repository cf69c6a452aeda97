"""The reader's own account: changing their password."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import reverse_lazy

from ..logins import ThrottledPasswordChangeForm


class PasswordChange(auth_views.PasswordChangeView):
    """Django's password change, throttled like the log-in (storyapp.logins)."""

    form_class = ThrottledPasswordChangeForm
    template_name = "registration/password_change.html"
    success_url = reverse_lazy("password_change_done")

    def get_form_kwargs(self):
        return {**super().get_form_kwargs(), "request": self.request}


class PasswordChangeDone(auth_views.PasswordChangeDoneView):
    template_name = "registration/password_change_done.html"

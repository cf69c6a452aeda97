"""The one log-in throttle: the reader's log-in page, the admin's, and the
password change page all count wrong passwords here.

Two counts per attempt, both in the database (a lockout must hold while
Redis is down, and the database is what every web process shares anyway):

1. the username from this client address (storyapp.addresses): after
   LOREMASTER_LOGIN_FAILURES wrong passwords in the window, that pair is
   refused, the right password too, for the lockout;
2. the username from anywhere, with a higher limit
   (LOREMASTER_LOGIN_FAILURES_PER_USERNAME), so many addresses together
   cannot go on guessing one account's password.

The rule is the pure `after_failure`; the rest loads and stores its rows.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm, PasswordChangeForm
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from . import passwords
from .addresses import client_address
from .models import LoginFailures

WINDOW = timedelta(minutes=15)
LOCKOUT = timedelta(minutes=15)
LOGIN_LOCKED_MESSAGE = (f"Too many failed log-ins for this username. "
                        f"Try again in {int(LOCKOUT.total_seconds()) // 60} minutes.")


@dataclass(frozen=True)
class Count:
    failures: int
    window_started: datetime
    locked_until: datetime | None = None


def after_failure(count: Count | None, *, now: datetime, allowed: int) -> Count:
    """The count after one more wrong password: a window that has ended
    starts again, and the failure that reaches `allowed` locks the key."""
    if count is None or now - count.window_started > WINDOW:
        count = Count(0, now)
    failures = count.failures + 1
    if failures >= allowed:
        return Count(0, now, now + LOCKOUT)
    return Count(failures, count.window_started, count.locked_until)


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _limits(username: str, address: str) -> list[tuple[str, int]]:
    name = username.casefold()
    return [(_key("pair", name, address), settings.LOREMASTER_LOGIN_FAILURES),
            (_key("username", name), settings.LOREMASTER_LOGIN_FAILURES_PER_USERNAME)]


def login_locked(*, username: str, address: str, now: datetime) -> bool:
    keys = [key for key, _ in _limits(username, address)]
    return LoginFailures.objects.filter(key__in=keys, locked_until__gt=now).exists()


@transaction.atomic
def login_failed(*, username: str, address: str, now: datetime) -> None:
    """Counts one wrong password against both keys."""
    for key, allowed in _limits(username, address):
        LoginFailures.objects.get_or_create(key=key, defaults={"window_started": now})
        row = LoginFailures.objects.select_for_update().get(key=key)
        count = after_failure(Count(row.failures, row.window_started, row.locked_until), now=now, allowed=allowed)
        row.failures, row.window_started, row.locked_until = count.failures, count.window_started, count.locked_until
        row.save(update_fields=["failures", "window_started", "locked_until"])


def login_succeeded(*, username: str, address: str) -> None:
    """The right password clears this address's count (not the username's:
    a reader logging in must not reset a guesser's count elsewhere)."""
    LoginFailures.objects.filter(key=_limits(username, address)[0][0]).delete()


def forget_expired(*, now: datetime) -> int:
    """Deletes the counts whose window and lockout are both over (the sweep)."""
    ended = Q(window_started__lt=now - WINDOW) & (Q(locked_until__isnull=True) | Q(locked_until__lt=now))
    return LoginFailures.objects.filter(ended).delete()[0]


def on_sweep(sender=None, *, now: datetime, **kwargs) -> None:
    """The workers' periodic sweep (lifecycle.signals.periodic_sweep)."""
    forget_expired(now=now)


class _Throttled:
    """For a log-in form: a locked username and address is refused before
    the password is checked; a wrong password is counted."""

    def clean(self):
        who = {"username": self.cleaned_data.get("username") or "",
               "address": client_address(self.request) if self.request else ""}
        if login_locked(**who, now=timezone.now()):
            raise ValidationError(LOGIN_LOCKED_MESSAGE, code="throttled")
        try:
            cleaned = super().clean()
        except ValidationError as error:
            if error.code == "invalid_login":
                login_failed(**who, now=timezone.now())
            raise
        login_succeeded(**who)
        return cleaned


class ThrottledAuthenticationForm(_Throttled, AuthenticationForm):
    """The reader's log-in form."""


class ThrottledAdminAuthenticationForm(_Throttled, AdminAuthenticationForm):
    """The admin's log-in form: it was not throttled at all."""


class ThrottledPasswordChangeForm(PasswordChangeForm):
    """A reader's password change: the old password is a password guess like
    a log-in's, so it is throttled the same, and hashed without a connection."""

    def __init__(self, user, *args, request=None, **kwargs):
        super().__init__(user, *args, **kwargs)
        self.request = request

    def clean_old_password(self):
        who = {"username": self.user.get_username(),
               "address": client_address(self.request) if self.request else ""}
        if login_locked(**who, now=timezone.now()):
            raise ValidationError(LOGIN_LOCKED_MESSAGE, code="throttled")
        old = self.cleaned_data["old_password"]
        if not passwords.check(self.user, old):
            login_failed(**who, now=timezone.now())
            raise ValidationError(self.error_messages["password_incorrect"], code="password_incorrect")
        return old

    def save(self, commit=True):
        passwords.make(self.user, self.cleaned_data["new_password1"])
        if commit:
            self.user.save()
        return self.user

"""An upload with no logged-in session is answered before its body is read
(issue 23, finding 10): an anonymous 20 MB upload was spooled to disk first."""

import pytest
from django.conf import settings
from django.test import Client as DjangoClient

from tests.storyapp.test_body_limit import MB, Client, post

MULTIPART = b"multipart/form-data; boundary=x"


def test_an_anonymous_upload_is_sent_to_log_in_unread():
    client = post("/campaigns/1/library/upload/", Client(chunks=20), length=20 * MB, content_type=MULTIPART)
    assert client.status == 302
    assert client.pulled == 0
    location = dict(next(m for m in client.sent if m["type"] == "http.response.start")["headers"])[b"location"]
    assert location.startswith(b"/accounts/login/?next=")


@pytest.mark.django_db(transaction=True)
def test_a_made_up_session_cookie_is_anonymous_too():
    made_up = "x" * 32
    client = post("/campaigns/import/", Client(chunks=20), length=20 * MB, content_type=MULTIPART,
                  extra_headers=[(b"cookie", f"{settings.SESSION_COOKIE_NAME}={made_up}".encode())])
    assert client.status == 302
    assert client.pulled == 0


@pytest.mark.django_db(transaction=True)
def test_a_logged_in_readers_upload_reaches_django(alice):
    session = DjangoClient()
    session.force_login(alice)
    cookie = f"{settings.SESSION_COOKIE_NAME}={session.cookies[settings.SESSION_COOKIE_NAME].value}"
    client = post("/campaigns/import/", Client(chunks=1, chunk=100), length=100, content_type=MULTIPART,
                  extra_headers=[(b"cookie", cookie.encode())])
    assert client.pulled == 1
    assert client.status == 403  # no CSRF token: Django's answer, after reading the body

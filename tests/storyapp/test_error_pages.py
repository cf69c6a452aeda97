"""The error pages (issue 24): a bad URL gets the site's own page with the
way back to the campaigns, not Django's bare "Not Found"; the 403 and 500
pages render from nothing the failure could have taken with it (the
database, the session, a context processor); and every page's icon exists,
so no page logs a 404 for it."""

import re

import pytest
from django.contrib.staticfiles import finders
from django.core.exceptions import PermissionDenied
from django.test import Client, RequestFactory
from django.views import defaults

from tests.factories import EndpointProfileFactory


def assert_the_sites_page_with_the_way_back(html: str):
    assert 'href="/campaigns/"' in html and "Back to your campaigns" in html
    assert "css/app.css" in html and 'class="topbar"' in html


@pytest.mark.parametrize("reader", [False, True])
def test_a_bad_url_gets_the_sites_not_found_page(client, alice, settings, reader):
    settings.DEBUG = False
    if reader:
        client.force_login(alice)
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    html = response.content.decode()
    assert_the_sites_page_with_the_way_back(html)
    assert "Nothing is here" in html and "<code>/no-such-page/</code>" in html


def test_another_readers_campaign_is_not_found_the_same_way(client, bob, campaign, settings):
    settings.DEBUG = False
    client.force_login(bob)
    response = client.get(f"/campaigns/{campaign.pk}/")
    assert response.status_code == 404
    assert_the_sites_page_with_the_way_back(response.content.decode())


def test_the_server_error_and_forbidden_pages_ask_the_database_nothing(django_assert_num_queries, db):
    request = RequestFactory().get("/campaigns/")
    with django_assert_num_queries(0):
        failed = defaults.server_error(request)
        refused = defaults.permission_denied(request, PermissionDenied())
    assert failed.status_code == 500 and "Something went wrong" in failed.content.decode()
    assert refused.status_code == 403 and "Not allowed" in refused.content.decode()
    for response in (failed, refused):
        assert_the_sites_page_with_the_way_back(response.content.decode())


def test_an_expired_form_says_so_with_the_way_back(alice):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    response = browser.post("/campaigns/new/", {"title": "A"})
    assert response.status_code == 403
    html = response.content.decode()
    assert "The form had expired" in html
    assert_the_sites_page_with_the_way_back(html)


def icons_of(html: str) -> list[str]:
    return re.findall(r'<link rel="icon" href="([^"]+)"', html)


def test_every_kind_of_page_links_an_icon_that_exists(client, admin_client, settings):
    settings.DEBUG = False
    EndpointProfileFactory()
    pages = {
        "log-in": client.get("/accounts/login/"),
        "not found": client.get("/no-such-page/"),
        "admin": admin_client.get("/admin/"),
        "admin change list": admin_client.get("/admin/endpoints/endpointprofile/"),
        "reader": admin_client.get("/campaigns/"),
    }
    for name, response in pages.items():
        assert icons_of(response.content.decode()) == ["/static/favicon.svg"], name
    assert finders.find("favicon.svg")


def test_a_browser_asking_for_favicon_ico_is_sent_to_the_icon(client, db):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/favicon.svg"

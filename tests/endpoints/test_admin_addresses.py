"""The profile admin moved with its model (storyapp -> endpoints); the old addresses still lead there."""

from django.urls import reverse

from tests.factories import EndpointProfileFactory


def test_the_old_profile_admin_addresses_redirect_to_the_new_ones(admin_client):
    profile = EndpointProfileFactory()
    response = admin_client.get(f"/admin/storyapp/endpointprofile/{profile.pk}/change/?_changelist_filters=x")
    assert response.status_code == 301
    assert response["Location"] == reverse("admin:endpoints_endpointprofile_change", args=[profile.pk]) + (
        "?_changelist_filters=x"
    )
    assert admin_client.get("/admin/storyapp/endpointprofile/", follow=True).status_code == 200

"""The profile admin's old addresses, under storyapp where the model was
made, sent on to where the admin serves it now, so bookmarks keep working."""

from django.urls import re_path
from django.views.generic import RedirectView

urlpatterns = [
    re_path(
        r"^admin/storyapp/endpointprofile/(?P<rest>.*)$",
        RedirectView.as_view(url="/admin/endpoints/endpointprofile/%(rest)s", permanent=True, query_string=True),
    ),
]

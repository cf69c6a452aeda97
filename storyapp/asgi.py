import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "storyapp.settings")

# Django is set up first: the limits resolve paths with its URLconf.
django_application = get_asgi_application()

from storyapp.limits import BodyLimit
from storyapp.logs import RequestLog

application = RequestLog(BodyLimit(django_application))

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "storyapp.settings")
# Pages never embed: a local embedding model would load PyTorch into every
# web worker (endpoints.localembed refuses where this is set).
os.environ["LOREMASTER_WEB_PROCESS"] = "1"

# Django is set up first: the limits resolve paths with its URLconf.
django_application = get_asgi_application()

from storyapp.limits import BodyLimit
from storyapp.loginqueue import LoginQueue
from storyapp.logs import RequestLog
from storyapp.uploadguard import AnonymousUploadGuard

application = RequestLog(BodyLimit(AnonymousUploadGuard(LoginQueue(django_application))))

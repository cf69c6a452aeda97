import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "storyapp.settings")
# Pages never embed: a local embedding model would load PyTorch into every
# web worker (endpoints.localembed refuses where this is set).
os.environ["LOREMASTER_WEB_PROCESS"] = "1"

# Django is set up first: the limits resolve paths with its URLconf.
django_application = get_asgi_application()

from contextbuild.tokens import encoding
from storyapp.limits import BodyLimit
from storyapp.loginqueue import LoginQueue
from storyapp.logs import RequestLog
from storyapp.uploadguard import AnonymousUploadGuard

# A turn's text is counted in cl100k tokens: its tables load with the
# process (0.3-0.9 s), not in the first reader's request.
encoding()

application = RequestLog(BodyLimit(AnonymousUploadGuard(LoginQueue(django_application))))

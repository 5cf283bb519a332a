"""Django settings: the one place the web app reads the environment.

    DEBUG           1/0, true/false, yes/no (default: on, so a checkout just works)
    SECRET_KEY      required when DEBUG is off
    ALLOWED_HOSTS   comma-separated; required when DEBUG is off
    DATABASE_URL    e.g. postgres://user@host:5432/db (default: SQLite in .cache/)
    REDIS_URL       Celery broker and channel layer, e.g. redis://host:6379/0 (default: the
                    embedded server's socket in .cache/, which `make run` and the tests start)
    KERNELARENA_GPU_TYPES   comma-separated GPU types that have a worker queue (default: cpu)
    KERNELARENA_RUNS_PER_HOUR   runs one user may start per hour (default: 30)
    KERNELARENA_RUN_TIME_LIMIT_S    hard limit of one agent run on a worker (default: 7200)
    KERNELARENA_RUN_STALE_AFTER_S   a running run silent this long lost its worker (default: 90)

A bad value stops the process at start-up with a message naming the variable.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from gpu_workers.harness.problem_source import MAX_SOURCE_BYTES
from gpu_workers.harness.vocabulary import PROTOCOL_NAMES

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r}: use 1 or 0 (true/false, yes/no)")


def _env_list(name: str, default: str) -> list[str]:
    raw = os.environ.get(name) or default
    items = [item.strip() for item in raw.split(",")]
    if not raw or any(not item for item in items):
        raise ImproperlyConfigured(f"{name}={raw!r}: give a comma-separated list, no empty items")
    return items


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name) or str(default)
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 1:
        raise ImproperlyConfigured(f"{name}={value!r}: give a whole number, 1 or more")
    return number


def _embedded_redis_socket() -> Path:
    # A unix socket path must fit in 107 bytes; a deep checkout falls back to /tmp.
    path = BASE_DIR / ".cache" / "redis" / "redis.sock"
    if len(str(path)) < 100:
        return path
    digest = hashlib.sha256(str(BASE_DIR).encode()).hexdigest()[:12]
    return Path("/tmp") / f"kernelarena-{digest}" / "redis.sock"


def _celery_broker(redis_url: str) -> str:
    """kombu spells a unix-socket Redis as redis+socket://PATH."""
    if redis_url.startswith("unix://"):
        return "redis+socket://" + redis_url.removeprefix("unix://")
    return redis_url


def _database(url: str | None) -> dict:
    if not url:
        cache = BASE_DIR / ".cache"
        cache.mkdir(exist_ok=True)  # SQLite does not create the directory of its file
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": str(cache / "webapp.sqlite3")}
    try:
        return dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is not a database URL: {exc}") from None


DEBUG = _env_bool("DEBUG", True)

SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY is required when DEBUG is off")
    SECRET_KEY = "dev-only-insecure-key-never-used-with-DEBUG-off"

if DEBUG:
    ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")
elif os.environ.get("ALLOWED_HOSTS"):
    ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", "")
else:
    raise ImproperlyConfigured("ALLOWED_HOSTS is required when DEBUG is off")

DATABASES = {"default": _database(os.environ.get("DATABASE_URL"))}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Worker and server processes write concurrently: wait for the lock instead of failing, and
    # keep the test database in a file (one per test process) so that the server and worker an
    # end-to-end test starts can share it.
    DATABASES["default"]["OPTIONS"] = {"timeout": 30, "transaction_mode": "IMMEDIATE"}
    test_db = BASE_DIR / ".cache" / f"test-webapp-{os.getpid()}.sqlite3"
    DATABASES["default"]["TEST"] = {"NAME": str(test_db)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# ---- Redis: the Celery broker and the channel layer -------------------------------------------
EMBEDDED_REDIS_SOCKET = _embedded_redis_socket()
REDIS_URL = os.environ.get("REDIS_URL") or f"unix://{EMBEDDED_REDIS_SOCKET}"
REDIS_IS_EMBEDDED = not os.environ.get("REDIS_URL")
if not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured(f"REDIS_URL={REDIS_URL!r}: use redis://HOST:PORT/DB or unix://PATH")

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # A socket timeout above the layer's 5 s blocking read: redis-py 8 defaults to 5 s too,
        # and a tie fails an idle viewer's connection.
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": 30}],
            "prefix": "kernelarena:channels",
        },
    }
}

# Celery reads every CELERY_* setting (webapp/celery.py). Tasks are acknowledged only when they
# end and re-delivered if their worker dies; Run.claim() makes a second delivery harmless.
CELERY_BROKER_URL = _celery_broker(REDIS_URL)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = "web"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
RUN_TIME_LIMIT_S = _env_int("KERNELARENA_RUN_TIME_LIMIT_S", 7200)
# An unacknowledged task goes back to the queue after this long: longer than any task may run.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": RUN_TIME_LIMIT_S + 600}
# A running run's worker touches Run.heartbeat this often; a run silent for RUN_STALE_AFTER_S
# lost its worker and is re-queued (at most RUN_MAX_ATTEMPTS attempts) or failed.
RUN_STALE_AFTER_S = _env_int("KERNELARENA_RUN_STALE_AFTER_S", 90)
RUN_HEARTBEAT_S = RUN_STALE_AFTER_S / 6
RUN_MAX_ATTEMPTS = 2

# Queues that have GPU workers, and the protocols a run may be judged under.
GPU_TYPES = _env_list("KERNELARENA_GPU_TYPES", "cpu")
PROTOCOLS = list(PROTOCOL_NAMES)
# Problems are validated on the first GPU type's workers.
VALIDATION_GPU_TYPE = GPU_TYPES[0]

# Abuse limits: the largest problem source accepted, and how many runs a user may start an hour.
PROBLEM_MAX_BYTES = MAX_SOURCE_BYTES  # the source checks' own limit
# The largest request body (JSON, or a page's form fields; uploaded files are checked by their
# forms): room for a submission's largest file (512 KiB, twice a problem's source) once
# JSON-escaped. Over it: the API's 413, or the page again saying so (webapp/body_limit.py).
DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
RUNS_PER_HOUR = _env_int("KERNELARENA_RUNS_PER_HOUR", 30)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "ninja",  # /api/docs loads Swagger UI from ninja's static files, not from a CDN
    "webapp.accounts",
    "webapp.problems",
    "webapp.runs",
    "webapp.suites",
    "webapp.leaderboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "webapp.body_limit.BodyLimitMiddleware",  # reads a page's fields before the CSRF check
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "webapp.urls"
WSGI_APPLICATION = "webapp.wsgi.application"
ASGI_APPLICATION = "webapp.asgi.application"

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

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / ".cache" / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns about a missing one
STATICFILES_DIRS = [BASE_DIR / "static"]
# Served by WhiteNoise from the app directories in DEBUG, from STATIC_ROOT (collectstatic) after.
WHITENOISE_USE_FINDERS = DEBUG

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

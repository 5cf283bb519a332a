"""Django settings: the one place the web app reads the environment.

    DEBUG           1/0, true/false, yes/no (default: off; `make dev` turns it on)
    SECRET_KEY      default: one generated for this checkout and kept in .cache/secret_key
    KERNELARENA_SECRETS_KEY   a Fernet key that encrypts people's saved model API keys
                    (default: derived from SECRET_KEY; webapp/runs/secrets.py)
    ALLOWED_HOSTS   comma-separated (default: 127.0.0.1,localhost, where `make run` serves)
    KERNELARENA_HTTPS   1 when a TLS proxy serves the site over https: secure cookies, HSTS,
                    http redirected (the proxy must set X-Forwarded-Proto; default: 0)
    DATABASE_URL    e.g. postgres://user@host:5432/db (default: the joined stack's, else
                    SQLite in .cache/)
    REDIS_URL       Celery broker and channel layer, e.g. redis://host:6379/0. `make run` sets
                    it to its own stack's broker (webapp/serve.py). Unset, this process is an
                    operator's command beside `make run`: it joins the checkout's one live stack,
                    its broker, database and GPU types (webapp/local_stacks.py); with none or
                    several, commands that send work refuse, saying why (STACK_REFUSAL), and the
                    rest use redis://127.0.0.1:6379/0
    KERNELARENA_STACK   the pid of the `make run` stack to join when several run in the checkout
    KERNELARENA_STACKS_DIR   where `make run` stacks keep their folders (default: .cache/redis/)
    KERNELARENA_GPU_TYPES   comma-separated GPU types that have a worker queue (default: the
                    joined stack's, else cpu)
    KERNELARENA_GPUS    the GPUs `make run` puts workers on, by nvidia-smi's index or UUID (default:
                    CUDA_VISIBLE_DEVICES, else every GPU of the first one's type; a worker of
                    each kind per GPU, pinned: webapp/host_gpus.py)
    KERNELARENA_RUNS_PER_HOUR   runs one user may start per hour (default: 30)
    KERNELARENA_ACTIVE_RUNS_PER_USER    runs one user may have queued or running (default: 3)
    KERNELARENA_PENDING_VALIDATIONS_PER_USER    problems one user may have waiting for or in
                    validation (default: 3)
    Each kind of work has its own queue, worker and time limit (webapp/work_kinds.py):
    KERNELARENA_VALIDATION_TIME_LIMIT_S   one problem's validation (default: 1800)
    KERNELARENA_RUN_TIME_LIMIT_S          one agent run (default: 7200)
    KERNELARENA_REGRADE_TIME_LIMIT_S      one run's re-grade (default: 1800)
    KERNELARENA_BASELINE_TIME_LIMIT_S     one problem's baselines, on the re-grade worker
                    (default: 3600)
    KERNELARENA_VALIDATION_CONCURRENCY, KERNELARENA_RUN_CONCURRENCY,
    KERNELARENA_REGRADE_CONCURRENCY       tasks each kind's worker runs at once (`make run`'s
                    workers, per GPU; default: 1 each)
    KERNELARENA_RUN_STALE_AFTER_S   a running run silent this long lost its worker (default: 90)
    KERNELARENA_AGENT_CHECK_EVERY_S  how often a worker re-checks each model agent's endpoint
                    (default: 3600; 0: only as it starts and when staff ask)

A bad value stops the process at start-up with a message naming the variable.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.core.management.utils import get_random_secret_key

from gpu_workers.harness.problem_source import MAX_SOURCE_BYTES
from gpu_workers.harness.vocabulary import PROTOCOL_NAMES
from webapp import local_stacks

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


def _env_int(name: str, default: int, minimum: int = 1) -> int:
    value = os.environ.get(name) or str(default)
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise ImproperlyConfigured(f"{name}={value!r}: give a whole number, {minimum} or more")
    return number


def _celery_broker(redis_url: str) -> str:
    """kombu spells a unix-socket Redis as redis+socket://PATH, and its database number as
    virtual_host: a `db` it overrides with database 0."""
    if redis_url.startswith("unix://"):
        parts = urlsplit(redis_url)
        query = [("virtual_host" if k == "db" else k, v) for k, v in parse_qsl(parts.query)]
        return "redis+socket://" + parts.path + (f"?{urlencode(query)}" if query else "")
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


def _checkout_secret_key(path: Path) -> str:
    """This checkout's own key, generated on first use and kept, so sessions outlive a restart
    and no two checkouts share a key."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f"{path.name}.{os.getpid()}")
        with os.fdopen(os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
            out.write(get_random_secret_key())  # readable by this user only, from the start
        try:
            os.link(draft, path)  # atomic: of processes starting together, the first one wins
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    key = path.read_text().strip()
    if not key:
        raise ImproperlyConfigured(f"{path} is empty: delete it to have a new key generated")
    return key


DEBUG = _env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY") or _checkout_secret_key(
    BASE_DIR / ".cache" / "secret_key"
)
SECRETS_KEY = os.environ.get("KERNELARENA_SECRETS_KEY", "")
ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")

# ---- Security headers and cookies: what `manage.py check --deploy` asks -----------------------
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
SESSION_COOKIE_HTTPONLY = True
# Secure cookies, the redirect and HSTS only behind https: over the plain http of `make run` a
# browser never sends a Secure cookie back, and HSTS would pin localhost to https.
HTTPS = _env_bool("KERNELARENA_HTTPS", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_SSL_REDIRECT = HTTPS
SECURE_HSTS_SECONDS = 30 * 24 * 3600 if HTTPS else 0  # a month: a mistake can still be undone
if HTTPS:
    # The TLS proxy in front sets X-Forwarded-Proto (and must overwrite a client's own): without
    # it every request looks like http, and the redirect and the CSRF origin check misfire.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Left as --deploy reports them, on purpose:
#   security.W005 (HSTS includeSubDomains): other hosts of the domain are not ours to pin.
#   security.W021 (HSTS preload): browsers ship the list for months; the operator's decision.

# Errors reach stderr with DEBUG off too: Django's default logs them only with DEBUG on (and
# mails ADMINS, which is empty), so a 500 would leave no trace.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"django": {"handlers": ["stderr"], "level": "ERROR"}},
}

# ---- The `make run` stack an operator's command joins -----------------------------------------
# Without REDIS_URL this process is not one of a stack's own (serve.py gives them REDIS_URL): it
# joins the checkout's one live stack, so a command pasted into a second terminal reaches the
# workers, database and GPU types that `make run` serves. What is set in the environment wins.
_JOINED = (
    None
    if os.environ.get("REDIS_URL")
    else local_stacks.choose(
        local_stacks.stacks_root(BASE_DIR), os.environ.get(local_stacks.PICK_VARIABLE)
    )
)
JOINED_STACK = _JOINED.stack if _JOINED else None
# Why a command that sends work cannot: no stack to join, or several (webapp/stack_command.py).
STACK_REFUSAL = _JOINED.refusal if _JOINED else None

DATABASES = {
    "default": _database(
        os.environ.get("DATABASE_URL") or (JOINED_STACK.database_url if JOINED_STACK else None)
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Worker and server processes write concurrently: wait for the lock instead of failing, and
    # keep the test database in a file (one per test process) so that the server and worker an
    # end-to-end test starts can share it.
    DATABASES["default"]["OPTIONS"] = {"timeout": 30, "transaction_mode": "IMMEDIATE"}
    test_db = BASE_DIR / ".cache" / f"test-webapp-{os.getpid()}.sqlite3"
    DATABASES["default"]["TEST"] = {"NAME": str(test_db)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# ---- Redis: the Celery broker and the channel layer -------------------------------------------
REDIS_URL = (
    os.environ.get("REDIS_URL")
    or (JOINED_STACK.broker_url if JOINED_STACK else None)
    or "redis://127.0.0.1:6379/0"
)
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
# Each kind of work's time limit, in seconds from the moment a worker starts it: the task is
# stopped there (Celery's soft limit, then a hard kill a minute later) and the item ends saying
# so; pages show the limit while the work waits or runs (webapp/work_kinds.py).
VALIDATION_TIME_LIMIT_S = _env_int("KERNELARENA_VALIDATION_TIME_LIMIT_S", 1800)
RUN_TIME_LIMIT_S = _env_int("KERNELARENA_RUN_TIME_LIMIT_S", 7200)
REGRADE_TIME_LIMIT_S = _env_int("KERNELARENA_REGRADE_TIME_LIMIT_S", 1800)
BASELINE_TIME_LIMIT_S = _env_int("KERNELARENA_BASELINE_TIME_LIMIT_S", 3600)
# How many tasks of each kind one worker process runs at once (`make run` starts one worker per
# kind; docker-compose.yml names its own).
VALIDATION_CONCURRENCY = _env_int("KERNELARENA_VALIDATION_CONCURRENCY", 1)
RUN_CONCURRENCY = _env_int("KERNELARENA_RUN_CONCURRENCY", 1)
REGRADE_CONCURRENCY = _env_int("KERNELARENA_REGRADE_CONCURRENCY", 1)
# An unacknowledged task goes back to the queue after this long: longer than any task may run.
_LONGEST_TASK_S = max(
    VALIDATION_TIME_LIMIT_S, RUN_TIME_LIMIT_S, REGRADE_TIME_LIMIT_S, BASELINE_TIME_LIMIT_S
)
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": _LONGEST_TASK_S + 600}
# A running run's worker touches Run.heartbeat this often; a run silent for RUN_STALE_AFTER_S
# lost its worker and is re-queued (at most RUN_MAX_ATTEMPTS attempts) or failed.
RUN_STALE_AFTER_S = _env_int("KERNELARENA_RUN_STALE_AFTER_S", 90)
AGENT_CHECK_EVERY_S = _env_int("KERNELARENA_AGENT_CHECK_EVERY_S", 3600, minimum=0)
RUN_HEARTBEAT_S = RUN_STALE_AFTER_S / 6
RUN_MAX_ATTEMPTS = 2

# The results files a starting stack imports (webapp/serve.py): the committed ones by default; a
# GPU host's suite run names a folder of its own suite's alone, so that another suite's waiting
# baselines are not sent to the GPU beside it (scripts/gpu_suite_run.sh).
RESULTS_DIR = Path(os.environ.get("KERNELARENA_RESULTS_DIR") or BASE_DIR / "benchmarks" / "results")

# Queues that have GPU workers, and the protocols a run may be judged under.
GPU_TYPES = _env_list(
    "KERNELARENA_GPU_TYPES", ",".join(JOINED_STACK.gpu_types) if JOINED_STACK else "cpu"
)
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
# Fair shares of the workers: how much work one person may have waiting or in progress at once
# (queued + running runs, submissions included; problems pending or validating). Suite
# evaluations and imports, the operator's, are not counted.
ACTIVE_RUNS_PER_USER = _env_int("KERNELARENA_ACTIVE_RUNS_PER_USER", 3)
PENDING_VALIDATIONS_PER_USER = _env_int("KERNELARENA_PENDING_VALIDATIONS_PER_USER", 3)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "axes",
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
    # Last, as django-axes asks: it turns a lock-out flagged during the request into its answer.
    "axes.middleware.AxesMiddleware",
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

# ---- Failed log-ins (django-axes) ---------------------------------------------------------------
# Five failures of one username from one address within the cool-off lock that pair out for the
# cool-off, counted again from each later try; a success clears them. Per username and address,
# so another person behind the same address (an office, a NAT) still logs in, and nobody can lock
# a user out from everywhere. Bad API tokens count the same way, per address
# (webapp/accounts/authentication.py). The address is REMOTE_ADDR: behind a proxy, uvicorn's
# --forwarded-allow-ips must name it so that REMOTE_ADDR is the client's.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # refuses a locked-out pair before any password check
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "webapp.accounts.lockout.locked_out"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / ".cache" / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns about a missing one
STATICFILES_DIRS = [BASE_DIR / "static"]
# WhiteNoise serves STATIC_ROOT (the Docker image runs collectstatic) and, DEBUG or not, the
# app directories, so `make run` serves its CSS without a collectstatic step.
WHITENOISE_USE_FINDERS = True

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

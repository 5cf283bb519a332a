"""Django settings: the one place the web app reads the environment.

    DEBUG           1/0, true/false, yes/no (default: on, so a checkout just works)
    SECRET_KEY      required when DEBUG is off
    ALLOWED_HOSTS   comma-separated; required when DEBUG is off
    DATABASE_URL    e.g. postgres://user@host:5432/db (default: SQLite in .cache/)
    KERNELARENA_GPU_TYPES   comma-separated GPU types that have a worker queue (default: cpu)

A bad value stops the process at start-up with a message naming the variable.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

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
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Queues that have GPU workers. Protocol names mirror gpu_workers.harness.protocol.PROTOCOLS
# (a test keeps them equal; the web process does not import the harness).
GPU_TYPES = _env_list("KERNELARENA_GPU_TYPES", "cpu")
PROTOCOLS = ["loose", "fp32-strict"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "webapp.accounts",
    "webapp.problems",
    "webapp.runs",
    "webapp.leaderboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
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

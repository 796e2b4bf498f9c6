"""Settings of the example project.

Embedded by default (no server needed): SQLite in ``var/db.sqlite3``, a Celery broker on kombu's
``filesystem://`` transport under ``var/broker`` and the in-memory channel layer.
``DATABASE_URL`` (e.g. ``postgres://postgres@127.0.0.1:5432/rivet``, psycopg 3) switches the database,
``REDIS_URL`` switches the Celery broker and the channel layer to Redis. ``DJANGO_DEBUG=0`` (production)
needs ``DJANGO_SECRET_KEY``; the manual's docs/howto/production.md lists every variable.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
import django
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("RIVET_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
#: the key development falls back to; published in this file, so never accepted outside DEBUG (manual: Go to
#: production)
DEV_SECRET_KEY = "dev-only-insecure-key-change-me"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY or SECRET_KEY == DEV_SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is not set (or is the published development key) and DJANGO_DEBUG is not 1: "
            "set DJANGO_SECRET_KEY to a long random secret, e.g. the output of "
            "`python -c 'import secrets; print(secrets.token_urlsafe(50))'` (docs/howto/production.md)"
        )
    SECRET_KEY = DEV_SECRET_KEY
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "ninja",  # django-ninja serves its bundled Swagger UI files: /api/rivet/docs needs no CDN
    "rivet_workflows",
    "project.shop",  # the example app an atomic step writes (project/examples/atomic_order.py)
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

ROOT_URLCONF = "project.urls"
WSGI_APPLICATION = "project.wsgi.application"
ASGI_APPLICATION = "project.asgi.application"

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

# --- database -----------------------------------------------------------------------------------
# SQLite: IMMEDIATE transactions serialise writers (select_for_update is a no-op there), WAL lets
# readers run beside the writer, and the busy timeout makes concurrent processes and threads wait
# instead of failing. The test database is a FILE because step bodies run on other threads.
DATABASE_URL = os.environ.get("DATABASE_URL", "")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
    # One test database per test process, so concurrent test runs against one server never collide.
    DATABASES["default"]["TEST"] = {
        "NAME": os.environ.get("RIVET_TEST_DB") or f"test_{DATABASES['default']['NAME']}_{os.getpid()}"
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            # RIVET_SQLITE_PATH lets worker subprocesses of the system tests open the test database.
            "NAME": os.environ.get("RIVET_SQLITE_PATH") or str(VAR_DIR / "db.sqlite3"),
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
            },
            # One file per test process, so concurrent test runs in one checkout never share it.
            "TEST": {"NAME": os.environ.get("RIVET_TEST_DB") or str(VAR_DIR / f"test-{os.getpid()}.sqlite3")},
        }
    }

# A second database, "shard1", for the sharded tests (tests/shards: RIVET_WORKFLOWS["SHARDS"] =
# ["default", "shard1"], DESIGN.md section 21). Nothing opens it unless a test asks for it (pytest-django
# creates the test databases the tests name), and nothing else uses it. RIVET_SHARD1_URL points it at
# another server (a second PostgreSQL cluster); else it is a second database on the same server / file.
_SHARD1_URL = os.environ.get("RIVET_SHARD1_URL", "")
if _SHARD1_URL or DATABASE_URL:
    DATABASES["shard1"] = dj_database_url.parse(_SHARD1_URL or DATABASE_URL, conn_max_age=0)
    if not _SHARD1_URL:
        DATABASES["shard1"]["NAME"] = f"{DATABASES['default']['NAME']}_shard1"
    DATABASES["shard1"]["TEST"] = {"NAME": f"{DATABASES['default']['TEST']['NAME']}_shard1"}
else:
    DATABASES["shard1"] = {
        **DATABASES["default"],
        "NAME": str(VAR_DIR / "db-shard1.sqlite3"),
        "TEST": {"NAME": f"{DATABASES['default']['TEST']['NAME'].removesuffix('.sqlite3')}-shard1.sqlite3"},
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Development accepts any password (the demo's admin user); production gets Django's standard validators.
AUTH_PASSWORD_VALIDATORS: list[dict] = (
    []
    if DEBUG
    else [
        {"NAME": f"django.contrib.auth.password_validation.{name}"}
        for name in (
            "UserAttributeSimilarityValidator",
            "MinimumLengthValidator",
            "CommonPasswordValidator",
            "NumericPasswordValidator",
        )
    ]
)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

# --- Celery (project/celery.py reads CELERY_* names) -----------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
BROKER_DIR = VAR_DIR / "broker"
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    # kombu's Redis transport, except that a channel whose connection was already collected raises a
    # connection error instead of AttributeError: without it Celery 5.7 workers can exit ("Unrecoverable
    # error") when Redis restarts while they hold unacknowledged tasks (manual: Celery settings).
    CELERY_BROKER_TRANSPORT = "rivet_workflows.driver.redis_broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
else:
    for _sub in ("out", "processed", "control"):
        (BROKER_DIR / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT = "rivet_workflows.driver.fs_broker:Transport"  # atomic message files
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "out"),
        "data_folder_out": str(BROKER_DIR / "out"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),  # kombu's default is ./control in the cwd
        "store_processed": False,
        "polling_interval": 0.05,  # seconds between scans of the folder (wake-up latency)
    }
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ACKS_LATE = True
# Keep a worker's database connection between tasks: Celery's Django fix-up otherwise closes every
# connection before and after each task (a new PostgreSQL session, and its prepared statements, per run).
CELERY_DB_REUSE_MAX = 1000
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A broker blip must not kill the steps that are running: they commit to the database, not the broker, and
# a redelivered copy of their task finds the lease held and does nothing. (Celery 6 flips the default.)
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# --- Channels -------------------------------------------------------------------------------------
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # above the 5 s channels-redis waits for a message (redis-py 8's default is 5 s: check W009)
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 10}]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# --- rivet_workflows (DESIGN.md section 10; read through rivet_workflows.conf.rivet_settings) --------
RIVET_WORKFLOWS = {
    "REGISTRY": os.environ.get("RIVET_REGISTRY", "project.registry.registry"),
    "INSPECTOR_TOKEN": os.environ.get("RIVET_INSPECTOR_TOKEN") or None,
    "API_TOKEN": os.environ.get("RIVET_API_TOKEN") or None,
    # Dev mode (DEBUG): the actor/action/queue API is open to anonymous requests, like the inspector.
    # Outside dev mode it needs "Authorization: Bearer $RIVET_API_TOKEN" or a logged-in user holding the
    # rivet_workflows.use_actor_api permission (manual: Control access).
    "API_AUTH": "rivet_workflows.api.auth.dev_mode_api_auth",
    "DEV_MODE": DEBUG,
    "LEASE_SECONDS": float(os.environ.get("RIVET_LEASE_SECONDS", "30")),
    "SWEEP_INTERVAL": float(os.environ.get("RIVET_SWEEP_INTERVAL", "1.0")),
    # actors one worker process runs at once (a thread pool above 1; manual: Settings)
    "WORKER_CONCURRENCY": int(os.environ.get("RIVET_WORKER_CONCURRENCY", "1")),
}

# Django's Tasks framework (django.tasks on Django 6, the django-tasks backport on 5.2): each enqueued
# task is a durable workflow of the registry's "django_task" type (docs/howto/django-tasks.md). The backport
# checks its backends and logs tasks only as an installed app.
if django.VERSION < (6, 0):
    INSTALLED_APPS += ["django_tasks"]
TASKS = {
    "default": {
        "BACKEND": "rivet_workflows.contrib.django_tasks.WorkflowBackend",
        "QUEUES": ["default", "emails"],
    }
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "rivet_workflows": {"handlers": ["console"], "level": os.environ.get("RIVET_LOG_LEVEL", "INFO")}
    },
}

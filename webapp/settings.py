"""NLAC Studio settings. Everything that differs between machines comes from the
environment (see deploy/env.example); the defaults are the embedded setup:
SQLite under var/, Redis started by ``make run``, the embedded model under var/models."""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("NLAC_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() in ("1", "true", "yes", "on")


DEBUG = env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY") or ""
if not SECRET_KEY:
    # A per-checkout key kept under var/: stable across restarts, never committed.
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        import secrets

        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    SECRET_KEY = key_file.read_text().strip()

ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "webapp.accounts",
    "webapp.trajectories",
    "webapp.jobs",
    "webapp.annotation",
    "webapp.datasets",
    "webapp.api",
    "ninja",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "webapp.urls"
WSGI_APPLICATION = "webapp.wsgi.application"

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
                "webapp.accounts.context_processors.roles",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'nlac.sqlite3'}",
        conn_max_age=int(os.environ.get("DB_CONN_MAX_AGE", "60")),
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # WAL lets the worker write while the web process reads; a busy timeout instead of "database is locked".
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
WHITENOISE_USE_FINDERS = True  # serve from the app folders too: no collectstatic step for `make run`

# Uploads: small files are imported in the request; the limit keeps a request bounded.
UPLOAD_MAX_BYTES = int(os.environ.get("NLAC_UPLOAD_MAX_BYTES", str(64 * 1024 * 1024)))
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024  # larger uploads spool to a temporary file
DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
UPLOAD_DIR = VAR_DIR / "uploads"
# Uploads larger than this are imported by a job on the cpu queue (the request returns at once).
NLAC_IMPORT_IN_REQUEST_BYTES = int(os.environ.get("NLAC_IMPORT_IN_REQUEST_BYTES", str(8 * 1024 * 1024)))

# Where `make run` looks for the demo data, and where models live.
NLAC_SHARED_DATA = Path(os.environ.get("NLAC_SHARED_DATA", BASE_DIR.parent / "shared" / "data"))
NLAC_MODEL_DIR = Path(os.environ.get("NLAC_MODEL_DIR", VAR_DIR / "models"))
# Where training jobs write their checkpoints (job-<id>/). Default: beside the other models.
NLAC_TRAIN_DIR = Path(os.environ.get("NLAC_TRAIN_DIR", NLAC_MODEL_DIR))

# Celery: Redis broker; model work on `gpu`, imports/exports on `cpu`.
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_TASK_DEFAULT_QUEUE = "cpu"
CELERY_TASK_ROUTES = {"workers.tasks.model.*": {"queue": "gpu"}, "workers.tasks.*": {"queue": "cpu"}}
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ACKS_LATE = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A job's lease: the worker renews it every third of this while it works; the reaper re-queues a job
# whose lease ran out (its worker died or hung). Beat runs the reaper every NLAC_REAP_EVERY_S seconds.
NLAC_JOBS_DIR = Path(os.environ.get("NLAC_JOBS_DIR", VAR_DIR / "jobs"))  # full job logs and export files
NLAC_JOB_LEASE_S = int(os.environ.get("NLAC_JOB_LEASE_S", "60"))
NLAC_JOB_MAX_ATTEMPTS = int(os.environ.get("NLAC_JOB_MAX_ATTEMPTS", "5"))  # reaped this often: the job fails
NLAC_REAP_EVERY_S = int(os.environ.get("NLAC_REAP_EVERY_S", "30"))
# The queue names jobs go to (rename them to run several deployments, or a benchmark, on one Redis).
NLAC_JOB_QUEUES = {"gpu": os.environ.get("NLAC_GPU_QUEUE", "gpu"), "cpu": os.environ.get("NLAC_CPU_QUEUE", "cpu")}
CELERY_BEAT_SCHEDULE = {
    "reap-expired-job-leases": {"task": "workers.tasks.jobs.reap_jobs", "schedule": float(NLAC_REAP_EVERY_S),
                                "options": {"queue": NLAC_JOB_QUEUES["cpu"]}},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

if not DEBUG:
    SESSION_COOKIE_HTTPONLY = True
    X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

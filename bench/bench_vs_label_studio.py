"""NLAC Studio beside Label Studio on the same trajectories, in one run: import, export and the pages a user opens.

    python bench/bench_vs_label_studio.py [--trajectories 10000] [--runs 20] [--with-label-studio]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/nlac_bench python bench/bench_vs_label_studio.py ...

The file: the gpt-4o tau-bench airline run of the data folder stored N/200 times with shifted task ids (every
record new; 10,000 trajectories make 180 MB). Not a test: it prints figures.

NLAC Studio (this checkout, on a fresh SQLite file, or on DATABASE_URL in a fresh project) is timed as a user runs
it: ``manage.py import_trajectories`` (every message and tool call stored as rows, the search index built; wall
time of the command, Python's start included), ``manage.py export_trajectories`` as our lossless JSONL and as
tau-bench JSON, and the project page, the trajectory list's first page and one trajectory page over HTTP from
gunicorn (2 workers, logged in), median of --runs requests after one warm-up.

Label Studio (--with-label-studio; 1.23.2 installed into a throwaway virtual environment under var/bench/ the first
time, with sentry-sdk<3, which its settings need) runs its own server on SQLite in a temporary folder, one task per
trajectory holding the dialogue (task id, trial, reward, the messages): the import is its REST import of that JSON
file, the export its JSON export of the whole project, the pages its project, task list (first page of 30) and task
endpoints, the same way. Without the flag only our side is printed.

The ratio is Label Studio's time over ours (above 1: we are faster).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _setup import ROOT, SHARED

LS_VERSION = "1.23.2"
LS_PINS = [f"label-studio=={LS_VERSION}", "sentry-sdk<3"]
LS_VENV = ROOT / "var" / "bench" / "label-studio-venv"
LS_TOKEN = "0123456789abcdef0123456789abcdef01234567"
PASSWORD = "bench-pw-123"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def generate(n: int, out: Path) -> Path:
    """The gpt-4o run n/200 times, each copy's task ids shifted by 1000, written record by record."""
    if out.is_file():
        return out
    records = json.loads((SHARED / "tau-bench" / "gpt-4o-airline.json").read_text())
    copies = -(-n // len(records))
    tmp = out.with_suffix(".part")
    written = 0
    with tmp.open("w") as f:
        f.write("[")
        for c in range(copies):
            for r in records:
                if written == n:
                    break
                f.write(("," if written else "") + json.dumps({**r, "task_id": r["task_id"] + 1000 * c}))
                written += 1
        f.write("]")
    tmp.replace(out)
    return out


def wait_for(url: str, seconds: float, what: str, proc: subprocess.Popen | None = None) -> None:
    import requests

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        try:
            if requests.get(url, timeout=2).status_code < 500:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{what} did not answer at {url} within {seconds:.0f} s")


def median_ms(get, url: str, runs: int) -> float:
    response = get(url)
    assert response.status_code == 200, (url, response.status_code, response.text[:300])
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        response = get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return statistics.median(times)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# -- NLAC Studio ------------------------------------------------------------------------------------------------

def ours(path: Path, n: int, runs: int, work: Path) -> dict[str, float]:
    import requests

    db_url = os.environ.get("DATABASE_URL") or f"sqlite:///{work / 'nlac.sqlite3'}"
    env = {**os.environ, "DATABASE_URL": db_url, "DJANGO_SETTINGS_MODULE": "webapp.settings", "DEBUG": "0",
           "NLAC_VAR_DIR": str(work / "var")}
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    project = f"bench vs label studio {time.time():.0f}"
    subprocess.run([*manage, "create_user", "bench-researcher", "--role", "researcher", "--password", PASSWORD],
                   cwd=ROOT, env=env, check=True, capture_output=True)
    out: dict[str, float] = {}
    started = time.perf_counter()
    done = subprocess.run([*manage, "import_trajectories", str(path), "--project", project], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    out["import"] = time.perf_counter() - started
    if done.returncode != 0 or f": {n} trajectories added" not in done.stdout:
        raise SystemExit(f"our import failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    for fmt, name in (("nlac-jsonl", "export.jsonl"), ("tau-bench", "export.json")):
        started = time.perf_counter()
        subprocess.run([*manage, "export_trajectories", str(work / name), "--project", project, "--format", fmt],
                       cwd=ROOT, env=env, check=True, capture_output=True)
        out[f"export {fmt}"] = time.perf_counter() - started
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "webapp.wsgi:application", "-b", f"127.0.0.1:{port}",
                               "-w", "2", "--log-level", "warning"], cwd=ROOT, env=env, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/login/", 60, "gunicorn", server)
        session = requests.Session()
        page = session.get(f"{base}/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        session.post(f"{base}/login/", data={"username": "bench-researcher", "password": PASSWORD,
                                             "csrfmiddlewaretoken": token}, headers={"Referer": f"{base}/login/"})
        slug = re.search(r'href="/projects/([^/"]+)/"', session.get(f"{base}/").text).group(1)
        listing = session.get(f"{base}/trajectories/").text
        one = re.search(r'href="/trajectories/(\d+)/"', listing).group(1)
        out["project page"] = median_ms(session.get, f"{base}/projects/{slug}/", runs)
        out["list, first page"] = median_ms(session.get, f"{base}/trajectories/", runs)
        out["one trajectory"] = median_ms(session.get, f"{base}/trajectories/{one}/", runs)
    finally:
        stop(server)
    return out


# -- Label Studio ------------------------------------------------------------------------------------------------

def label_studio_venv() -> Path:
    marker = LS_VENV / f".installed-{LS_VERSION}"
    if not marker.is_file():
        print(f"installing Label Studio {LS_VERSION} into {LS_VENV} (once) ...", flush=True)
        shutil.rmtree(LS_VENV, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(LS_VENV)], check=True)
        subprocess.run([str(LS_VENV / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *LS_PINS],
                       check=True)
        marker.touch()
    return LS_VENV / "bin" / "label-studio"


def label_studio_tasks(path: Path, out: Path) -> Path:
    """One Label Studio task per trajectory, holding the dialogue."""
    from nlac_core.formats.json_stream import stream_array

    with out.open("w") as f:
        f.write("[")
        for i, record, _ in stream_array(path):
            task = {"data": {"task_id": record["task_id"], "trial": record.get("trial", 0),
                             "reward": record["reward"], "dialogue": record["traj"]}}
            f.write(("," if i else "") + json.dumps(task))
        f.write("]")
    return out


def theirs(path: Path, n: int, runs: int, work: Path) -> dict[str, float]:
    import requests

    executable = label_studio_venv()
    tasks = label_studio_tasks(path, work / "label-studio-tasks.json")
    data = work / "label-studio-data"
    port = free_port()
    env = {**os.environ, "LABEL_STUDIO_BASE_DATA_DIR": str(data), "LABEL_STUDIO_USERNAME": "bench@example.com",
           "LABEL_STUDIO_PASSWORD": PASSWORD, "LABEL_STUDIO_USER_TOKEN": LS_TOKEN,
           "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true", "DJANGO_DB": "sqlite", "SENTRY_DSN": "",
           "FRONTEND_SENTRY_DSN": "", "DATA_UPLOAD_MAX_MEMORY_SIZE": str(4 << 30)}
    env.pop("DATABASE_URL", None)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    log = (work / "label-studio.log").open("w")
    server = subprocess.Popen([str(executable), "start", "--no-browser", "--host", "127.0.0.1", "--port", str(port),
                               "--data-dir", str(data)], env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    out: dict[str, float] = {}
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/health", 300, "Label Studio", server)
        s = requests.Session()
        s.headers["Authorization"] = f"Token {LS_TOKEN}"
        made = s.post(f"{base}/api/projects", json={
            "title": "bench", "label_config": '<View><Text name="t" value="$task_id"/></View>'})
        assert made.status_code == 201, made.text[:500]
        pid = made.json()["id"]
        started = time.perf_counter()
        with tasks.open("rb") as f:
            done = s.post(f"{base}/api/projects/{pid}/import", files={"file": ("tasks.json", f, "application/json")})
        out["import"] = time.perf_counter() - started
        assert done.status_code == 201 and done.json().get("task_count") == n, done.text[:500]
        started = time.perf_counter()
        exported = s.get(f"{base}/api/projects/{pid}/export",
                         params={"exportType": "JSON", "download_all_tasks": "true"})
        out["export JSON"] = time.perf_counter() - started
        assert exported.status_code == 200 and len(exported.json()) == n, exported.text[:300]
        first = s.get(f"{base}/api/tasks", params={"project": pid, "page": 1, "page_size": 30}).json()["tasks"][0]
        out["project page"] = median_ms(s.get, f"{base}/api/projects/{pid}", runs)
        out["list, first page"] = median_ms(s.get, f"{base}/api/tasks?project={pid}&page=1&page_size=30", runs)
        out["one trajectory"] = median_ms(s.get, f"{base}/api/tasks/{first['id']}", runs)
    finally:
        stop(server)
        log.close()
    return out


# -- the table ---------------------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trajectories", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--with-label-studio", action="store_true")
    args = parser.parse_args()
    n = args.trajectories
    bench = ROOT / "var" / "bench"
    bench.mkdir(parents=True, exist_ok=True)
    path = generate(n, bench / f"gpt-4o-airline-x{n}.json")
    work = Path(tempfile.mkdtemp(prefix="nlac-vs-ls-", dir=bench))
    try:
        started = time.perf_counter()
        us = ours(path, n, args.runs, work)
        them = theirs(path, n, args.runs, work) if args.with_label_studio else {}
        wall = time.perf_counter() - started
    finally:
        shutil.rmtree(work, ignore_errors=True)
    database = "PostgreSQL" if (os.environ.get("DATABASE_URL") or "").startswith("postgres") else "SQLite"
    print(f"\n{n:,} trajectories ({path.stat().st_size / 1e6:.0f} MB, the gpt-4o airline run x{n // 200}); "
          f"NLAC Studio on {database}, Label Studio {LS_VERSION} on SQLite; {os.cpu_count()} cores; "
          f"{wall:.0f} s in all")
    rows = [("import", "import", "s"), ("export, our JSONL", "export JSON", "s"),
            ("export, tau-bench JSON", "export JSON", "s"), ("project page", "project page", "ms"),
            ("list, first page", "list, first page", "ms"), ("one trajectory", "one trajectory", "ms")]
    ours_key = {"export, our JSONL": "export nlac-jsonl", "export, tau-bench JSON": "export tau-bench"}
    print("| operation | Label Studio | NLAC Studio | ratio |\n|---|---|---|---|")
    for name, their_key, unit in rows:
        mine = us[ours_key.get(name, name)]
        rate = f", {n / mine:,.0f}/s" if unit == "s" else ""
        mine_text = f"{mine:.2f} s{rate}" if unit == "s" else f"{mine:.0f} ms"
        if their_key in them:
            other = them[their_key]
            other_text = f"{other:.2f} s, {n / other:,.0f}/s" if unit == "s" else f"{other:.0f} ms"
            print(f"| {name} | {other_text} | {mine_text} | {other / mine:.2f}x |")
        else:
            print(f"| {name} | (not run) | {mine_text} | |")


if __name__ == "__main__":
    main()

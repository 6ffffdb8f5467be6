"""Annotation figures: save and step-view server times, 20 simulated annotators against a real server on
loopback, and one keyboard-only annotator in Chromium working through a 20-item queue.

    python bench/bench_annotate.py [--annotators 20] [--seconds 60] [--overlap 2] [--items 20] [--quick]
    python bench/bench_annotate.py --keyboard-only      # part 3 alone
    DATABASE_URL=postgres://.../nlac_bench python bench/bench_annotate.py

1. Server time (Django's test client: middleware, queries, templates) of saving a revision, and of
   rendering the step view of a 60-message trajectory (the real gpt-4o tau-bench run, its longest
   trajectories cut to 60 messages are not needed: one has >= 60) with 3 model critiques per step.
2. gunicorn on 127.0.0.1 (2 workers x 8 threads) and N annotator threads, each logged in, looping
   for S seconds: "next" -> step page -> "save and next". Then the database is checked: no queue
   item with more finished annotations than the overlap, and every save a client saw succeed is a
   revision in the database (zero lost).
3. The same gunicorn and a headless Chromium (Debian's, NLAC_CHROMIUM overrides) logged in as the one
   annotator of a fresh queue of N steps with model critiques (overlap 1). After the login it uses only
   page.keyboard: Tab to Start and Enter; on each step `1`-`3` for a verdict other than the one shown, `e`,
   Ctrl+End and a typed sentence in the predicted future, Ctrl+Enter (save and next); until the queue page
   says nothing is left. Prints wall seconds per item as the browser sees them (from the key that opened
   the item to the next page loaded; login excluded): median, p90 and total, and the keys it took.
   Then the database must hold exactly N new revisions and N finished assignments of that annotator, each
   with the verdict chosen and the text typed; anything else exits non-zero.
   Its output reads: "keyboard-only annotator, 20 items in Chromium: median ... s/item, p90 ... s, total ... s".

--quick: a smoke run (5 renders, 4 annotators x 5 s, a 5-item queue).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

from _setup import ROOT, SHARED, django_with, percentile

DB_FILE = ROOT / "var" / "bench-annotate.sqlite3"
PORT = int(os.environ.get("NLAC_BENCH_PORT", "8765"))
CHROMIUM = os.environ.get("NLAC_CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")


def setup(n_annotators: int):
    from webapp.accounts.services import do_create_user
    from webapp.jobs.models import Job, StepCritique
    from webapp.trajectories.services.imports import do_import_file
    from webapp.trajectories.services.projects import do_get_or_create_project

    project = do_get_or_create_project("bench annotation")
    if not project.trajectories.exists():
        do_import_file(SHARED / "tau-bench" / "gpt-4o-airline.json", project)
    trajectory = project.trajectories.filter(n_messages__gte=60).order_by("n_messages").first()
    if not trajectory.critiques.exists():
        steps = list(trajectory.messages.filter(step_index__isnull=False).values_list("step_index", flat=True))
        for k in range(3):
            job = Job.objects.create(kind="critique", status=Job.SUCCEEDED, config={})
            StepCritique.objects.bulk_create([StepCritique(
                trajectory=trajectory, step_index=s, job=job, verdict=("optimal", "suboptimal", "harmful")[k],
                success_prob=0.4 + 0.1 * k, prompt_id="evaluator@bench", mode="sectioned",
                record={"predicted_future": f"future {k} of step {s} " * 8, "reasoning": "reason " * 20,
                        "suggestion": "suggestion " * 10}) for s in steps])
    researcher = do_create_user("bench-researcher", "bench-pw-123", "researcher")[0]
    people = [do_create_user(f"bench-annotator-{i}", "bench-pw-123", "annotator")[0] for i in range(n_annotators)]
    return project, trajectory, researcher, people


def time_pages(trajectory, researcher, runs: int) -> None:
    from django.test import Client

    client = Client()
    client.force_login(researcher)
    critique = trajectory.critiques.filter(step_index=1).order_by("id").first()
    url = f"/trajectories/{trajectory.pk}/steps/1/"
    client.get(url)  # warm
    renders = []
    for _ in range(runs):
        t0 = time.perf_counter()
        response = client.get(url + f"?critique={critique.pk}")
        renders.append(time.perf_counter() - t0)
        assert response.status_code == 200
    from webapp.annotation.models import Annotation
    existing = Annotation.objects.filter(critique=critique, author=researcher).first()
    base = existing.head_id if existing else ""
    saves = []
    for i in range(runs):
        data = {"critique": critique.pk, "base_revision": base, "predicted_future": f"edited future {i}",
                "verdict": "harmful", "reasoning": "the agent never checked the fare class " * 3,
                "suggestion": "look up the reservation", "predicted_outcome": "failure"}
        t0 = time.perf_counter()
        response = client.post(url + "save/", data)
        saves.append(time.perf_counter() - t0)
        assert response.status_code == 302, response.status_code
        base = Annotation.objects.get(critique=critique, author=researcher).head_id
    n_msgs = trajectory.n_messages
    n_crit = trajectory.critiques.count()
    print(f"step view, {n_msgs}-message trajectory, {n_crit} critiques ({n_crit // trajectory.n_steps} per step): "
          f"median {statistics.median(renders) * 1000:.1f} ms, p95 {percentile(renders, 0.95) * 1000:.1f} ms "
          f"({runs} renders)")
    print(f"save of a revision: median {statistics.median(saves) * 1000:.1f} ms, "
          f"p95 {percentile(saves, 0.95) * 1000:.1f} ms ({runs} saves)")


FIELD = re.compile(r'name="(queue_item|critique|base_revision)" value="([^"]*)"')


class Annotator(threading.Thread):
    def __init__(self, base: str, username: str, queue_id: int, until: float):
        super().__init__(daemon=True)
        import requests
        self.session = requests.Session()
        self.base, self.username, self.queue_id, self.until = base, username, queue_id, until
        self.latencies: list[float] = []
        self.saved = 0
        self.errors: list[str] = []

    def timed(self, method: str, path: str, **kwargs):
        t0 = time.perf_counter()
        response = self.session.request(method, self.base + path, allow_redirects=False, timeout=60, **kwargs)
        self.latencies.append(time.perf_counter() - t0)
        return response

    def csrf(self) -> dict:
        return {"X-CSRFToken": self.session.cookies.get("csrftoken", "")}

    def run(self) -> None:
        self.timed("GET", "/login/")
        self.timed("POST", "/login/", data={"username": self.username, "password": "bench-pw-123"},
                   headers=self.csrf())
        while time.monotonic() < self.until:
            response = self.timed("POST", f"/queues/{self.queue_id}/next/", headers=self.csrf())
            location = response.headers.get("Location", "")
            if "/steps/" not in location:
                return  # nothing left for this annotator
            page = self.timed("GET", location)
            values = dict(FIELD.findall(page.text))
            path = location.split("?")[0] + "save/"
            response = self.timed("POST", path, headers=self.csrf(), data={
                **values, "verdict": "suboptimal", "predicted_outcome": "failure", "then": "next",
                "reasoning": f"checked by {self.username}", "predicted_future": "the user asks again"})
            if response.status_code == 302:
                self.saved += 1
            else:
                self.errors.append(f"save answered {response.status_code}")


@contextmanager
def serving(db_url: str | None):
    """gunicorn on 127.0.0.1 (2 workers x 8 threads, DEBUG off) for the block; yields its base URL."""
    import requests

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings", "DEBUG": "0"}
    if db_url:
        env["DATABASE_URL"] = db_url
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "webapp.wsgi:application", "-b",
                               f"127.0.0.1:{PORT}", "-w", "2", "--threads", "8", "--log-level", "warning"],
                              cwd=ROOT, env=env)
    try:
        for _ in range(100):
            try:
                requests.get(f"http://127.0.0.1:{PORT}/login/", timeout=2)
                break
            except requests.ConnectionError:
                time.sleep(0.2)
        yield f"http://127.0.0.1:{PORT}"
    finally:
        server.terminate()
        server.wait(30)


def load(project, people, n: int, seconds: float, overlap: int, db_url: str | None) -> None:
    from webapp.accounts.services import do_create_user
    from webapp.annotation.models import Assignment, QueueItem, Revision
    from webapp.annotation.services.queues import QueueSpec, check_create_queue
    maker = do_create_user("bench-researcher", "bench-pw-123", "researcher")[0]
    queue = check_create_queue(maker, f"bench load {time.time():.0f}", project, QueueSpec(), overlap, people)
    revisions_before = Revision.objects.count()
    with serving(db_url) as base:
        started = time.monotonic()
        clients = [Annotator(base, p.username, queue.pk, started + seconds) for p in people[:n]]
        for c in clients:
            c.start()
        for c in clients:
            c.join(seconds + 120)
        elapsed = time.monotonic() - started
    saved = sum(c.saved for c in clients)
    latencies = [x for c in clients for x in c.latencies]
    errors = [e for c in clients for e in c.errors]
    over = QueueItem.objects.filter(queue=queue).filter(n_done__gt=overlap).count()
    done_rows = Assignment.objects.filter(item__queue=queue, status=Assignment.DONE)
    per_item = {}
    for item_id in done_rows.values_list("item_id", flat=True):
        per_item[item_id] = per_item.get(item_id, 0) + 1
    over_rows = sum(1 for v in per_item.values() if v > overlap)
    stored = Revision.objects.count() - revisions_before
    print(f"{n} annotators x {seconds:.0f} s on gunicorn 127.0.0.1 (overlap {overlap}, {queue.n_items} items): "
          f"{saved} items annotated = {saved / elapsed:.1f} items/s; requests {len(latencies)}, "
          f"p50 {statistics.median(latencies) * 1000:.0f} ms, p95 {percentile(latencies, 0.95) * 1000:.0f} ms")
    print(f"over-overlap items: {over + over_rows}; saves acknowledged {saved}, revisions stored {stored}, "
          f"lost {saved - stored if saved > stored else 0}; errors {len(errors)} {errors[:3]}")


VERDICT_KEYS = {"optimal": "1", "suboptimal": "2", "harmful": "3"}


def tab_to(page, element_id: str, limit: int = 60) -> int:
    """Press Tab until the element with this id has the focus; returns the presses it took."""
    for presses in range(limit):
        if page.evaluate("document.activeElement && document.activeElement.id") == element_id:
            return presses
        page.keyboard.press("Tab")
    raise SystemExit(f"keyboard run: #{element_id} not reached in {limit} Tab presses on {page.url}")


def keyboard_only(project, n_items: int, db_url: str | None) -> None:
    """Part 3: one annotator in Chromium, keyboard only after the login, through a fresh queue."""
    from playwright.sync_api import sync_playwright

    from webapp.accounts.services import do_create_user
    from webapp.annotation.models import Assignment, Revision
    from webapp.annotation.services.queues import QueueSpec, check_create_queue

    if not os.path.exists(CHROMIUM):
        raise SystemExit(f"keyboard run: no chromium at {CHROMIUM} (apt-get install chromium, or NLAC_CHROMIUM)")
    maker = do_create_user("bench-researcher", "bench-pw-123", "researcher")[0]
    typist = do_create_user("bench-keyboard", "bench-pw-123", "annotator")[0]
    queue = check_create_queue(maker, f"bench keyboard {time.time():.0f}", project,
                               QueueSpec(verdict="harmful", sample=n_items), 1, [typist])
    assert queue.n_items == n_items, f"the critiqued steps give a {queue.n_items}-item queue, not {n_items}"
    revisions_before = Revision.objects.filter(author=typist).values_list("pk", flat=True).order_by("-pk").first()
    typed: dict[int, tuple[str, str]] = {}  # queue item -> (verdict chosen, text typed)
    seconds: list[float] = []
    tabs = 0
    keys = 0  # per item, the keys below, not counting the characters typed
    with serving(db_url) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"])
        page = browser.new_page()
        page.set_default_timeout(30_000)
        page.goto(f"{base}/login/?next=/queues/{queue.pk}/")  # the login is the one part done with the mouse
        page.fill("input[name=username]", typist.username)
        page.fill("input[name=password]", "bench-pw-123")
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/queues/{queue.pk}/")
        tabs += tab_to(page, "start")
        opened = time.perf_counter()
        with page.expect_navigation():
            page.keyboard.press("Enter")
        while "/steps/" in page.url:
            item = int(re.search(r"queue_item=(\d+)", page.url).group(1))
            shown = page.input_value("#verdict")
            verdict = next(v for v in ("suboptimal", "harmful", "optimal") if v != shown)
            text = f" Keyboard check {len(typed) + 1}: the agent should confirm first."
            page.keyboard.press(VERDICT_KEYS[verdict])
            page.keyboard.press("e")
            page.keyboard.press("Control+End")
            page.keyboard.type(text)
            url = page.url
            page.keyboard.press("Control+Enter")  # save and next, from the field being typed in
            keys += 4
            page.wait_for_url(lambda u, url=url: u != url)
            now = time.perf_counter()
            seconds.append(now - opened)
            opened = now
            typed[item] = (verdict, text)
        finished = "Nothing left for you" in page.inner_text("main")
        browser.close()
    total = sum(seconds)
    print(f"keyboard-only annotator, {len(seconds)} items in Chromium on gunicorn 127.0.0.1: "
          f"median {statistics.median(seconds):.2f} s/item, p90 {percentile(seconds, 0.9):.2f} s, "
          f"total {total:.1f} s; {tabs} Tab presses and Enter to start, then {keys / max(1, len(seconds)):.1f} keys "
          f"per item besides the text typed")
    done = {a.item_id: a for a in Assignment.objects.filter(item__queue=queue, annotator=typist,
                                                            status=Assignment.DONE).select_related("annotation__head")}
    new = Revision.objects.filter(author=typist, pk__gt=revisions_before or 0)
    problems = [] if finished else ["the queue page did not say nothing is left"]
    if len(typed) != n_items or len(done) != n_items or new.count() != n_items:
        problems.append(f"{len(typed)} items typed, {len(done)} assignments done, {new.count()} new revisions; "
                        f"expected {n_items} of each")
    for item_id, (verdict, text) in typed.items():
        head = done[item_id].annotation.head if item_id in done else None
        if head is None or head.verdict != verdict or not head.predicted_future.endswith(text):
            problems.append(f"queue item {item_id}: stored {head and (head.verdict, head.predicted_future[-60:])}, "
                            f"typed {(verdict, text)}")
    print(f"database: {len(done)} finished assignments, {new.count()} new revisions of {typist.username}, "
          f"verdicts and typed text {'all as typed' if not problems else 'WRONG'}")
    if problems:
        raise SystemExit("keyboard run check failed:\n  " + "\n  ".join(problems))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--annotators", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--overlap", type=int, default=2)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--items", type=int, default=20, help="queue length for the keyboard-only part")
    parser.add_argument("--keyboard-only", action="store_true", help="run part 3 alone")
    parser.add_argument("--quick", action="store_true", help="a smoke run: small counts everywhere")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.annotators, args.seconds, args.items = 5, 4, 5, 5
    db_url = os.environ.get("DATABASE_URL")
    if not db_url:
        DB_FILE.parent.mkdir(exist_ok=True)
        db_url = f"sqlite:///{DB_FILE}"
    django_with(db_url)
    project, trajectory, researcher, people = setup(args.annotators)
    if not args.keyboard_only:
        time_pages(trajectory, researcher, args.runs)
        load(project, people, args.annotators, args.seconds, args.overlap, db_url)
    keyboard_only(project, args.items, db_url)


if __name__ == "__main__":
    main()

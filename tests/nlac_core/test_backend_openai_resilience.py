"""The openai backend against a misbehaving local endpoint: retries with backoff, timeouts, the concurrency cap.

The endpoint is a small HTTP server in this process, scripted per test (the
model is beside the point): it answers 429 or 500, stalls, or counts how many
requests are in flight at once.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nlac_core.backends.base import BackendError, SamplingSpec
from nlac_core.backends.openai_backend import OpenAIBackend

SPEC = SamplingSpec(max_new_tokens=8)


def completion(text: str) -> dict:
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


class Endpoint:
    """Scripted behaviour: ``plan(n, body)`` -> (status, payload, delay_s) for the n-th request (from 0)."""

    def __init__(self, plan) -> None:
        self.plan = plan
        self.count = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with endpoint.lock:
                    n = endpoint.count
                    endpoint.count += 1
                    endpoint.in_flight += 1
                    endpoint.max_in_flight = max(endpoint.max_in_flight, endpoint.in_flight)
                try:
                    status, payload, delay = endpoint.plan(n, body)
                    time.sleep(delay)
                    data = json.dumps(payload).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.send_header("retry-after-ms", "20")  # the client honours it: quick retries here
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout)
                finally:
                    with endpoint.lock:
                        endpoint.in_flight -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/v1"

    def __enter__(self) -> Endpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def chat(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_it_retries_rate_limits_and_server_errors_then_succeeds():
    def plan(n, body):
        if n == 0:
            return 429, {"error": {"message": "slow down"}}, 0
        if n == 1:
            return 503, {"error": {"message": "overloaded"}}, 0
        return 200, completion("hello"), 0

    with Endpoint(plan) as endpoint:
        backend = OpenAIBackend("m", base_url=endpoint.url, max_retries=3)
        [out] = backend.generate([chat("hi")], SPEC)
        assert out.text == "hello" and out.prompt_tokens == 3
        assert endpoint.count == 3


def test_it_gives_up_after_its_retries_naming_the_endpoint_and_status():
    with Endpoint(lambda n, body: (500, {"error": {"message": "boom"}}, 0)) as endpoint:
        backend = OpenAIBackend("m", base_url=endpoint.url, max_retries=2)
        with pytest.raises(BackendError, match=r"127\.0\.0\.1:\d+/v1: HTTP 500 for model 'm': boom"):
            backend.generate([chat("hi")], SPEC)
        assert endpoint.count == 3  # the first try and two retries


def test_it_does_not_retry_a_bad_request():
    with Endpoint(lambda n, body: (400, {"error": {"message": "max_tokens too large"}}, 0)) as endpoint:
        with pytest.raises(BackendError, match="HTTP 400 .*max_tokens too large"):
            OpenAIBackend("m", base_url=endpoint.url, max_retries=3).generate([chat("hi")], SPEC)
        assert endpoint.count == 1


def test_it_times_out_a_stalled_endpoint():
    with Endpoint(lambda n, body: (200, completion("late"), 3.0)) as endpoint:
        backend = OpenAIBackend("m", base_url=endpoint.url, timeout=0.3, max_retries=1)
        started = time.perf_counter()
        with pytest.raises(BackendError, match="no answer within the timeout"):
            backend.generate([chat("hi")], SPEC)
        assert time.perf_counter() - started < 2.5 and endpoint.count == 2  # one retry, each cut at 0.3 s


def test_it_keeps_at_most_concurrency_requests_in_flight_and_the_order():
    def plan(n, body):
        return 200, completion(body["messages"][-1]["content"].upper()), 0.15

    with Endpoint(plan) as endpoint:
        backend = OpenAIBackend("m", base_url=endpoint.url, concurrency=3)
        texts = [f"q{i}" for i in range(10)]
        out = backend.generate([chat(t) for t in texts], SPEC)
        assert [c.text for c in out] == [t.upper() for t in texts]
        assert endpoint.max_in_flight == 3 and endpoint.count == 10


def test_it_sends_the_seed_per_request_and_the_stop_strings():
    seen = []

    def plan(n, body):
        seen.append(body)
        return 200, completion("a. b"), 0

    with Endpoint(plan) as endpoint:
        backend = OpenAIBackend("m", base_url=endpoint.url, concurrency=1)
        out = backend.generate([chat("x"), chat("y")], SamplingSpec(max_new_tokens=5, temperature=0.7, seed=10,
                                                                   stop=(".",)))
        assert [b["seed"] for b in seen] == [10, 11] and all(b["stop"] == ["."] for b in seen)
        assert [c.text for c in out] == ["a", "a"]  # a server that echoes the stop string is cut there

"""The OpenAI-compatible backend against ``python -m nlac_core serve`` running the embedded model."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from nlac_core.backends.base import BackendError, ChatRequest, SamplingSpec, ScoreRequest, Unsupported
from nlac_core.backends.openai_backend import OpenAIBackend
from tests.conftest import ROOT

QUESTIONS = [
    "What is the capital of France?", "Say hello.", "What is 2 plus 2?", "Name a fruit that is yellow.",
    "How many legs does a spider have?", "Who wrote Romeo and Juliet?", "What does a thermometer measure?",
    "Which planet is known as the red planet?",
]


def chat(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module")
def server_url():
    """A real server subprocess on a free port; its URL is read from the line it prints when ready."""
    proc = subprocess.Popen([sys.executable, "-m", "nlac_core", "serve", "embedded", "--port", "0"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while not any("serving" in line for line in lines):
            assert proc.poll() is None, "the server exited before it was ready"
            assert time.monotonic() < deadline, "the server did not start within 120 s"
            time.sleep(0.1)
        url = next(line for line in lines if "serving" in line).split(" at ")[-1].strip()
        with urllib.request.urlopen(f"{url}/models", timeout=10) as response:
            assert json.load(response)["data"][0]["id"] == "embedded"
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def post(url: str, body) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(f"{url}/chat/completions", data=data,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


@pytest.mark.slow
def test_it_generates_what_the_hf_backend_generates(server_url, embedded_backend):
    spec = SamplingSpec(max_new_tokens=10)
    remote = OpenAIBackend("embedded", base_url=server_url).generate([chat(QUESTIONS[0])], spec)
    assert remote == embedded_backend.generate([chat(QUESTIONS[0])], spec)


@pytest.mark.slow
def test_it_sends_8_requests_at_once_and_keeps_their_order(server_url, embedded_backend):
    spec = SamplingSpec(max_new_tokens=8)
    requests = [chat(q) for q in QUESTIONS]
    remote = OpenAIBackend("embedded", base_url=server_url, concurrency=8).generate(requests, spec)
    local = embedded_backend.generate(requests, spec)
    assert [c.text for c in remote] == [c.text for c in local]
    assert [c.prompt_tokens for c in remote] == [c.prompt_tokens for c in local]


@pytest.mark.slow
def test_it_samples_what_the_hf_backend_samples_with_the_same_seed(server_url, embedded_backend):
    # request i goes out with seed + i, and the server samples each row from its own seed, batched or not
    spec = SamplingSpec(max_new_tokens=8, temperature=1.0, seed=11)
    requests = [chat(q) for q in QUESTIONS[:4]]
    remote = OpenAIBackend("embedded", base_url=server_url, concurrency=4).generate(requests, spec)
    assert [c.text for c in remote] == [c.text for c in embedded_backend.generate(requests, spec)]


@pytest.mark.slow
def test_it_continues_a_prefix_and_stops_at_a_stop_string(server_url):
    backend = OpenAIBackend("embedded", base_url=server_url)
    request = ChatRequest(chat(QUESTIONS[0]), assistant_prefix="The capital of France is")
    done = backend.generate([request], SamplingSpec(max_new_tokens=8, stop=(".",)))[0]
    assert done.text == " Paris"
    assert done.finish_reason == "stop"


@pytest.mark.slow
def test_it_answers_a_bad_request_with_400_and_a_message(server_url):
    status, body = post(server_url, {"model": "embedded"})
    assert status == 400 and body["error"]["message"] == "'messages' is required"
    status, body = post(server_url, {"messages": chat("Hi"), "temperature": "hot"})
    assert status == 400 and "'temperature' must be a number" in body["error"]["message"]
    status, body = post(server_url, b"{not json")
    assert status == 400 and "not valid JSON" in body["error"]["message"]
    with pytest.raises(BackendError, match=r"HTTP 404 .*'gpt-x' is not served here"):
        OpenAIBackend("gpt-x", base_url=server_url).generate([chat("Hi")], SamplingSpec(max_new_tokens=2))


def test_it_fails_fast_naming_a_dead_endpoint():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket is closed
    url = f"http://127.0.0.1:{port}/v1"
    backend = OpenAIBackend("any", base_url=url, timeout=2.0, max_retries=1)
    start = time.monotonic()
    with pytest.raises(BackendError, match=f"{url}: cannot connect"):
        backend.generate([chat("Hi")], SamplingSpec(max_new_tokens=2))
    assert time.monotonic() - start < 5


def test_it_cannot_score_continuations():
    backend = OpenAIBackend("any", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(Unsupported, match="127.0.0.1:9"):
        backend.loglikelihood([ScoreRequest(chat("Hi"), "Hello")])

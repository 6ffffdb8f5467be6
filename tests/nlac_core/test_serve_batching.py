"""The HTTP server batches concurrent requests and refuses bad ones; a scripted backend stands in for the model."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from nlac_core.backends.base import ChatRequest, SamplingSpec
from nlac_core.backends.fake import FakeBackend
from nlac_core.backends.openai_backend import OpenAIBackend
from nlac_core.serve import ChatServer


class SlowEcho(FakeBackend):
    """Answers with the last user message, taking a while per call as a model would."""

    def __init__(self) -> None:
        super().__init__(responder=lambda request: "echo: " + request.messages[-1]["content"])
        self.specs: list[SamplingSpec] = []

    def generate(self, requests, spec):
        self.specs.append(spec)
        time.sleep(0.2)
        return super().generate(requests, spec)


@pytest.fixture
def server():
    srv = ChatServer(SlowEcho(), port=0, model_name="echo")
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def post(url: str, body) -> tuple[int, dict]:
    request = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def test_it_generates_concurrent_requests_in_few_batched_calls(server):
    requests = [[{"role": "user", "content": f"question {i}"}] for i in range(8)]
    done = OpenAIBackend("echo", base_url=server.url, concurrency=8).generate(requests, SamplingSpec(max_new_tokens=5))
    assert [c.text for c in done] == [f"echo: question {i}" for i in range(8)]
    assert sum(server.queue.batches) == 8
    assert len(server.queue.batches) <= 3  # not 8 calls of one


def test_it_passes_the_prefix_and_sampling_to_the_backend(server):
    backend = OpenAIBackend("echo", base_url=server.url)
    request = ChatRequest([{"role": "user", "content": "Q"}], assistant_prefix="VERDICT:")
    spec = SamplingSpec(max_new_tokens=7, temperature=0.5, top_p=0.9, seed=3, stop=("\n",))
    backend.generate([request], spec)
    assert server.backend.calls == [("generate", [request])]
    assert server.backend.specs == [spec]


@pytest.mark.parametrize(("body", "status", "message"), [
    ({}, 400, "'messages' is required"),
    ({"messages": []}, 400, "'messages' must be a non-empty list"),
    ({"messages": [{"content": "hi"}]}, 400, "'messages[0].role' must be a non-empty string"),
    ({"messages": [{"role": "user", "content": 5}]}, 400, "'messages[0].content' must be a string"),
    ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": "ten"}, 400, "'max_tokens' must be an integer"),
    ({"messages": [{"role": "user", "content": "hi"}], "top_p": 0}, 400, "'top_p' must be in (0.0, 1.0]"),
    ({"messages": [{"role": "user", "content": "hi"}], "stop": [1]}, 400, "'stop' must be a string or a list"),
    ({"messages": [{"role": "user", "content": "hi"}], "n": 2}, 400, "only n=1 is supported"),
    ({"messages": [{"role": "user", "content": "hi"}], "continue_final_message": True}, 400,
     "needs a final assistant message"),
    ({"messages": [{"role": "user", "content": "hi"}], "model": "other"}, 404, "'other' is not served here"),
])
def test_it_refuses_a_bad_request_naming_the_field(server, body, status, message):
    got_status, got = post(server.url, body)
    assert got_status == status
    assert message in got["error"]["message"]
    assert server.backend.calls == []


def test_it_lists_the_served_model_and_answers_404_elsewhere(server):
    with urllib.request.urlopen(f"{server.url}/models", timeout=5) as response:
        assert [m["id"] for m in json.load(response)["data"]] == ["echo"]
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{server.url}/nothing", timeout=5)
    assert info.value.code == 404


def test_it_names_the_address_it_cannot_listen_on():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
            ChatServer(SlowEcho(), port=port)


def test_it_answers_500_when_the_backend_fails(server):
    def broken(requests, spec):
        raise RuntimeError("out of memory")

    server.backend.generate = broken
    status, body = post(server.url, {"messages": [{"role": "user", "content": "hi"}]})
    assert status == 500
    assert body["error"]["message"] == "generation failed: out of memory"

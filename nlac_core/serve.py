"""A small OpenAI-compatible HTTP server around any backend.

    python -m nlac_core serve embedded --port 8001
    curl http://127.0.0.1:8001/v1/chat/completions -d '{"messages": [{"role": "user", "content": "Hi"}]}'

It speaks the part of the chat completions API our OpenAI backend uses:
``messages``, ``max_tokens`` (or ``max_completion_tokens``), ``temperature``,
``top_p``, ``seed``, ``stop``, ``n=1``, and vLLM's ``continue_final_message`` /
``add_generation_prompt`` extension (the final assistant message is a prefix
the model continues). ``GET /v1/models`` lists the one model served.

Why a batching queue: the model is not thread-safe and a batched generate
costs little more than a single one, so request threads never call the model.
They hand their request to one model thread, which takes whatever arrived
within a few milliseconds (and everything that queued up while it was busy),
and generates it in one call per distinct sampling setting. Concurrent clients
(the openai backend sends ``concurrency`` requests at once) then share batches.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import queue
import threading
import time
import uuid
from concurrent.futures import Future
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from nlac_core.backends.base import Backend, ChatRequest, SamplingSpec

DEFAULT_MAX_TOKENS = 256
MAX_BODY_BYTES = 32 * 1024 * 1024


class RequestError(Exception):
    """A request the API refuses: answered with ``status`` and an OpenAI-shaped error body."""

    def __init__(self, message: str, status: int = 400, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.param, self.code = status, param, code


# ------------------------------------------------------------------ parsing

def _number(body: dict, key: str, default: float, low: float, high: float, low_open: bool = False) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RequestError(f"'{key}' must be a number, got {type(value).__name__}", param=key)
    if value < low or value > high or (low_open and value == low):
        bound = f"({low}, {high}]" if low_open else f"[{low}, {high}]"
        raise RequestError(f"'{key}' must be in {bound}, got {value}", param=key)
    return float(value)


def _integer(body: dict, key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"'{key}' must be an integer, got {type(value).__name__}", param=key)
    return value


def _flag(body: dict, key: str) -> bool | None:
    value = body.get(key)
    if value is not None and not isinstance(value, bool):
        raise RequestError(f"'{key}' must be true or false, got {type(value).__name__}", param=key)
    return value


def _content(value: Any, where: str) -> str:
    """A message's content: a string, null, or a list of text parts (the newer OpenAI shape)."""
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, list):
        texts = []
        for j, part in enumerate(value):
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise RequestError(f"'{where}[{j}]' must be a text part {{\"type\": \"text\", \"text\": ...}}",
                                   param=where)
            texts.append(part["text"])
        return "".join(texts)
    raise RequestError(f"'{where}' must be a string, null or a list of text parts, got {type(value).__name__}",
                       param=where)


def parse_chat_request(body: Any) -> tuple[ChatRequest, SamplingSpec]:
    """Validate a chat completions body; every refusal names the field."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    messages = body.get("messages")
    if messages is None:
        raise RequestError("'messages' is required", param="messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty list of messages", param="messages")
    plain = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise RequestError(f"'messages[{i}]' must be an object", param=f"messages[{i}]")
        if not isinstance(m.get("role"), str) or not m["role"]:
            raise RequestError(f"'messages[{i}].role' must be a non-empty string", param=f"messages[{i}].role")
        plain.append({**m, "content": _content(m.get("content"), f"messages[{i}].content")})

    if body.get("stream"):
        raise RequestError("streaming is not supported by this server", param="stream")
    n = _integer(body, "n")
    if n not in (None, 1):
        raise RequestError(f"only n=1 is supported, got {n}", param="n")
    cont, gen_prompt = _flag(body, "continue_final_message"), _flag(body, "add_generation_prompt")
    prefix = ""
    if cont:
        if gen_prompt:
            raise RequestError("continue_final_message and add_generation_prompt cannot both be true",
                               param="continue_final_message")
        if plain[-1]["role"] != "assistant":
            raise RequestError("continue_final_message needs a final assistant message to continue",
                               param="messages")
        prefix = plain.pop()["content"]
    elif gen_prompt is False:
        raise RequestError("add_generation_prompt=false is only supported with continue_final_message=true",
                           param="add_generation_prompt")

    max_tokens = _integer(body, "max_completion_tokens")
    if max_tokens is None:
        max_tokens = _integer(body, "max_tokens")
    if max_tokens is not None and max_tokens < 1:
        raise RequestError(f"'max_tokens' must be at least 1, got {max_tokens}", param="max_tokens")
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise RequestError("'stop' must be a string or a list of strings", param="stop")
    spec = SamplingSpec(max_new_tokens=max_tokens or DEFAULT_MAX_TOKENS,
                        temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
                        top_p=_number(body, "top_p", 1.0, 0.0, 1.0, low_open=True),
                        seed=_integer(body, "seed"), stop=tuple(stop or ()))
    return ChatRequest(plain, assistant_prefix=prefix), spec


# ------------------------------------------------------------------ batching

@dataclasses.dataclass
class _Pending:
    request: ChatRequest
    spec: SamplingSpec
    future: Future


class BatchingQueue:
    """One model thread; requests arriving together are generated in one call.

    Requests are grouped by sampling setting. A backend whose ``generate``
    takes ``row_seeds`` (hf, vllm) also batches requests that differ only in
    their seed; for others the seed is part of the group.
    """

    def __init__(self, backend: Backend, window_s: float = 0.01, max_batch: int = 64) -> None:
        self.backend = backend
        self.window_s = window_s
        self.max_batch = max_batch
        self.row_seeds = "row_seeds" in inspect.signature(backend.generate).parameters
        self.batches: list[int] = []  # sizes of the generate calls made, for tests and logs
        self._queue: queue.Queue[_Pending | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="nlac-model", daemon=True)
        self._thread.start()

    def submit(self, request: ChatRequest, spec: SamplingSpec) -> Future:
        future: Future = Future()
        self._queue.put(_Pending(request, spec, future))
        return future

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            items = [first]
            deadline = time.monotonic() + self.window_s
            stop = False
            while len(items) < self.max_batch:
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                items.append(item)
            try:
                self._generate(items)
            except Exception as exc:  # never leave a request thread waiting for an answer
                for item in items:
                    if not item.future.done():
                        item.future.set_exception(exc)
            if stop:
                return

    def _generate(self, items: list[_Pending]) -> None:
        groups: dict[SamplingSpec, list[_Pending]] = {}
        for item in items:
            key = dataclasses.replace(item.spec, seed=None) if self.row_seeds else item.spec
            groups.setdefault(key, []).append(item)
        for spec, group in groups.items():
            self.batches.append(len(group))
            try:
                if self.row_seeds:
                    completions = self.backend.generate([g.request for g in group], spec,
                                                        row_seeds=[g.spec.seed for g in group])
                else:
                    completions = self.backend.generate([g.request for g in group], spec)
            except Exception as exc:  # answered as a 500 to every request of the group
                for g in group:
                    g.future.set_exception(exc)
                continue
            for g, completion in zip(group, completions, strict=True):
                g.future.set_result(completion)


# ------------------------------------------------------------------ HTTP

class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the openai client reuses its connections
    server: ChatServer

    def log_message(self, format: str, *args) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, exc: RequestError) -> None:
        kind = "invalid_request_error" if exc.status < 500 else "server_error"
        self._send(exc.status, {"error": {"message": str(exc), "type": kind, "param": exc.param,
                                          "code": exc.code}})

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/v1/models":
            self._send(200, {"object": "list", "data": [
                {"id": self.server.model_name, "object": "model", "created": self.server.created,
                 "owned_by": "nlac-studio", "root": self.server.backend.model}]})
        elif path == "/health":
            self._send(200, {"status": "ok"})
        else:
            self._error(RequestError(f"no such endpoint: GET {path}", status=404))

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            raw = self._read_body()  # read even when refusing, so a kept-alive connection stays in step
            if path != "/v1/chat/completions":
                raise RequestError(f"no such endpoint: POST {path}", status=404)
            try:
                body = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise RequestError(f"the request body is not valid JSON ({exc})") from None
            self._send(200, self.server.complete(body))
        except RequestError as exc:
            self._error(exc)

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None:
            self.close_connection = True
            raise RequestError("a Content-Length header is required", status=HTTPStatus.LENGTH_REQUIRED)
        try:
            size = int(length)
        except ValueError:
            self.close_connection = True
            raise RequestError(f"bad Content-Length: {length!r}") from None
        if size > MAX_BODY_BYTES:
            self.close_connection = True
            raise RequestError(f"request body of {size} bytes exceeds {MAX_BODY_BYTES}", status=413)
        return self.rfile.read(size)


class ChatServer(ThreadingHTTPServer):
    """``url`` is the base URL to give an OpenAI client (ends in ``/v1``)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, backend: Backend, host: str = "127.0.0.1", port: int = 8001, model_name: str | None = None,
                 window_s: float = 0.01, max_batch: int = 64, verbose: bool = False) -> None:
        try:
            super().__init__((host, port), _Handler)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on {host}:{port} ({exc.strerror})") from exc
        self.backend = backend
        self.model_name = model_name or backend.model
        self.created = int(time.time())
        self.verbose = verbose
        self.queue = BatchingQueue(backend, window_s=window_s, max_batch=max_batch)
        self.url = f"http://{host}:{self.server_address[1]}/v1"

    def complete(self, body: Any) -> dict:
        request, spec = parse_chat_request(body)
        model = body.get("model")
        if model is not None and not isinstance(model, str):
            raise RequestError(f"'model' must be a string, got {type(model).__name__}", param="model")
        if model is not None and model not in (self.model_name, self.backend.model):
            raise RequestError(f"the model {model!r} is not served here; this server serves {self.model_name!r}",
                               status=404, param="model", code="model_not_found")
        try:
            completion = self.queue.submit(request, spec).result()
        except Exception as exc:
            raise RequestError(f"generation failed: {exc}", status=500) from exc
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": self.model_name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": completion.text},
                         "finish_reason": completion.finish_reason, "logprobs": None}],
            "usage": {"prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
                      "total_tokens": completion.prompt_tokens + completion.completion_tokens},
        }

    def server_close(self) -> None:
        if hasattr(self, "queue"):  # socketserver also calls this when the bind fails, before there is a queue
            self.queue.close()
        super().server_close()


def serve(backend: Backend, host: str = "127.0.0.1", port: int = 8001, model_name: str | None = None,
          window_s: float = 0.01, max_batch: int = 64, verbose: bool = False) -> None:
    """Serve until interrupted; prints the base URL once the port is open (port 0 picks a free one)."""
    server = ChatServer(backend, host, port, model_name=model_name, window_s=window_s, max_batch=max_batch,
                        verbose=verbose)
    print(f"serving {server.model_name} ({backend.name}) at {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()

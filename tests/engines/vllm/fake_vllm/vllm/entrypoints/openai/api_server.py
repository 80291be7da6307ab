"""A fake of vLLM's OpenAI server for tests: the endpoints `art.engines.vllm` calls, on 127.0.0.1.

Started exactly as the real one (`python -m vllm.entrypoints.openai.api_server --model ... --port ...`)
with this folder's parent on PYTHONPATH. It keeps vLLM's rules that matter to the engine: the API key,
`/v1/load_lora_adapter` only with VLLM_ALLOW_RUNTIME_LORA_UPDATING, `/sleep` and `/wake_up` only with
VLLM_SERVER_DEV_MODE=1 and --enable-sleep-mode, no generation while asleep. Every call is appended to
`calls` (GET /fake/calls); GET /fake/launch gives its argv and CUDA_VISIBLE_DEVICES; POST /fake/die ends the process with code 3. Like vLLM it starts an "engine
core" process that outlives it unless its process group is stopped (its argv ends with `fake-engine-core`). Tokens are made up: token i of a
sequence is (last prompt id + i + 1) % 100, with logprob -0.5; a prompt token's logprob is -1.0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def top_alternatives(token: int, k: int) -> dict[str, float]:
    """A completion's `top_logprobs` entry for a sampled `token`: k + 1 alternatives (vLLM may add the sampled
    token to the k asked for), the sampled one best at -0.5, then -1.5, -2.5, ... for the next ids. Listed
    worst first, as nothing in vLLM's API promises an order: the engine must sort them and keep k."""
    ranked = {f"token_id:{(token + i) % 100}": -0.5 - i for i in range(k + 1)}
    return dict(reversed(ranked.items()))


parser = argparse.ArgumentParser()
parser.add_argument("--model")
parser.add_argument("--served-model-name")
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int)
parser.add_argument("--api-key")
parser.add_argument("--enable-sleep-mode", action="store_true")
parser.add_argument("--max-model-len", type=int, default=256)
args, _unknown = parser.parse_known_args()

calls: list[dict[str, Any]] = []
adapters: dict[str, str] = {}
state = {"asleep": False}
lock = threading.Lock()
DEV = os.environ.get("VLLM_SERVER_DEV_MODE") == "1"
RUNTIME_LORA = os.environ.get("VLLM_ALLOW_RUNTIME_LORA_UPDATING") in ("1", "True", "true")
DELAY_S = float(os.environ.get("FAKE_VLLM_DELAY_S", "0"))


def tokens(prompt: list[int], n: int) -> list[int]:
    return [(prompt[-1] + i + 1) % 100 for i in range(n)]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # head and body go out as two writes: as vLLM's, no 40 ms delayed-ACK wait

    def log_message(self, *a: Any) -> None:
        pass

    def reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorised(self) -> bool:
        if self.path == "/health" or self.headers.get("Authorization") == f"Bearer {args.api_key}":
            return True
        self.reply(401, {"error": "Unauthorized"})
        return False

    def do_GET(self) -> None:
        if not self.authorised():
            return
        if self.path == "/health":
            self.reply(200, {})
        elif self.path == "/v1/models":
            names = [args.served_model_name, *adapters]
            self.reply(200, {"data": [{"id": n, "max_model_len": args.max_model_len} for n in names]})
        elif self.path == "/is_sleeping" and DEV:
            self.reply(200, {"is_sleeping": state["asleep"]})
        elif self.path == "/fake/calls":
            self.reply(200, calls)
        elif self.path == "/fake/launch":  # how it was started: which GPUs it was given, its arguments
            self.reply(200, {"argv": sys.argv[1:], "gpus": os.environ.get("CUDA_VISIBLE_DEVICES")})
        else:
            self.reply(404, {"error": "not found"})

    def do_POST(self) -> None:
        if not self.authorised():
            return
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        with lock:
            calls.append({"path": self.path, "body": body, "t": time.time()})
        path = self.path.split("?")[0]
        if path == "/fake/die":
            os._exit(3)
        if path in ("/sleep", "/wake_up"):
            if not (DEV and args.enable_sleep_mode):
                return self.reply(404, {"detail": "Not Found"})
            state["asleep"] = path == "/sleep"
            return self.reply(200, {})
        if path == "/v1/load_lora_adapter":
            if not RUNTIME_LORA:
                return self.reply(404, {"detail": "Not Found"})
            if not os.path.isfile(os.path.join(body["lora_path"], "adapter_config.json")):
                return self.reply(400, {"error": {"message": f"no adapter at {body['lora_path']}"}})
            if body["lora_name"] in adapters and not body.get("load_inplace"):
                return self.reply(400, {"error": {"message": "already loaded"}})
            adapters[body["lora_name"]] = body["lora_path"]
            return self.reply(200, {})
        if path == "/v1/unload_lora_adapter":
            if adapters.pop(body["lora_name"], None) is None:
                return self.reply(404, {"error": {"message": "not loaded"}})
            return self.reply(200, {})
        if path in ("/v1/completions", "/v1/chat/completions"):
            if state["asleep"]:
                return self.reply(500, {"error": {"message": "engine is sleeping"}})
            if body["model"] not in (args.served_model_name, *adapters):
                return self.reply(404, {"error": {"message": f"The model `{body['model']}` does not exist."}})
            time.sleep(DELAY_S)
            if path == "/v1/completions":
                return self.completion(body)
            return self.chat(body)
        self.reply(404, {"detail": "Not Found"})

    def completion(self, body: dict[str, Any]) -> None:
        prompt = body["prompt"]
        ids = tokens(prompt, body.get("max_tokens") or 4)
        choice: dict[str, Any] = {"index": 0, "text": "", "token_ids": ids, "finish_reason": "length"}
        choice["logprobs"] = {
            "token_logprobs": [-0.5] * len(ids),
            "top_logprobs": [top_alternatives(t, body.get("logprobs") or 0) for t in ids],
        }
        if body.get("prompt_logprobs") is not None:
            choice["prompt_logprobs"] = [None] + [{str(t): {"logprob": -1.0, "rank": 1}} for t in prompt[1:]]
        self.reply(
            200, {"id": "cmpl-fake", "object": "text_completion", "model": body["model"], "choices": [choice]}
        )

    def chat(self, body: dict[str, Any]) -> None:
        ids = tokens([7], body.get("max_tokens") or 3)
        content = [{"token": f"token_id:{t}", "logprob": -0.5, "top_logprobs": []} for t in ids]
        message = {"role": "assistant", "content": "fake"}
        if body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in ({"choices": [{"index": 0, "delta": message, "token_ids": ids}]}, "[DONE]"):
                line = f"data: {piece if isinstance(piece, str) else json.dumps(piece)}\n\n".encode()
                self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        choice = {
            "index": 0,
            "message": message,
            "finish_reason": "stop",
            "token_ids": ids,
            "logprobs": {"content": content},
        }
        self.reply(
            200,
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "model": body["model"],
                "prompt_token_ids": [1, 2, 3],
                "choices": [choice],
            },
        )


# vLLM's EngineCore: a child in the server's process group, which nothing stops when the server dies.
engine_core = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(10**6)", "fake-engine-core"])
ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()

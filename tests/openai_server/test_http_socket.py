"""The sockets our HTTP servers listen on (`art.openai_server.http.bind_socket`): a short request is not held
back by Nagle's algorithm.

Measured on 2 cores (AVX-512 BF16 host), 30 sequential GETs of `/health` from a keep-alive client: 47.9 ms
median without TCP_NODELAY (uvicorn writes the head and the body as two segments; the second waits for the
client's 40 ms delayed ACK), 1.1 ms with it. The bound below sits between the two: it fails on the 40 ms
floor of the bug, with room for a loaded CI host."""

from __future__ import annotations

import socket
import statistics
import time

import httpx
from fastapi import FastAPI

from art.openai_server.http import ServerThread, bind_socket

NAGLE_FLOOR_MS = 40.0  # Linux's minimum delayed-ACK time: what each request waited with the bug


def test_the_listening_socket_hands_tcp_nodelay_to_what_it_accepts() -> None:
    sock = bind_socket("127.0.0.1", 0)
    try:
        sock.listen()
        with socket.create_connection(sock.getsockname()) as _client:
            accepted, _ = sock.accept()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        sock.close()


def test_a_short_request_to_a_served_app_takes_no_delayed_ack() -> None:
    app = FastAPI()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    server = ServerThread(app)
    base = server.start()
    try:
        with httpx.Client(base_url=base.removesuffix("/v1")) as client:
            client.get("/health")  # the connection is made once, then kept alive
            took = []
            for _ in range(20):
                t = time.perf_counter()
                assert client.get("/health").status_code == 200
                took.append((time.perf_counter() - t) * 1000)
    finally:
        server.stop()
    assert statistics.median(took) < NAGLE_FLOOR_MS / 2, took

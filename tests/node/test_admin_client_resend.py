"""The blocking admin client (harness/admin/client.py) sends a write at most once.

A tiny HTTP/1.1 server on loopback plays the node: it counts every request it executes, can drop
the connection after executing one without answering, and can close an idle keep-alive
connection. A write whose connection breaks after sending raises OutcomeUnknown and is not resent;
a write on a keep-alive the node closed while idle goes out once on a fresh connection; a GET on
a broken connection is resent once, transparently; the CLI's admin_request reports the unknown
outcome instead of asking another node.
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harness.admin.client import AdminClient, OutcomeUnknown
from harness.cli import common
from harness.launcher import cluster as cl


class Node(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.executed: list[tuple[str, str]] = []
        self.drop_next = 0  # requests still to execute then drop without an answer
        self.close_idle = False  # close the connection after the next answer (it stays idle)
        self.closed = threading.Event()  # set when a connection has been closed by the node

    def shutdown_request(self, request: Any) -> None:
        super().shutdown_request(request)
        self.closed.set()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Node

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.server.executed.append((self.command, self.path))
        if self.server.drop_next > 0:
            self.server.drop_next -= 1
            self.close_connection = True  # executed, no answer: the connection just closes
            return
        body = json.dumps({"n": len(self.server.executed)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()  # keep-alive as far as the client knows
        self.wfile.write(body)
        if self.server.close_idle:
            self.server.close_idle = False
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = _handle


@pytest.fixture
def node() -> Iterator[Node]:
    server = Node()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def client_of(node: Node) -> AdminClient:
    return AdminClient("127.0.0.1", node.server_address[1], timeout_s=5.0, token="t")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
def test_write_executed_then_dropped_is_sent_once_and_unknown(node: Node, method: str) -> None:
    client = client_of(node)
    assert client.request("GET", "/health") == (200, {"n": 1})  # a reused keep-alive next
    node.drop_next = 1
    with pytest.raises(OutcomeUnknown) as unknown:
        client.request(method, "/kv/k", {"value": "v"})
    assert node.executed == [("GET", "/health"), (method, "/kv/k")]  # once, never resent
    assert isinstance(unknown.value, OSError)  # callers' "did not answer" handling still applies
    assert str(unknown.value).startswith(f"outcome unknown: {method} /kv/k")
    client.close()


def test_write_on_a_fresh_connection_dropped_is_unknown_too(node: Node) -> None:
    node.drop_next = 1
    with pytest.raises(OutcomeUnknown):
        client_of(node).request("POST", "/topics", {"name": "t"})
    assert node.executed == [("POST", "/topics")]


def test_write_on_an_idle_keep_alive_the_node_closed_goes_once_on_a_new_one(node: Node) -> None:
    client = client_of(node)
    node.close_idle = True
    assert client.request("GET", "/health") == (200, {"n": 1})
    assert node.closed.wait(5)  # the node has closed the idle connection
    assert client.request("POST", "/kv/k/cas", {"expected": None, "value": "v"}) == (200, {"n": 2})
    assert node.executed == [("GET", "/health"), ("POST", "/kv/k/cas")]
    client.close()


def test_get_on_a_stale_keep_alive_is_retried_transparently(node: Node) -> None:
    client = client_of(node)
    node.close_idle = True
    assert client.request("GET", "/health") == (200, {"n": 1})
    assert node.closed.wait(5)
    assert client.request("GET", "/topics") == (200, {"n": 2})
    # A GET whose connection breaks after sending is resent once (reads are safe to repeat).
    node.drop_next = 1
    assert client.request("GET", "/topics") == (200, {"n": 4})
    assert node.executed == [("GET", "/health"), ("GET", "/topics"), ("GET", "/topics"),
                             ("GET", "/topics")]  # fmt: skip
    client.close()


def test_refused_connection_is_a_plain_oserror(node: Node) -> None:
    port = node.server_address[1]
    node.shutdown()
    node.server_close()
    with pytest.raises(OSError) as refused:
        AdminClient("127.0.0.1", port, timeout_s=5.0, token="t").request("POST", "/topics", {})
    assert not isinstance(refused.value, OutcomeUnknown)  # nothing was sent


def test_cli_admin_request_reports_unknown_and_asks_no_other_node(
    node: Node, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    port = node.server_address[1]
    entries = [argparse.Namespace(id=i, host="127.0.0.1", admin_port=port) for i in (1, 2)]
    fake = argparse.Namespace(nodes=entries, node=lambda i: entries[i - 1])
    monkeypatch.setattr(cl.ClusterFile, "load", staticmethod(lambda _: fake))
    args = argparse.Namespace(data_dir=str(tmp_path), node=None, timeout=5.0)
    node.drop_next = 1
    with pytest.raises(cl.ClusterError, match="^outcome unknown: POST /topics .*node 1"):
        common.admin_request(args, "POST", "/topics", {"name": "t"})
    assert node.executed == [("POST", "/topics")]  # not resent to node 2

"""test_unix.py: the Python client over unix:// (the C library's local transport) against a
small framing server in a thread: each frame a u32 little-endian length and one TSD1 message;
the server echoes the request's "v" with its id and hangs up on verb "hangup"."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import tempfile
import threading
import unittest

import harness  # noqa: F401  (puts this checkout's tensord package first on the path)

import tensord


def _recv_exact(conn: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        part = conn.recv(n - len(buf))
        if not part:
            return None
        buf += part
    return buf


def _message(header: dict) -> bytes:
    """A TSD1 message without tensors: magic, JSON length, JSON, zero padding to 64 bytes."""
    text = json.dumps(header).encode()
    body = b"TSD1" + struct.pack("<I", len(text)) + text
    return body + b"\0" * (-len(body) % 64)


class FramingServer:
    """An AF_UNIX listener in a thread; serves one connection at a time."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="tsd_pyunix_")
        self.path = os.path.join(self.dir, "s.sock")
        self.url = "unix://" + self.path
        self.accepts = 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(8)
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.start()

    def _main(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepts += 1
            with conn:
                self._serve(conn)

    def _serve(self, conn: socket.socket) -> None:
        while True:
            pre = _recv_exact(conn, 4)
            if pre is None:
                return
            msg = _recv_exact(conn, struct.unpack("<I", pre)[0])
            if msg is None or msg[:4] != b"TSD1":
                return
            jlen = struct.unpack("<I", msg[4:8])[0]
            req = json.loads(msg[8:8 + jlen])
            if req["verb"] == "hangup":
                return
            reply = _message({"id": req["id"], "status": "ok", "echo": req.get("v")})
            conn.sendall(struct.pack("<I", len(reply)) + reply)

    def close(self) -> None:
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class UnixTest(unittest.TestCase):
    def setUp(self) -> None:
        self.server = FramingServer()

    def tearDown(self) -> None:
        self.server.close()

    def test_calls(self) -> None:
        with tensord.Client(self.server.url, 5000) as c:
            for i in range(50):
                self.assertEqual(c.call("echo", {"v": i}).header["echo"], i)
            self.assertEqual(c.call("echo", {"v": "text"}).header["echo"], "text")

    def test_lost_connection_then_reconnect(self) -> None:
        with tensord.Client(self.server.url, 5000) as c:
            self.assertEqual(c.call("echo", {"v": 1}).header["echo"], 1)
            with self.assertRaises(tensord.TensordError) as e:
                c.call("hangup")
            self.assertIn("not re-sent", str(e.exception))
            self.assertEqual(c.call("echo", {"v": 2}).header["echo"], 2)
        self.assertEqual(self.server.accepts, 2)

    def test_no_server(self) -> None:
        with self.assertRaises(tensord.TensordError) as e:
            tensord.Client("unix://" + os.path.join(self.server.dir, "nobody.sock"), 1000)
        self.assertIn("is tensord running", str(e.exception))


if __name__ == "__main__":
    unittest.main()

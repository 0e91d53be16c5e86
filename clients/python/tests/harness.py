"""harness.py: the real tensord for the Python client's tests, like tests/daemon_harness.c: a
temporary directory with a config listening on an ipc socket in it, the daemon started from the
build directory (TENSORD_BIN, else <repo>/build/bin/tensord) and waited for until ready."""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(HERE.parent))  # the tensord package of this checkout

import tensord  # noqa: E402


def daemon_binary() -> str:
    """TENSORD_BIN, else the default build's; an error saying how to build it when absent."""
    path = os.environ.get("TENSORD_BIN") or str(REPO / "build" / "bin" / "tensord")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{path}: no tensord there (make BUILD=... python-test sets TENSORD_BIN)")
    return path


class Daemon:
    """One tensord: start(), url, models_dir, stop() (SIGTERM; it must exit 0)."""

    def __init__(self, extra_config: dict[str, Any] | None = None):
        self.dir = Path(tempfile.mkdtemp(prefix="tsd_py_"))
        self.models_dir = self.dir / "models"
        self.models_dir.mkdir()
        # both transports serve; the clients use unix:// unless TSD_TEST_TRANSPORT=nng
        self.unix_url, self.nng_url = f"unix://{self.dir}/u.sock", f"ipc://{self.dir}/s.sock"
        self.url = self.nng_url if os.environ.get("TSD_TEST_TRANSPORT") == "nng" else self.unix_url
        self.log_path = self.dir / "stderr"
        self.config = {"listen": [self.unix_url, self.nng_url], "models_dir": str(self.models_dir),
                       "cache_dir": str(self.dir / "cache"), "log_level": "warn", "oip_http_listen": "", "oip_grpc_listen": "",
                       **(extra_config or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60) -> Daemon:
        cfg = self.dir / "tensord.json"
        cfg.write_text(json.dumps(self.config))
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([daemon_binary(), "--config", str(cfg)], stdout=log, stderr=log,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tensord exited while starting ({self.proc.returncode}):\n{self.tail()}")
            try:
                with tensord.Client(self.url, 2000) as c:
                    if c.health().get("ready"):
                        return self
            except tensord.LibraryNotFound:
                self.kill()
                raise
            except tensord.TensordError:  # not listening yet
                pass
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"tensord not ready after {timeout_s} s:\n{self.tail()}")

    def tail(self, n: int = 6000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        """SIGTERM and wait (30 s); fails unless it exits 0. Removes the directory."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"tensord did not exit within 30 s of SIGTERM:\n{self.tail()}")
        if rc != 0:
            raise RuntimeError(f"tensord exited {rc}:\n{self.tail()}")
        shutil.rmtree(self.dir, ignore_errors=True)

    def start_checked(self, timeout_s: float = 60) -> Daemon:
        """start(), cleaning up (its log printed) when it fails: for setUpClass."""
        try:
            return self.start(timeout_s)
        except BaseException:
            self.cleanup()
            raise

    def stop_checked(self) -> None:
        """stop(), cleaning up when it fails: for tearDownClass."""
        try:
            self.stop()
        except BaseException:
            self.cleanup()
            raise

    def cleanup(self) -> None:
        """After a failure: kill it, print its log's tail, remove the directory."""
        if self.proc and self.proc.poll() is None:
            self.kill()
            sys.stderr.write(f"---- tensord stderr ----\n{self.tail()}---- end ----\n")
        shutil.rmtree(self.dir, ignore_errors=True)

    def write_safetensors(self, rel: str, tensors: dict[str, tuple[list[int], list[float]]]) -> None:
        """A float32 safetensors file in models_dir: {name: (shape, flat values)}."""
        header: dict[str, Any] = {}
        blobs, off = [], 0
        for name, (shape, values) in tensors.items():
            blob = struct.pack(f"<{len(values)}f", *values)
            header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(blob)]}
            blobs.append(blob)
            off += len(blob)
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        (self.models_dir / rel).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))

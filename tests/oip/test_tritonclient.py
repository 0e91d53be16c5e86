"""test_tritonclient.py: tensord driven through the Open Inference Protocol by Triton's own Python
client (tritonclient, pinned in tests/oip/setup-venv.sh), every output compared with the same
request over TSD1 (the tensord package of this checkout), and bad requests through raw HTTP
answered with their documented status while the daemon keeps serving. make oip-check runs it
in tests/oip/.venv."""

from __future__ import annotations

import gzip
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import unittest
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "clients" / "python" / "tests"))

import harness  # noqa: E402  (the tensord package of this checkout comes with it)
import tensord  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
import tritonclient.utils.shared_memory as shm  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

ONNX_MODEL = Path("/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d/model.onnx")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OIPTest(unittest.TestCase):
    d: harness.Daemon
    port: int
    tsd: tensord.Client
    http: httpclient.InferenceServerClient

    @classmethod
    def setUpClass(cls) -> None:
        cls.port = free_port()
        cls.d = harness.Daemon({"oip_http_listen": f"http://127.0.0.1:{cls.port}", "oip_shm": True})
        try:
            shutil.copy(REPO / "examples" / "models" / "mlp.json", cls.d.models_dir / "mlp.json")
            subprocess.run([str(Path(harness.daemon_binary()).parent / "make_weights"),
                            str(cls.d.models_dir / "mlp.safetensors")], check=True, capture_output=True)
            shutil.copy(ONNX_MODEL, cls.d.models_dir / "conv.onnx")
            cls.d.start()
            cls.tsd = tensord.Client(cls.d.url)
            with open(cls.d.models_dir / "mlp.json") as f:
                cls.tsd.load(spec=json.load(f))
            cls.tsd.load_onnx("conv", file="conv.onnx")
        except Exception:
            cls.d.cleanup()
            raise
        cls.http = httpclient.InferenceServerClient(url=f"127.0.0.1:{cls.port}")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.http.close()
        cls.tsd.close()
        try:
            cls.d.stop()
        except Exception:
            cls.d.cleanup()
            raise

    # ---- helpers ----
    def raw(self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None):
        """One raw HTTP request: (status, headers, body)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def assert_error(self, status: int, want: int, body: bytes, words: str) -> None:
        self.assertEqual(status, want, body)
        msg = json.loads(body)["error"]
        self.assertIn(words, msg)

    def assert_serving(self) -> None:
        x = np.ones((1, 16), np.float32)
        out = self.mlp_http(x, binary=True)
        np.testing.assert_array_equal(out["y"], self.tsd.infer("mlp", {"x": x})["y"])

    def mlp_http(self, x: np.ndarray, binary: bool, **kw):
        inp = httpclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x, binary_data=binary)
        outs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in ("y", "p")]
        r = self.http.infer("mlp", [inp], outputs=outs, **kw)
        return {n: r.as_numpy(n) for n in ("y", "p")}

    # ---- server and model metadata ----
    def test_health_and_metadata(self) -> None:
        self.assertTrue(self.http.is_server_live())
        self.assertTrue(self.http.is_server_ready())
        meta = self.http.get_server_metadata()
        self.assertEqual(meta["name"], "tensord")
        for ext in ("binary_tensor_data", "model_configuration", "statistics", "classification", "sequence"):
            self.assertIn(ext, meta["extensions"])
        m = self.http.get_model_metadata("mlp")
        self.assertEqual(m["name"], "mlp")
        self.assertEqual(m["inputs"], [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}])
        self.assertEqual([o["name"] for o in m["outputs"]], ["y", "p"])
        self.assertEqual(self.http.get_model_metadata("mlp", model_version=m["versions"][0])["name"], "mlp")
        self.assertTrue(self.http.is_model_ready("mlp"))
        self.assertFalse(self.http.is_model_ready("nope"))
        self.assertFalse(self.http.is_model_ready("mlp", model_version="99"))
        with self.assertRaises(InferenceServerException) as e:
            self.http.get_model_metadata("nope")
        self.assertIn("unknown model", str(e.exception))
        index = {e["name"]: e for e in self.http.get_model_repository_index()}
        self.assertEqual(set(index), {"mlp", "conv"})
        self.assertEqual(index["mlp"]["state"], "READY")

    def test_model_config(self) -> None:
        listed = {e["name"]: e for e in self.tsd.models()}["mlp"]
        cfg = self.http.get_model_config("mlp")
        self.assertEqual(cfg["max_batch_size"], listed["batch_max"])
        self.assertEqual(cfg["input"], [{"name": "x", "data_type": "TYPE_FP32", "dims": [16]}])
        self.assertEqual(cfg["dynamic_batching"]["preferred_batch_size"], listed["buckets"])
        self.assertEqual(cfg["dynamic_batching"]["max_queue_delay_microseconds"], listed["delay_us"])
        self.assertEqual(cfg["dynamic_batching"]["default_queue_policy"]["max_queue_size"], listed["queue_max"])
        conv = self.http.get_model_config("conv")
        self.assertEqual(conv["platform"], "tensord_onnx")

    # ---- infer ----
    def test_infer_mlp_json_and_binary(self) -> None:
        rng = np.random.default_rng(7)
        x = rng.standard_normal((3, 16)).astype(np.float32)
        want = self.tsd.infer("mlp", {"x": x})
        for binary in (False, True):
            got = self.mlp_http(x, binary)
            for n in ("y", "p"):
                np.testing.assert_array_equal(got[n], want[n], err_msg=f"{n} binary={binary}")

    def test_infer_options(self) -> None:
        x = np.full((2, 16), 0.5, np.float32)
        want = self.tsd.infer("mlp", {"x": x})
        got = self.mlp_http(x, True, request_id="r-17", model_version="1", priority=1, timeout=2_000_000,
                            request_compression_algorithm="gzip", response_compression_algorithm="gzip")
        np.testing.assert_array_equal(got["p"], want["p"])
        inp = httpclient.InferInput("x", [2, 16], "FP32")
        inp.set_data_from_numpy(x, binary_data=False)
        r = self.http.infer("mlp", [inp], request_id="r-18")
        self.assertEqual(r.get_response()["id"], "r-18")
        self.assertEqual(r.get_response()["model_version"], "1")
        np.testing.assert_array_equal(r.as_numpy("y"), want["y"])  # every output, JSON by default
        with self.assertRaises(InferenceServerException) as e:
            self.http.infer("mlp", [inp], model_version="7")
        self.assertIn("version 7", str(e.exception))

    def test_classification(self) -> None:
        x = np.random.default_rng(3).standard_normal((4, 16)).astype(np.float32)
        p = self.tsd.infer("mlp", {"x": x})["p"]
        inp = httpclient.InferInput("x", [4, 16], "FP32")
        inp.set_data_from_numpy(x)
        for binary in (False, True):
            r = self.http.infer("mlp", [inp], outputs=[httpclient.InferRequestedOutput("p", binary_data=binary,
                                                                                       class_count=2)])
            top = r.as_numpy("p")
            self.assertEqual(top.shape, (4, 2))
            for row in range(4):
                order = np.argsort(-p[row], kind="stable")[:2]
                for k in range(2):
                    s = top[row, k].decode() if isinstance(top[row, k], bytes) else top[row, k]
                    value, index = s.split(":")
                    self.assertEqual(int(index), order[k])
                    self.assertAlmostEqual(float(value), float(p[row, order[k]]), places=5)

    def test_infer_onnx(self) -> None:
        m = self.http.get_model_metadata("conv")
        (inp_meta,) = m["inputs"]
        shape = inp_meta["shape"]
        self.assertTrue(all(d > 0 for d in shape), shape)
        x = np.random.default_rng(11).standard_normal(shape).astype(np.float32)
        want = self.tsd.infer("conv", {inp_meta["name"]: x})
        for binary in (False, True):
            inp = httpclient.InferInput(inp_meta["name"], shape, "FP32")
            inp.set_data_from_numpy(x, binary_data=binary)
            r = self.http.infer("conv", [inp],
                                outputs=[httpclient.InferRequestedOutput(o["name"], binary_data=binary)
                                         for o in m["outputs"]])
            for o in m["outputs"]:
                np.testing.assert_array_equal(r.as_numpy(o["name"]), want[o["name"]])

    def test_response_compression(self) -> None:
        """An answer of 1 KiB or more comes back gzip'd to a client that accepts it, and as is
        to one that does not."""
        m = self.http.get_model_metadata("conv")
        (inp,) = m["inputs"]
        x = np.full(inp["shape"], 0.25, np.float32)
        body = json.dumps({"inputs": [{"name": inp["name"], "shape": inp["shape"], "datatype": "FP32",
                                       "data": x.ravel().tolist()}]}).encode()
        st, hdr, zipped = self.raw("POST", "/v2/models/conv/infer", body, {"Accept-Encoding": "gzip"})
        self.assertEqual(st, 200)
        self.assertEqual(hdr.get("content-encoding"), "gzip")
        st, hdr, plain = self.raw("POST", "/v2/models/conv/infer", body)
        self.assertNotIn("content-encoding", hdr)
        self.assertGreater(len(plain), 1024)
        self.assertEqual(json.loads(gzip.decompress(zipped)), json.loads(plain))

    def test_raw_binary_request(self) -> None:
        x = np.arange(32, dtype=np.float32).reshape(2, 16) / 32
        want = self.tsd.infer("mlp", {"x": x})
        st, hdr, body = self.raw("POST", "/v2/models/mlp/infer", x.tobytes(),
                                 {"Inference-Header-Content-Length": "0", "Content-Type": "application/octet-stream"})
        self.assertEqual(st, 200, body)
        n = int(hdr["inference-header-content-length"])
        head = json.loads(body[:n])
        at = n
        for o in head["outputs"]:
            size = o["parameters"]["binary_data_size"]
            got = np.frombuffer(body[at:at + size], np.float32).reshape(o["shape"])
            np.testing.assert_array_equal(got, want[o["name"]])
            at += size
        self.assertEqual(at, len(body))

    def test_statistics(self) -> None:
        before = self.http.get_inference_statistics("mlp")["model_stats"][0]
        x = np.zeros((5, 16), np.float32)
        self.mlp_http(x, True)
        after = self.http.get_inference_statistics("mlp")["model_stats"][0]
        self.assertEqual(after["name"], "mlp")
        self.assertEqual(int(after["inference_count"]) - int(before["inference_count"]), 5)
        self.assertGreater(int(after["inference_stats"]["success"]["count"]),
                           int(before["inference_stats"]["success"]["count"]))
        allm = {s["name"] for s in self.http.get_inference_statistics()["model_stats"]}
        self.assertEqual(allm, {"mlp", "conv"})
        with self.assertRaises(InferenceServerException):
            self.http.get_inference_statistics("nope")
        conns = self.tsd.stats()["connections"]["http"]  # the frontend's own figures, over TSD1
        self.assertGreater(conns["requests"], 0)
        self.assertGreaterEqual(conns["accepted"], conns["open"])

    # ---- system shared memory ----
    def test_system_shared_memory(self) -> None:
        x = np.random.default_rng(5).standard_normal((2, 16)).astype(np.float32)
        want = self.tsd.infer("mlp", {"x": x})
        key_in, key_out = f"/tsd_oip_in_{os.getpid()}", f"/tsd_oip_out_{os.getpid()}"
        h_in = shm.create_shared_memory_region("in0", key_in, 256)
        h_out = shm.create_shared_memory_region("out0", key_out, 256)
        try:
            shm.set_shared_memory_region(h_in, [x], offset=64)
            self.http.unregister_system_shared_memory()
            self.http.register_system_shared_memory("in0", key_in, 256)
            self.http.register_system_shared_memory("out0", key_out, 256)
            status = {r["name"]: r for r in self.http.get_system_shared_memory_status()}
            self.assertEqual(status["in0"]["key"], key_in)
            self.assertEqual(int(status["out0"]["byte_size"]), 256)
            inp = httpclient.InferInput("x", [2, 16], "FP32")
            inp.set_shared_memory("in0", x.nbytes, offset=64)
            out = httpclient.InferRequestedOutput("y")
            out.set_shared_memory("out0", 2 * 4 * 4, offset=32)
            r = self.http.infer("mlp", [inp], outputs=[out, httpclient.InferRequestedOutput("p", binary_data=True)])
            got = shm.get_contents_as_numpy(h_out, np.float32, [2, 4], offset=32)
            np.testing.assert_array_equal(got, want["y"])
            np.testing.assert_array_equal(r.as_numpy("p"), want["p"])
            meta = r.get_output("y")
            self.assertEqual(meta["parameters"]["shared_memory_region"], "out0")
            # out of range, unknown region, a byte size that disagrees: 400, nothing run
            bad = httpclient.InferInput("x", [2, 16], "FP32")
            bad.set_shared_memory("in0", x.nbytes, offset=200)
            for b, words in ((bad, "outside region"),):
                with self.assertRaises(InferenceServerException) as e:
                    self.http.infer("mlp", [b])
                self.assertIn(words, str(e.exception))
            bad.set_shared_memory("nope", x.nbytes)
            with self.assertRaises(InferenceServerException) as e:
                self.http.infer("mlp", [bad])
            self.assertIn("no region", str(e.exception))
            bad.set_shared_memory("in0", 100)
            with self.assertRaises(InferenceServerException) as e:
                self.http.infer("mlp", [bad])
            self.assertIn("byte_size", str(e.exception))
            with self.assertRaises(InferenceServerException) as e:  # past the object's end
                self.http.register_system_shared_memory("big", key_in, 4096)
            self.assertIn("past its", str(e.exception))
            with self.assertRaises(InferenceServerException):  # a name taken
                self.http.register_system_shared_memory("in0", key_in, 64)
            # the owner shrinks the object under the mapping: the request fails, the daemon lives
            fd = os.open(f"/dev/shm{key_in}", os.O_RDWR)
            os.ftruncate(fd, 0)
            os.close(fd)
            with self.assertRaises(InferenceServerException) as e:
                self.http.infer("mlp", [inp])
            self.assertIn("shrunk", str(e.exception))
            self.http.unregister_system_shared_memory("in0")
            self.assertEqual([r["name"] for r in self.http.get_system_shared_memory_status()], ["out0"])
            self.http.unregister_system_shared_memory()
            self.assertEqual(self.http.get_system_shared_memory_status(), [])
        finally:
            shm.destroy_shared_memory_region(h_in)
            shm.destroy_shared_memory_region(h_out)
        self.assert_serving()

    @unittest.skipUnless(os.geteuid() == 0, "needs root to make an object another uid owns")
    def test_system_shared_memory_of_another_uid(self) -> None:
        key = f"/tsd_oip_other_{os.getpid()}"
        fd = os.open(f"/dev/shm{key}", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            os.ftruncate(fd, 4096)
            os.fchown(fd, 65534, 65534)
            with self.assertRaises(InferenceServerException) as e:
                self.http.register_system_shared_memory("other", key, 4096)
            self.assertIn("not by the caller", str(e.exception))
        finally:
            os.close(fd)
            os.unlink(f"/dev/shm{key}")

    # ---- bad input: the documented status, and the daemon keeps serving ----
    def test_bad_requests(self) -> None:
        infer = "/v2/models/mlp/infer"
        good = {"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", "data": [0.0] * 16}]}
        st, _, b = self.raw("POST", infer, b'{"inputs": [')
        self.assert_error(st, 400, b, "malformed")
        bad = json.loads(json.dumps(good))
        bad["inputs"][0]["datatype"] = "FP99"
        st, _, b = self.raw("POST", infer, json.dumps(bad).encode())
        self.assert_error(st, 400, b, "FP99")
        bad["inputs"][0]["datatype"] = "FP64"
        st, _, b = self.raw("POST", infer, json.dumps(bad).encode())
        self.assert_error(st, 400, b, "not served")
        # binary_data_size disagreeing with the shape, and with the body
        head = {"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", "parameters": {"binary_data_size": 60}}]}
        hj = json.dumps(head).encode()
        st, _, b = self.raw("POST", infer, hj + bytes(60), {"Inference-Header-Content-Length": str(len(hj))})
        self.assert_error(st, 400, b, "binary_data_size 60")
        head["inputs"][0]["parameters"]["binary_data_size"] = 64
        hj = json.dumps(head).encode()
        st, _, b = self.raw("POST", infer, hj + bytes(40), {"Inference-Header-Content-Length": str(len(hj))})
        self.assert_error(st, 400, b, "after the JSON")
        st, _, b = self.raw("POST", infer, hj + bytes(64), {"Inference-Header-Content-Length": str(len(hj) + 500)})
        self.assert_error(st, 400, b, "Inference-Header-Content-Length")
        # a wrong shape goes through to the daemon's own check
        bad = json.loads(json.dumps(good))
        bad["inputs"][0]["shape"] = [1, 15]
        bad["inputs"][0]["data"] = [0.0] * 15
        st, _, b = self.raw("POST", infer, json.dumps(bad).encode())
        self.assert_error(st, 400, b, "[-1,16]")
        # unknown model, version, output, endpoint; wrong method
        st, _, b = self.raw("POST", "/v2/models/nope/infer", json.dumps(good).encode())
        self.assert_error(st, 404, b, "nope")
        st, _, b = self.raw("POST", "/v2/models/mlp/versions/9/infer", json.dumps(good).encode())
        self.assert_error(st, 404, b, "version 9")
        bad = dict(good, outputs=[{"name": "zz"}])
        st, _, b = self.raw("POST", infer, json.dumps(bad).encode())
        self.assert_error(st, 400, b, "zz")
        st, _, b = self.raw("GET", "/v2/nothing/here")
        self.assert_error(st, 404, b, "not found")
        st, _, b = self.raw("GET", infer)
        self.assert_error(st, 405, b, "POST")
        st, _, b = self.raw("GET", "/v2/models/bad$name")
        self.assert_error(st, 400, b, "model name")
        # a body that does not inflate; sequences, which are not served
        st, _, b = self.raw("POST", infer, b"not gzip", {"Content-Encoding": "gzip"})
        self.assert_error(st, 400, b, "inflate")
        bad = dict(good, parameters={"sequence_id": 3})
        st, _, b = self.raw("POST", infer, json.dumps(bad).encode())
        self.assert_error(st, 400, b, "sequence")
        # an oversized header line: h2o refuses it before any handler
        st, _, b = self.raw("GET", "/v2/health/ready", headers={"X-Big": "a" * 600000})
        self.assertGreaterEqual(st, 400)
        # a compressed body that is fine
        st, _, b = self.raw("POST", infer, gzip.compress(json.dumps(good).encode()), {"Content-Encoding": "gzip"})
        self.assertEqual(st, 200, b)
        self.assert_serving()

    def test_mutated_requests(self) -> None:
        """2,000 mutations of valid JSON and binary infer requests (bytes flipped, cut, repeated,
        headers changed): every one answered with a status of the documented kind (never 5xx
        but a 503 for memory), on keep-alive connections, and the daemon keeps serving."""
        rng = np.random.default_rng(1234)
        head = {"inputs": [{"name": "x", "shape": [2, 16], "datatype": "FP32", "parameters": {"binary_data_size": 128}}],
                "outputs": [{"name": "y", "parameters": {"binary_data": True}}, {"name": "p", "parameters": {"classification": 2}}],
                "parameters": {"priority": 1, "timeout": 1000000}}
        hj = json.dumps(head).encode()
        binary = hj + np.ones((2, 16), np.float32).tobytes()
        plain = json.dumps({"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32",
                                        "data": [[0.5] * 16]}]}).encode()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        seen: dict[int, int] = {}
        try:
            for i in range(2000):
                body, headers = (binary, {"Inference-Header-Content-Length": str(len(hj))}) if i % 2 else (plain, {})
                b = bytearray(body)
                for _ in range(int(rng.integers(1, 4))):
                    k, at = int(rng.integers(0, 5)), int(rng.integers(0, max(len(b), 1)))
                    if k == 0:
                        b[at] = int(rng.integers(0, 256))
                    elif k == 1:
                        del b[at:]
                    elif k == 2:
                        b[at:at] = b[at:at + int(rng.integers(1, 64))]
                    elif k == 3 and headers:
                        headers = {"Inference-Header-Content-Length": str(int(rng.integers(0, len(b) + 8)))}
                    else:
                        b[at:at] = bytes(rng.choice([b'"', b"[", b"{", b"-1", b"1e999", b"null"]))
                try:
                    conn.request("POST", "/v2/models/mlp/infer", body=bytes(b), headers=headers)
                    r = conn.getresponse()
                    data = r.read()
                except (http.client.HTTPException, OSError):  # h2o may close after a malformed request
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                    continue
                seen[r.status] = seen.get(r.status, 0) + 1
                self.assertIn(r.status, (200, 400, 404, 413, 503), data[:300])
                if r.status != 200:
                    self.assertIn("error", json.loads(data))
        finally:
            conn.close()
        self.assertGreater(seen.get(200, 0), 0, seen)
        self.assertGreater(seen.get(400, 0), 0, seen)
        self.assert_serving()

    def test_truncated_body(self) -> None:
        """A body cut short: the connection closes at frame_timeout_ms or on the client's close;
        nothing is answered for it and the daemon keeps serving."""
        s = socket.create_connection(("127.0.0.1", self.port))
        s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"inputs\":")
        s.close()
        self.assert_serving()


if __name__ == "__main__":
    unittest.main()


class OIPLimits(unittest.TestCase):
    def test_peer_connections_max(self) -> None:
        """Past peer_connections_max connections from one address, the next is closed at once
        (and counted); the ones kept are served."""
        port = free_port()
        d = harness.Daemon({"oip_http_listen": f"http://127.0.0.1:{port}", "peer_connections_max": 2})
        try:
            d.start()
            kept = [http.client.HTTPConnection("127.0.0.1", port, timeout=10) for _ in range(2)]
            for c in kept:
                c.request("GET", "/v2/health/live")
                r = c.getresponse()
                r.read()
                self.assertEqual(r.status, 200)
            extra = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            with self.assertRaises((ConnectionError, http.client.HTTPException, OSError)):
                extra.request("GET", "/v2/health/live")
                extra.getresponse().read()
            extra.close()
            for c in kept:
                c.request("GET", "/v2/health/live")
                r = c.getresponse()
                r.read()
                self.assertEqual(r.status, 200)
                c.close()
            with tensord.Client(d.url) as t:
                self.assertGreaterEqual(t.stats()["connections"]["http"]["refused_peer_cap"], 1)
            d.stop()
        except Exception:
            d.cleanup()
            raise

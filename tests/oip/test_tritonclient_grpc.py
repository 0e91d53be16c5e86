"""test_tritonclient_grpc.py: tensord driven through the Open Inference Protocol's gRPC service by
Triton's own Python client (tritonclient.grpc, pinned in tests/oip/setup-venv.sh), every output
compared with the same request over TSD1 (the tensord package of this checkout), bad requests
(through the client's stub, so nothing is checked on the way) answered with their documented
status while the daemon keeps serving, and the daemon exiting 0 on SIGTERM with calls open.
make oip-check runs it in tests/oip/.venv."""

from __future__ import annotations

import json
import queue
import shutil
import socket
import subprocess
import sys
import threading
import unittest
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "clients" / "python" / "tests"))

import grpc  # noqa: E402  (tritonclient's dependency)
import harness  # noqa: E402  (the tensord package of this checkout comes with it)
import tensord  # noqa: E402
import tritonclient.grpc as grpcclient  # noqa: E402
from tritonclient.grpc import service_pb2, service_pb2_grpc  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

ONNX_MODEL = Path("/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d/model.onnx")
MAX_MESSAGE = 4 << 20  # the test daemon's max_message_bytes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_daemon(extra: dict | None = None) -> tuple[harness.Daemon, int, tensord.Client]:
    """A daemon with both OIP ports, the example MLP and the ONNX Conv2d loaded."""
    port = free_port()
    d = harness.Daemon({"oip_grpc_listen": f"grpc://127.0.0.1:{port}", "oip_http_listen": f"http://127.0.0.1:{free_port()}",
                        "max_message_bytes": MAX_MESSAGE, **(extra or {})})
    try:
        shutil.copy(REPO / "examples" / "models" / "mlp.json", d.models_dir / "mlp.json")
        subprocess.run([str(Path(harness.daemon_binary()).parent / "make_weights"), str(d.models_dir / "mlp.safetensors")],
                       check=True, capture_output=True)
        shutil.copy(ONNX_MODEL, d.models_dir / "conv.onnx")
        d.start()
        tsd = tensord.Client(d.url)
        with open(d.models_dir / "mlp.json") as f:
            tsd.load(spec=json.load(f))
        tsd.load_onnx("conv", file="conv.onnx")
    except Exception:
        d.cleanup()
        raise
    return d, port, tsd


def close_client(c: grpcclient.InferenceServerClient) -> None:
    """Cancel c's stream and close c after its server went away, on a thread of its own: the
    client's own wait for its stream's thread is not allowed to hang the suite (10 s at most)."""
    def run() -> None:
        c.stop_stream(cancel_requests=True)
        c.close()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(10)


def mlp_input(x: np.ndarray) -> grpcclient.InferInput:
    inp = grpcclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    return inp


def raw_request(model: str, x: np.ndarray, **kw) -> service_pb2.ModelInferRequest:
    """A ModelInferRequest for the MLP's x, raw contents, built by hand (fields overridable)."""
    r = service_pb2.ModelInferRequest(model_name=model, model_version=kw.pop("version", ""))
    t = r.inputs.add(name=kw.pop("name", "x"), datatype=kw.pop("datatype", "FP32"), shape=kw.pop("shape", list(x.shape)))
    del t
    r.raw_input_contents.append(kw.pop("raw", x.tobytes()))
    for o in kw.pop("outputs", []):
        r.outputs.add(name=o)
    assert not kw, kw
    return r


class GRPCTest(unittest.TestCase):
    d: harness.Daemon
    port: int
    tsd: tensord.Client
    client: grpcclient.InferenceServerClient

    @classmethod
    def setUpClass(cls) -> None:
        cls.d, cls.port, cls.tsd = start_daemon({"oip_shm": True})
        cls.client = grpcclient.InferenceServerClient(url=f"127.0.0.1:{cls.port}")
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.port}",
                                            options=[("grpc.max_send_message_length", 64 << 20)])
        cls.stub = service_pb2_grpc.GRPCInferenceServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.client.close()
        cls.channel.close()
        cls.tsd.close()
        try:
            cls.d.stop()
        except Exception:
            cls.d.cleanup()
            raise

    # ---- helpers ----
    def assert_status(self, call, code: grpc.StatusCode, words: str) -> None:
        with self.assertRaises(grpc.RpcError) as e:
            call()
        self.assertEqual(e.exception.code(), code, e.exception.details())
        self.assertIn(words, e.exception.details())

    def assert_serving(self) -> None:
        x = np.ones((1, 16), np.float32)
        r = self.client.infer("mlp", [mlp_input(x)])
        np.testing.assert_array_equal(r.as_numpy("y"), self.tsd.infer("mlp", {"x": x})["y"])

    # ---- health, metadata, config, repository, statistics ----
    def test_health_and_metadata(self) -> None:
        self.assertTrue(self.client.is_server_live())
        self.assertTrue(self.client.is_server_ready())
        meta = self.client.get_server_metadata()
        self.assertEqual(meta.name, "tensord")
        self.assertIn("model_configuration", meta.extensions)
        m = self.client.get_model_metadata("mlp")
        self.assertEqual(m.name, "mlp")
        self.assertEqual([(i.name, i.datatype, list(i.shape)) for i in m.inputs], [("x", "FP32", [-1, 16])])
        self.assertEqual([o.name for o in m.outputs], ["y", "p"])
        self.assertEqual(self.client.get_model_metadata("mlp", model_version=m.versions[0]).name, "mlp")
        self.assertTrue(self.client.is_model_ready("mlp"))
        self.assertTrue(self.client.is_model_ready("mlp", model_version=m.versions[0]))
        self.assertFalse(self.client.is_model_ready("nope"))
        self.assertFalse(self.client.is_model_ready("mlp", model_version="99"))
        with self.assertRaises(InferenceServerException) as e:
            self.client.get_model_metadata("nope")
        self.assertEqual(e.exception.status(), "StatusCode.NOT_FOUND")
        self.assertIn("unknown model", str(e.exception))
        index = {e.name: e for e in self.client.get_model_repository_index().models}
        self.assertEqual(set(index), {"mlp", "conv"})
        self.assertEqual(index["mlp"].state, "READY")

    def test_model_config(self) -> None:
        listed = {e["name"]: e for e in self.tsd.models()}["mlp"]
        cfg = self.client.get_model_config("mlp").config
        self.assertEqual(cfg.name, "mlp")
        self.assertEqual(cfg.max_batch_size, listed["batch_max"])
        self.assertEqual([(i.name, i.data_type, list(i.dims)) for i in cfg.input], [("x", 11, [16])])  # TYPE_FP32
        self.assertEqual(list(cfg.dynamic_batching.preferred_batch_size), listed["buckets"])
        self.assertEqual(cfg.dynamic_batching.max_queue_delay_microseconds, listed["delay_us"])
        self.assertEqual(cfg.dynamic_batching.default_queue_policy.max_queue_size, listed["queue_max"])
        self.assertEqual(cfg.version_policy.latest.num_versions, 1)
        self.assertEqual(cfg.instance_group[0].kind, 2)  # KIND_CPU
        self.assertIn("tensord_device", cfg.parameters)
        self.assertEqual(self.client.get_model_config("conv").config.platform, "tensord_onnx")
        # the same content as the HTTP answer
        http = json.loads(subprocess.run(["curl", "-s", f"http://{self.d.config['oip_http_listen'][7:]}/v2/models/mlp/config"],
                                         capture_output=True, check=True).stdout) if shutil.which("curl") else None
        if http:
            self.assertEqual(http["max_batch_size"], cfg.max_batch_size)
            self.assertEqual(http["output"][1]["name"], cfg.output[1].name)

    def test_statistics(self) -> None:
        before = self.client.get_inference_statistics("mlp").model_stats[0]
        self.client.infer("mlp", [mlp_input(np.zeros((5, 16), np.float32))])
        after = self.client.get_inference_statistics("mlp").model_stats[0]
        self.assertEqual(after.name, "mlp")
        self.assertEqual(after.inference_count - before.inference_count, 5)
        self.assertGreater(after.inference_stats.success.count, before.inference_stats.success.count)
        self.assertGreater(after.inference_stats.success.ns, 0)
        conns = self.tsd.stats()["connections"]["grpc"]  # the frontend's own figures, over TSD1
        self.assertGreaterEqual(conns["open"], 0)  # addresses with a call now: none between unary calls
        self.assertGreater(conns["requests"], 2)
        self.assertGreater(conns["calls"], 2)
        allm = {s.name for s in self.client.get_inference_statistics().model_stats}
        self.assertEqual(allm, {"mlp", "conv"})
        with self.assertRaises(InferenceServerException) as e:
            self.client.get_inference_statistics("nope")
        self.assertEqual(e.exception.status(), "StatusCode.NOT_FOUND")

    # ---- infer ----
    def test_infer_mlp(self) -> None:
        x = np.random.default_rng(7).standard_normal((3, 16)).astype(np.float32)
        want = self.tsd.infer("mlp", {"x": x})
        r = self.client.infer("mlp", [mlp_input(x)], request_id="r-1", model_version="1", priority=1, timeout=2_000_000,
                              outputs=[grpcclient.InferRequestedOutput(n) for n in ("y", "p")])
        for n in ("y", "p"):
            np.testing.assert_array_equal(r.as_numpy(n), want[n], err_msg=n)
        resp = r.get_response()
        self.assertEqual(resp.id, "r-1")
        self.assertEqual(resp.model_version, "1")
        # a compressed request (gRPC's own message compression)
        for algo in ("gzip", "deflate"):
            z = self.client.infer("mlp", [mlp_input(x)], compression_algorithm=algo)
            np.testing.assert_array_equal(z.as_numpy("y"), want["y"], err_msg=algo)
        # every output when none is named; one when one is
        self.assertEqual({o.name for o in self.client.infer("mlp", [mlp_input(x)]).get_response().outputs}, {"y", "p"})
        only = self.client.infer("mlp", [mlp_input(x)], outputs=[grpcclient.InferRequestedOutput("p")])
        self.assertEqual([o.name for o in only.get_response().outputs], ["p"])
        np.testing.assert_array_equal(only.as_numpy("p"), want["p"])

    def test_system_shared_memory(self) -> None:
        """Inputs and outputs in POSIX shared memory registered over gRPC, outputs equal to TSD1's;
        status and unregister; an input out of its region's range refused."""
        import os
        import tritonclient.utils.shared_memory as shm
        x = np.random.default_rng(9).standard_normal((2, 16)).astype(np.float32)
        want = self.tsd.infer("mlp", {"x": x})
        key_in, key_out = f"/tsd_grpc_in_{os.getpid()}", f"/tsd_grpc_out_{os.getpid()}"
        h_in = shm.create_shared_memory_region("gin", key_in, 256)
        h_out = shm.create_shared_memory_region("gout", key_out, 256)
        try:
            shm.set_shared_memory_region(h_in, [x])
            self.client.unregister_system_shared_memory()
            self.client.register_system_shared_memory("gin", key_in, 256)
            self.client.register_system_shared_memory("gout", key_out, 256)
            status = self.client.get_system_shared_memory_status(as_json=True)["regions"]
            self.assertEqual(status["gin"]["key"], key_in)
            self.assertEqual(int(status["gout"]["byte_size"]), 256)
            inp = grpcclient.InferInput("x", [2, 16], "FP32")
            inp.set_shared_memory("gin", x.nbytes)
            out = grpcclient.InferRequestedOutput("y")
            out.set_shared_memory("gout", 2 * 4 * 4, offset=64)
            r = self.client.infer("mlp", [inp], outputs=[out, grpcclient.InferRequestedOutput("p")])
            np.testing.assert_array_equal(shm.get_contents_as_numpy(h_out, np.float32, [2, 4], offset=64), want["y"])
            np.testing.assert_array_equal(r.as_numpy("p"), want["p"])
            y = r.get_output("y")
            self.assertEqual(y.parameters["shared_memory_region"].string_param, "gout")
            bad = grpcclient.InferInput("x", [2, 16], "FP32")
            bad.set_shared_memory("gin", x.nbytes, offset=200)
            with self.assertRaises(InferenceServerException) as e:
                self.client.infer("mlp", [bad])
            self.assertIn("outside region", str(e.exception))
            self.client.unregister_system_shared_memory("gin")
            self.assertEqual(list(self.client.get_system_shared_memory_status(as_json=True)["regions"]), ["gout"])
            self.client.unregister_system_shared_memory()
        finally:
            shm.destroy_shared_memory_region(h_in)
            shm.destroy_shared_memory_region(h_out)
        self.assert_serving()

    def test_infer_typed_contents(self) -> None:
        x = np.random.default_rng(5).standard_normal((2, 16)).astype(np.float32)
        req = service_pb2.ModelInferRequest(model_name="mlp")
        req.inputs.add(name="x", datatype="FP32", shape=[2, 16]).contents.fp32_contents.extend(x.ravel().tolist())
        resp = self.stub.ModelInfer(req)
        got = {o.name: np.frombuffer(raw, np.float32).reshape(o.shape) for o, raw in zip(resp.outputs, resp.raw_output_contents)}
        want = self.tsd.infer("mlp", {"x": x})
        for n in ("y", "p"):
            np.testing.assert_array_equal(got[n], want[n])
        req.inputs[0].contents.fp32_contents.pop()
        self.assert_status(lambda: self.stub.ModelInfer(req), grpc.StatusCode.INVALID_ARGUMENT, "contents has 31")
        # FP16 has no typed contents: raw only
        half = service_pb2.ModelInferRequest(model_name="mlp")
        half.inputs.add(name="x", datatype="FP16", shape=[1, 2]).contents.fp32_contents.extend([1.0, 2.0])
        self.assert_status(lambda: self.stub.ModelInfer(half), grpc.StatusCode.INVALID_ARGUMENT, "raw_input_contents")

    def test_classification(self) -> None:
        x = np.random.default_rng(3).standard_normal((4, 16)).astype(np.float32)
        p = self.tsd.infer("mlp", {"x": x})["p"]
        r = self.client.infer("mlp", [mlp_input(x)], outputs=[grpcclient.InferRequestedOutput("p", class_count=2)])
        top = r.as_numpy("p")
        self.assertEqual(top.shape, (4, 2))
        for row in range(4):
            order = np.argsort(-p[row], kind="stable")[:2]
            for k in range(2):
                value, index = top[row, k].decode().split(":")
                self.assertEqual(int(index), order[k])
                self.assertAlmostEqual(float(value), float(p[row, order[k]]), places=5)

    def test_infer_onnx(self) -> None:
        m = self.client.get_model_metadata("conv")
        (inp_meta,) = m.inputs
        shape = list(inp_meta.shape)
        self.assertTrue(all(d > 0 for d in shape), shape)
        x = np.random.default_rng(11).standard_normal(shape).astype(np.float32)
        want = self.tsd.infer("conv", {inp_meta.name: x})
        inp = grpcclient.InferInput(inp_meta.name, shape, "FP32")
        inp.set_data_from_numpy(x)
        r = self.client.infer("conv", [inp], outputs=[grpcclient.InferRequestedOutput(o.name) for o in m.outputs])
        for o in m.outputs:
            np.testing.assert_array_equal(r.as_numpy(o.name), want[o.name])

    def test_stream(self) -> None:
        got: queue.Queue = queue.Queue()
        self.client.start_stream(callback=lambda result, error: got.put((result, error)))
        complete = False
        try:
            xs = {f"s-{i}": np.random.default_rng(i).standard_normal((i % 3 + 1, 16)).astype(np.float32) for i in range(12)}
            for rid, x in xs.items():
                self.client.async_stream_infer("mlp", [mlp_input(x)], request_id=rid)
            # a bad request on the stream is answered with error_message; the stream goes on
            self.client.async_stream_infer("nope", [mlp_input(xs["s-0"])], request_id="bad")
            self.client.async_stream_infer("mlp", [mlp_input(xs["s-1"])], request_id="after")
            answers, errors, order = {}, [], []
            for _ in range(len(xs) + 2):
                result, error = got.get(timeout=30)
                if error is not None:
                    errors.append(error)
                    order.append("bad")
                else:
                    answers[result.get_response().id] = result
                    order.append(result.get_response().id)
            complete = True
        finally:
            # every answer came: the stream ends with the server's status; else it is cancelled
            self.client.stop_stream(cancel_requests=not complete)
        self.assertEqual(order, [*xs, "bad", "after"])  # in the order sent
        self.assertEqual(set(answers), set(xs) | {"after"})
        self.assertEqual(len(errors), 1)
        self.assertIn("nope", str(errors[0]))
        for rid, x in xs.items():
            want = self.tsd.infer("mlp", {"x": x})
            for n in ("y", "p"):
                np.testing.assert_array_equal(answers[rid].as_numpy(n), want[n], err_msg=f"{rid} {n}")
        self.assert_serving()

    # ---- bad input: the documented status, and the daemon keeps serving ----
    def test_bad_requests(self) -> None:
        x = np.zeros((1, 16), np.float32)
        infer = self.stub.ModelInfer
        INVALID, NOT_FOUND = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND
        self.assert_status(lambda: infer(raw_request("mlp", x, raw=bytes(60))), INVALID, "raw_input_contents[0] has 60 bytes")
        self.assert_status(lambda: infer(raw_request("mlp", x, datatype="FP99")), INVALID, "FP99")
        self.assert_status(lambda: infer(raw_request("mlp", x, datatype="FP64", raw=bytes(128))), INVALID, "not served")
        two = raw_request("mlp", x)
        two.raw_input_contents.append(b"")
        self.assert_status(lambda: infer(two), INVALID, "raw_input_contents: 2, for 1 inputs")
        self.assert_status(lambda: infer(raw_request("mlp", x, shape=[1] * 9, raw=bytes(4))), INVALID, "at most")
        self.assert_status(lambda: infer(raw_request("mlp", x, name="n" * 200)), INVALID, "name")
        self.assert_status(lambda: infer(raw_request("nope", x)), NOT_FOUND, "nope")
        self.assert_status(lambda: infer(raw_request("mlp", x, version="7")), NOT_FOUND, "mlp")
        self.assert_status(lambda: infer(raw_request("mlp", x, version="one")), INVALID, "version")
        self.assert_status(lambda: infer(raw_request("mlp", x, outputs=["zz"])), INVALID, "zz")
        self.assert_status(lambda: infer(raw_request("bad$name", x)), INVALID, "model name")
        # the daemon's own shape check
        self.assert_status(lambda: infer(raw_request("mlp", np.zeros((1, 15), np.float32))), INVALID, "16")
        seq = raw_request("mlp", x)
        seq.parameters["sequence_id"].int64_param = 3
        self.assert_status(lambda: infer(seq), INVALID, "sequence")
        # over max_message_bytes: refused by gRPC before anything is read
        big = np.zeros((MAX_MESSAGE // 64 + 1, 16), np.float32)
        self.assert_status(lambda: infer(raw_request("mlp", big)), grpc.StatusCode.RESOURCE_EXHAUSTED, "")
        # bytes that are no ModelInferRequest
        garbage = self.channel.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                                           request_serializer=lambda b: b, response_deserializer=lambda b: b)
        self.assert_status(lambda: garbage(b"\xff\xff\xff\xff"), INVALID, "does not parse")
        # a repository load on a daemon without a model repository; not implemented yet, said so
        self.assert_status(lambda: self.stub.RepositoryModelLoad(service_pb2.RepositoryModelLoadRequest(model_name="mlp")),
                           INVALID, "no model repository")
        self.assert_status(lambda: self.stub.SystemSharedMemoryStatus(service_pb2.SystemSharedMemoryStatusRequest(name="nope")),
                           INVALID, "no region")
        self.assert_status(lambda: self.stub.CudaSharedMemoryStatus(service_pb2.CudaSharedMemoryStatusRequest()),
                           grpc.StatusCode.UNIMPLEMENTED, "unknown method")
        self.assert_serving()

    def test_stream_cancelled(self) -> None:
        """A stream cancelled with its requests in flight: the daemon forgets them and keeps serving."""
        x = np.ones((8, 16), np.float32)
        for _ in range(3):
            self.client.start_stream(callback=lambda result, error: None)
            for i in range(40):
                self.client.async_stream_infer("mlp", [mlp_input(x)], request_id=str(i))
            self.client.stop_stream(cancel_requests=True)
        self.assert_serving()

    def test_concurrent_unary(self) -> None:
        """More calls at once than client_inflight_max (64) on one connection: all answered."""
        xs = [np.full((1, 16), i / 10, np.float32) for i in range(150)]
        got: queue.Queue = queue.Queue()
        for i, x in enumerate(xs):
            self.client.async_infer("mlp", [mlp_input(x)], request_id=str(i),
                                    callback=lambda result, error, i=i: got.put((i, result, error)))
        for _ in xs:
            i, r, e = got.get(timeout=60)
            self.assertIsNone(e)
            np.testing.assert_array_equal(r.as_numpy("y"), self.tsd.infer("mlp", {"x": xs[i]})["y"])

    def test_unload_unknown(self) -> None:
        with self.assertRaises(InferenceServerException) as e:
            self.client.unload_model("nope")
        self.assertEqual(e.exception.status(), "StatusCode.NOT_FOUND")


class GRPCLifeTest(unittest.TestCase):
    """A token from the metadata, unload, and SIGTERM with calls open."""

    def test_token_unload_and_sigterm(self) -> None:
        tmp = Path(harness.tempfile.mkdtemp(prefix="tsd_grpc_tok_"))
        tok = tmp / "token"
        tok.write_text("s3cret-token-0123456789abcdef\n")
        tok.chmod(0o600)
        d, port, tsd = start_daemon({"tcp_token_file": str(tok)})
        try:
            c = grpcclient.InferenceServerClient(url=f"127.0.0.1:{port}")
            with self.assertRaises(InferenceServerException) as e:
                c.get_model_metadata("mlp")
            self.assertEqual(e.exception.status(), "StatusCode.UNAUTHENTICATED")
            auth = {"authorization": "Bearer s3cret-token-0123456789abcdef"}
            self.assertEqual(c.get_model_metadata("mlp", headers=auth).name, "mlp")
            x = np.ones((2, 16), np.float32)
            np.testing.assert_array_equal(c.infer("mlp", [mlp_input(x)], headers=auth).as_numpy("y"),
                                          tsd.infer("mlp", {"x": x})["y"])
            c.unload_model("conv", headers=auth)
            self.assertFalse(c.is_model_ready("conv", headers=auth))
            # a stream left open, with an answer taken, then SIGTERM: the daemon exits 0
            got: queue.Queue = queue.Queue()
            c.start_stream(callback=lambda result, error: got.put((result, error)), headers=auth)
            c.async_stream_infer("mlp", [mlp_input(x)], request_id="open")
            result, error = got.get(timeout=30)
            self.assertIsNone(error)
            other = grpcclient.InferenceServerClient(url=f"127.0.0.1:{port}")
            self.assertTrue(other.is_server_live())
            tsd.close()
            d.stop()  # SIGTERM; fails unless it exits 0
        except Exception:
            d.cleanup()
            raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        close_client(c)
        other.close()

    def test_sigterm_with_requests_in_flight(self) -> None:
        """drain_seconds 0 and SIGTERM while a stream and unary calls have requests in the daemon:
        it exits 0, the clients get answers or UNAVAILABLE, nothing hangs."""
        d, port, tsd = start_daemon({"drain_seconds": 0})
        try:
            c = grpcclient.InferenceServerClient(url=f"127.0.0.1:{port}")
            got: queue.Queue = queue.Queue()
            c.start_stream(callback=lambda result, error: got.put((result, error)))
            x = np.ones((32, 16), np.float32)
            for i in range(60):
                c.async_stream_infer("mlp", [mlp_input(x)], request_id=str(i))
            for i in range(20):
                c.async_infer("mlp", [mlp_input(x)], callback=lambda result, error: got.put((result, error)))
            tsd.close()
            d.stop()  # SIGTERM; fails unless it exits 0
        except Exception:
            d.cleanup()
            raise
        close_client(c)


if __name__ == "__main__":
    unittest.main()

"""test_shm.py: shared memory from Python (tensord.Region) against a real tensord over unix://:
a numpy input read where it is, an output written into a writable region and returned as an
array over it, references checked by the daemon, regions freed with the client. Skipped without
numpy, and on nng (TSD_TEST_TRANSPORT=nng: no descriptors there)."""

from __future__ import annotations

import os
import unittest

from harness import Daemon

import tensord
from tensord.convert import numpy_available

SPEC = {"graph": {"nodes": [{"id": "x", "op": "input", "dtype": "float32", "shape": [-1, 4]},
                            {"id": "w", "op": "param", "dtype": "float32", "shape": [4]},
                            {"id": "y", "op": "mul", "in": ["x", "w"]}], "outputs": ["y"]},
        "batching": {"max": 8, "delay_us": 1000, "buckets": [1, 2, 4, 8]}}
W = [1.0, -2.0, 0.5, 4.0]


@unittest.skipUnless(numpy_available(), "numpy is not installed")
@unittest.skipIf(os.environ.get("TSD_TEST_TRANSPORT") == "nng", "shared memory needs unix://")
class ShmCase(unittest.TestCase):
    daemon: Daemon

    @classmethod
    def setUpClass(cls) -> None:
        cls.daemon = Daemon()
        cls.daemon.start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.daemon.stop()

    def test_infer_in_regions(self) -> None:
        import numpy as np
        with tensord.Client(self.daemon.url) as c:
            c.load("tiny", spec=SPEC, weights={"w": np.array(W, dtype=np.float32)})
            inp = c.region("in", 1 << 16)
            out = c.region("out", 4096, writable=True)
            x = inp.array("float32", (4, 4), offset=128)
            x[:] = np.arange(16, dtype=np.float32).reshape(4, 4)
            y = c.infer("tiny", shm_inputs={"x": x}, shm_outputs={"y": (out, 64)})["y"]
            np.testing.assert_array_equal(y, x * np.array(W, dtype=np.float32))
            self.assertEqual(out.offset_of(y), 64)  # a view into the region, no copy
            # the explicit form, the output in the reply
            y2 = c.infer("tiny", shm_inputs={"x": (inp, 128, "float32", (2, 4))})["y"]
            np.testing.assert_array_equal(y2, x[:2] * np.array(W, dtype=np.float32))
            # references the daemon refuses, by name
            with self.assertRaises(tensord.BadRequest) as e:
                c.infer("tiny", shm_inputs={"x": (inp, (1 << 16) - 8, "float32", (1, 4))})
            self.assertIn('outside region "in"', str(e.exception))
            with self.assertRaises(tensord.BadRequest) as e:
                c.infer("tiny", shm_inputs={"x": x}, shm_outputs={"y": (inp, 0)})
            self.assertIn("read-only", str(e.exception))
            with self.assertRaises(ValueError):
                c.infer("tiny", shm_inputs={"x": np.zeros((1, 4), np.float32)})  # not in a region
            inp.close()
            with self.assertRaises(tensord.BadRequest) as e:
                c.infer("tiny", shm_inputs={"x": (inp, 128, "float32", (1, 4))})
            self.assertIn('no region "in"', str(e.exception))


if __name__ == "__main__":
    unittest.main()

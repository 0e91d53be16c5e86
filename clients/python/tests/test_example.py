"""test_example.py: examples/mlp.py runs against a tensord serving the example model
(examples/models/mlp.json, with weights written here) and prints its inference."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import unittest

from harness import REPO, Daemon


class ExampleTest(unittest.TestCase):
    def test_mlp_example(self) -> None:
        d = Daemon({"preload": ["mlp.json"]})
        try:
            spec = json.loads((REPO / "examples" / "models" / "mlp.json").read_text())
            shapes = {n["id"]: n["shape"] for n in spec["graph"]["nodes"] if n["op"] == "param"}
            rng = random.Random(1)
            weights = {}
            for name, shape in shapes.items():
                count = 1
                for dim in shape:
                    count *= dim
                weights[name] = (shape, [rng.uniform(-0.5, 0.5) for _ in range(count)])
            d.write_safetensors(spec["weights"], weights)
            (d.models_dir / "mlp.json").write_text(json.dumps(spec))
            d.start()
            env = dict(os.environ, TENSORD_URL=d.url, PYTHONPATH=str(REPO / "clients" / "python"))
            out = subprocess.run([sys.executable, str(REPO / "clients" / "python" / "examples" / "mlp.py")],
                                 env=env, capture_output=True, text=True, timeout=120)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("model mlp v1", out.stdout)
            self.assertRegex(out.stdout, r"mlp: (\d\.\d{4} ){4}-> class \d")
            self.assertIn("realize: [", out.stdout)
            d.stop()
        except BaseException:
            d.cleanup()
            raise


if __name__ == "__main__":
    unittest.main()

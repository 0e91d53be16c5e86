"""mlp.py: the Python client against `make run`'s daemon: hello, the models, one inference of
the example model (examples/models/mlp_input.json) and a graph realized from the builder.

    make run                                   # in one shell
    PYTHONPATH=clients/python TENSORD_LIB=build/lib/libtensord.so python3 clients/python/examples/mlp.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import tensord

REPO = Path(__file__).resolve().parents[3]


def main() -> int:
    with tensord.Client() as c:
        hello = c.hello()
        print(f"tensord {hello['daemon']} at {c.url}, devices {', '.join(hello['devices'])}")
        for m in c.models():
            print(f"model {m['name']} v{m['version']}: inputs {[i['name'] for i in m['inputs']]}, "
                  f"outputs {[o['name'] for o in m['outputs']]}")
        spec = json.loads((REPO / "examples" / "models" / "mlp_input.json").read_text())["x"]
        x = tensord.Tensor(spec["data"], spec["dtype"], spec["shape"])
        try:
            p = c.infer("mlp", {"x": x}, priority="realtime")["p"].tolist()[0]
            print("mlp:", " ".join(f"{v:.4f}" for v in p), "-> class", p.index(max(p)))
        except tensord.UnknownModel as e:
            print(f"no model mlp ({e.message}): start the daemon with `make run`")
        g = tensord.Graph()
        a = g.input("a", "f32", [2, 2])
        g.output(g.sum(g.sigmoid(a @ a) * 2.0 - 1.0, axes=1, name="rows"))
        print("realize:", c.realize(g, {"a": [[1.0, 2.0], [3.0, 4.0]]})["rows"].tolist())
    return 0


if __name__ == "__main__":
    sys.exit(main())

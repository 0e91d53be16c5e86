"""test_offline.py: the parts of the Python client that need no daemon: the graph builder, the
tables kept in step with the C sources (graph_ops.def, tsd_errors.def), Tensor conversions and
the library lookup's error."""

from __future__ import annotations

import array
import os
import re
import subprocess
import sys
import unittest

from harness import REPO

import tensord
from tensord import _lib, graph as graph_mod
from tensord.convert import to_wire


class TablesTest(unittest.TestCase):
    def test_ops_match_graph_ops_def(self) -> None:
        """Every op of graph_ops.def has its row in OPS (the client may know ops ahead of it)."""
        text = (REPO / "protocol" / "graph_ops.def").read_text()
        defines = dict(re.findall(r"^#define\s+(\w+)\s+(\d+)", (REPO / "protocol" / "proto_graph.h").read_text(), re.M))
        rows = re.findall(r"^PG_OP\(\s*\w+,\s*(\w+),\s*(\w+),\s*(\w+),\s*(\w+)\)", text, re.M)
        self.assertGreater(len(rows), 20)
        for name, lo, hi, kind in rows:
            want = (int(defines.get(lo, lo)), int(defines.get(hi, hi)), kind)
            self.assertEqual(graph_mod.OPS.get(name), want, f"op {name}: clients/python/tensord/graph.py OPS "
                             "is not in step with protocol/graph_ops.def")
            self.assertIn(kind, graph_mod.KINDS, f"{name}: attribute kind {kind} unknown to graph.py")

    def test_errors_match_tsd_errors_def(self) -> None:
        text = (REPO / "include" / "tensord" / "tsd_errors.def").read_text()
        names = re.findall(r"^TSD_ERR\(\s*\w+,\s*(\w+),", text, re.M)
        self.assertEqual(names[0], "ok")
        self.assertEqual(set(names[1:]), set(tensord.ERRORS))

    def test_dtypes_match_dtype_h(self) -> None:
        text = (REPO / "include" / "tensord" / "dtype.h").read_text()
        enum = re.search(r"enum tsd_dtype \{(.*?)TSD_DTYPE_COUNT", text, re.S)
        assert enum
        names = re.findall(r"TSD_(\w+),", enum.group(1))
        short = {"BOOL": "bool", "U8": "uint8", "I32": "int32", "I64": "int64", "F16": "float16", "F32": "float32"}
        self.assertEqual([short[n] for n in names], [d.name for d in tensord.DTYPES])
        dims = re.search(r"#define TSD_MAX_DIMS (\d+)", text)
        assert dims
        self.assertEqual(int(dims.group(1)), _lib.MAX_DIMS, "tensord/_lib.py MAX_DIMS is not dtype.h's")


class GraphTest(unittest.TestCase):
    def test_builder_json(self) -> None:
        g = tensord.Graph()
        x = g.input("x", "f32", [None, 4])
        w = g.param("w", [4, 3])
        b = g.param("b", [3])
        y = g.relu(x @ w + b)
        p = g.softmax(y, -1, name="p")
        s = g.sum(p, [1], True)
        g.output(p, s)
        d = g.to_dict()
        self.assertEqual(d["outputs"], ["p", s.id])
        nodes = {n["id"]: n for n in d["nodes"]}
        self.assertEqual(nodes["x"], {"id": "x", "op": "input", "dtype": "float32", "shape": [-1, 4]})
        self.assertEqual(nodes["p"], {"id": "p", "op": "softmax", "in": [y.id], "axis": -1})
        self.assertEqual(nodes[s.id]["axes"], [1])
        self.assertTrue(nodes[s.id]["keepdim"])
        # every node's inputs are defined before it
        seen: set[str] = set()
        for n in d["nodes"]:
            self.assertTrue(set(n.get("in", [])) <= seen)
            seen.add(n["id"])

    def test_operators_and_constants(self) -> None:
        g = tensord.Graph()
        x = g.input("x", "float32", [2])
        y = 1 - (-x) / 2 * x
        ops = [n["op"] for n in g.nodes]
        self.assertEqual(ops, ["input", "neg", "const", "div", "mul", "const", "sub"])
        self.assertEqual(g.nodes[-1]["in"][1], y.graph.nodes[4]["id"])
        self.assertEqual(g.nodes[-2]["value"], 1.0)

    def test_every_op_has_a_method(self) -> None:
        for op, (lo, hi, kind) in graph_mod.OPS.items():
            if kind in ("LEAF", "CONST"):
                continue
            g = tensord.Graph()
            ins = [g.input(f"i{k}", "f32", [2, 2]) for k in range(hi)]
            node = getattr(g, op)(*ins[:lo])
            self.assertEqual(g.nodes[-1]["op"], op)
            self.assertEqual(node.op, op)

    def test_errors(self) -> None:
        g = tensord.Graph()
        x = g.input("x", "f32", [2])
        with self.assertRaisesRegex(ValueError, "already used"):
            g.input("x", "f32", [2])
        with self.assertRaisesRegex(ValueError, "takes 2 inputs, got 1"):
            g.add(x)
        with self.assertRaisesRegex(ValueError, "unknown attribute 'axes'"):
            g.softmax(x, axes=1)
        with self.assertRaisesRegex(ValueError, "unknown op"):
            g.op("frobnicate", x)
        with self.assertRaisesRegex(ValueError, "unknown dtype"):
            g.input("y", "float64", [2])
        with self.assertRaisesRegex(ValueError, "another graph"):
            tensord.Graph().relu(x)
        with self.assertRaisesRegex(ValueError, "no outputs"):
            g.to_dict()

    def test_attribute_order(self) -> None:
        g = tensord.Graph()
        x = g.input("x", "f32", [1, 3, 8, 8])
        w = g.param("w", [4, 3, 3, 3])
        c = g.conv2d(x, w, 2, [1, 1])
        self.assertEqual(g.nodes[-1], {"id": c.id, "op": "conv2d", "in": ["x", "w"], "stride": 2, "padding": [1, 1]})
        r = g.reshape(c, [1, -1])
        self.assertEqual(g.nodes[-1]["shape"], [1, -1])
        both = g.cat(r, r, 0)
        self.assertEqual(g.nodes[-1], {"id": both.id, "op": "cat", "in": [r.id, r.id], "axis": 0})
        g.slice(both, 1, 0, 4)
        self.assertEqual({k: g.nodes[-1][k] for k in ("axis", "start", "stop")}, {"axis": 1, "start": 0, "stop": 4})
        g.cast(r, "i32")
        self.assertEqual(g.nodes[-1]["dtype"], "int32")


class TensorTest(unittest.TestCase):
    def test_nested_lists(self) -> None:
        t = tensord.Tensor([[1, 2, 3], [4, 5, 6]])
        self.assertEqual((t.dtype.name, t.shape, t.nbytes), ("float32", (2, 3), 24))
        self.assertEqual(t.tolist(), [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        self.assertEqual(tensord.Tensor([[1, 2]], "int64").tolist(), [[1, 2]])
        self.assertEqual(tensord.Tensor([True, False]).dtype.name, "bool")
        self.assertEqual(tensord.Tensor(2.5).tolist(), 2.5)
        self.assertEqual(tensord.Tensor([0.5, 65504.0], "f16").tolist(), [0.5, 65504.0])
        self.assertEqual(tensord.Tensor([], "int32").shape, (0,))
        with self.assertRaisesRegex(ValueError, "ragged"):
            tensord.Tensor([[1, 2], [3]])

    def test_array_and_bytes_without_copy(self) -> None:
        a = array.array("f", [1.0, 2.0, 3.0, 4.0])
        t = tensord.Tensor(a, shape=[2, 2])
        self.assertIs(t.data, a)
        self.assertEqual(t.tolist(), [[1.0, 2.0], [3.0, 4.0]])
        w = to_wire("a", t)
        self.assertEqual(w.struct.data, a.buffer_info()[0])  # the array's own buffer
        self.assertEqual(tensord.Tensor(array.array("q", [7]), "int64").data.typecode, "q")
        self.assertEqual(tensord.Tensor(array.array("d", [1.5])).tolist(), [1.5])  # double -> float32
        self.assertEqual(tensord.Tensor(b"\x01\x00\x00\x00", "int32").tolist(), [1])
        with self.assertRaisesRegex(TypeError, "needs a dtype"):
            tensord.Tensor(b"1234")

    def test_wire_struct(self) -> None:
        w = to_wire("x", [[1.0, 2.0]])
        self.assertEqual((w.struct.name, w.struct.dtype, w.struct.ndim), (b"x", 5, 2))
        self.assertEqual(list(w.struct.shape)[:2], [1, 2])
        self.assertTrue(w.struct.data)


@unittest.skipUnless(tensord.convert.numpy_available(), "numpy is not installed")
class NumpyWireTest(unittest.TestCase):
    def test_pointer_passed_through(self) -> None:
        import numpy as np

        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        w = to_wire("a", a)
        self.assertEqual(w.struct.data, a.ctypes.data)  # no copy
        self.assertEqual(list(w.struct.shape)[:2], [3, 4])
        f = np.asfortranarray(a)
        self.assertNotEqual(to_wire("f", f).struct.data, f.ctypes.data)  # made contiguous
        self.assertEqual(to_wire("d", np.zeros(2)).struct.dtype, 5)  # float64 -> float32
        with self.assertRaises(TypeError):
            to_wire("c", np.zeros(2, dtype=np.complex64))


class LibraryTest(unittest.TestCase):
    def test_not_found_message(self) -> None:
        env = dict(os.environ, TENSORD_LIB="/nonexistent/libtensord.so")
        code = "import tensord\ntry:\n tensord.Client('ipc:///nowhere')\nexcept tensord.LibraryNotFound as e:\n print(e)"
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             cwd=REPO / "clients" / "python", check=True).stdout
        self.assertIn("TENSORD_LIB=/nonexistent/libtensord.so", out)


if __name__ == "__main__":
    unittest.main()

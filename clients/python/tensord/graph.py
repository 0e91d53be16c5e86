"""graph.py: a builder for the daemon's graph format (docs/PROTOCOL.md, "Graph format"): nodes
made by methods named after the ops of protocol/graph_ops.def, with + - * / @ and unary -."""

from __future__ import annotations

import json
from typing import Any, Iterable, Sequence

from .dtypes import dtype as to_dtype

# The attributes each kind of op takes (graph_ops.def's PG_ATTR_* kinds), in positional order.
KINDS: dict[str, tuple[str, ...]] = {
    "LEAF": ("dtype", "shape"),
    "CONST": ("value", "dtype"),
    "NONE": (),
    "AXIS": ("axis",),
    "AXES": ("axes", "keepdim"),
    "SHAPE": ("shape",),
    "PERM": ("perm",),
    "DIMS": ("dims",),
    "DTYPE": ("dtype",),
    "CONV": ("stride", "padding"),
    "ARGMAX": ("axis", "keepdim"),
    "CLASSES": ("num_classes",),
    "SLICE": ("axis", "start", "stop", "step"),
}

MAX_IN = 16  # PROTO_GRAPH_MAX_IN: the most inputs of a variadic op (cat, stack)

# One row per op, as in protocol/graph_ops.def: JSON name: (fewest inputs, most inputs, kind).
# A new op is one line here (and a kind above if it brings new attributes); Graph gets a
# method of the op's name. Rows the daemon does not have yet are answered bad_request by it.
OPS: dict[str, tuple[int, int, str]] = {
    "input": (0, 0, "LEAF"),
    "param": (0, 0, "LEAF"),
    "const": (0, 0, "CONST"),
    "add": (2, 2, "NONE"),
    "sub": (2, 2, "NONE"),
    "mul": (2, 2, "NONE"),
    "div": (2, 2, "NONE"),
    "neg": (1, 1, "NONE"),
    "exp": (1, 1, "NONE"),
    "log": (1, 1, "NONE"),
    "sqrt": (1, 1, "NONE"),
    "relu": (1, 1, "NONE"),
    "sigmoid": (1, 1, "NONE"),
    "tanh": (1, 1, "NONE"),
    "matmul": (2, 2, "NONE"),
    "linear": (2, 3, "NONE"),
    "softmax": (1, 1, "AXIS"),
    "log_softmax": (1, 1, "AXIS"),
    "sum": (1, 1, "AXES"),
    "mean": (1, 1, "AXES"),
    "max": (1, 1, "AXES"),
    "reshape": (1, 1, "SHAPE"),
    "permute": (1, 1, "PERM"),
    "transpose": (1, 1, "DIMS"),
    "cast": (1, 1, "DTYPE"),
    "conv2d": (2, 3, "CONV"),
    "argmax": (1, 1, "ARGMAX"),
    "one_hot": (1, 1, "CLASSES"),
    "eq": (2, 2, "NONE"),
    "lt": (2, 2, "NONE"),
    "where": (3, 3, "NONE"),
    "cat": (1, MAX_IN, "AXIS"),
    "stack": (1, MAX_IN, "AXIS"),
    "slice": (1, 1, "SLICE"),
}


class Node:
    """A node of a Graph: its id names it in the graph JSON (and, for inputs and params, the
    tensor that feeds it). Arithmetic operators add nodes to the same graph; Python numbers
    become const nodes."""

    __slots__ = ("graph", "id", "op")

    def __init__(self, graph: Graph, node_id: str, op: str):
        self.graph, self.id, self.op = graph, node_id, op

    def __add__(self, o: Any) -> Node: return self.graph.add(self, o)
    def __radd__(self, o: Any) -> Node: return self.graph.add(o, self)
    def __sub__(self, o: Any) -> Node: return self.graph.sub(self, o)
    def __rsub__(self, o: Any) -> Node: return self.graph.sub(o, self)
    def __mul__(self, o: Any) -> Node: return self.graph.mul(self, o)
    def __rmul__(self, o: Any) -> Node: return self.graph.mul(o, self)
    def __truediv__(self, o: Any) -> Node: return self.graph.div(self, o)
    def __rtruediv__(self, o: Any) -> Node: return self.graph.div(o, self)
    def __matmul__(self, o: Any) -> Node: return self.graph.matmul(self, o)
    def __rmatmul__(self, o: Any) -> Node: return self.graph.matmul(o, self)
    def __neg__(self) -> Node: return self.graph.neg(self)

    def __repr__(self) -> str:
        return f"Node({self.id!r}, op={self.op!r})"


class Graph:
    """A graph under construction. Nodes are appended in order, so a graph never has a cycle.

    g = Graph()
    x = g.input("x", "f32", [None, 16])        # None: the batch dimension (-1 on the wire)
    w = g.param("w1", [16, 16], value=w1)       # value: optional, sent with load/realize
    b = g.param("b1", [16])
    y = g.relu(x @ w + b)
    g.output(y)                                 # or Graph.to_dict(outputs=[y])
    """

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.outputs: list[str] = []
        self.values: dict[str, Any] = {}  # param id -> initial value (numpy array, Tensor, list)
        self._ids: set[str] = set()
        self._counter = 0

    # ---- leaves ----
    def input(self, name: str, dtype: str, shape: Sequence[int | None]) -> Node:
        """An input tensor; None or -1 in shape marks the batch dimension."""
        return self._add(name, "input", [], {"dtype": to_dtype(dtype).name, "shape": _dims(shape)})

    def param(self, name: str, shape: Sequence[int], dtype: str = "float32", value: Any = None) -> Node:
        """A parameter (the model's weights); value, when given, is sent as its weight."""
        node = self._add(name, "param", [], {"dtype": to_dtype(dtype).name, "shape": _dims(shape)})
        if value is not None:
            self.values[name] = value
        return node

    def const(self, value: float, dtype: str = "float32", name: str | None = None) -> Node:
        """A scalar constant."""
        return self._add(name, "const", [], {"value": value, "dtype": to_dtype(dtype).name})

    # ---- any op ----
    def op(self, op: str, *inputs: Any, name: str | None = None, **attrs: Any) -> Node:
        """A node of op (graph_ops.def) on inputs (Nodes; numbers become const nodes), with the
        op's attributes. Raises ValueError for an unknown op, a wrong input count or an attribute
        the op does not take."""
        if op not in OPS or OPS[op][2] in ("LEAF", "CONST"):
            raise ValueError(f"unknown op {op!r}" if op not in OPS else f"use Graph.{op}() for {op}")
        lo, hi, kind = OPS[op]
        if not lo <= len(inputs) <= hi:
            want = f"{lo}" if lo == hi else f"{lo} to {hi}"
            raise ValueError(f"{op}: takes {want} inputs, got {len(inputs)}")
        for key in attrs:
            if key not in KINDS[kind]:
                raise ValueError(f"{op}: unknown attribute {key!r} (takes {', '.join(KINDS[kind]) or 'none'})")
        if "dtype" in attrs:
            attrs["dtype"] = to_dtype(attrs["dtype"]).name
        ids = [self._node(v).id for v in inputs]
        return self._add(name, op, ids, {k: v for k, v in attrs.items() if v is not None})

    def output(self, *nodes: Node | str) -> Graph:
        """Appends nodes to the graph's outputs; returns the graph."""
        for n in nodes:
            nid = n.id if isinstance(n, Node) else n
            if nid not in self._ids:
                raise ValueError(f"output {nid!r}: no such node")
            if nid not in self.outputs:
                self.outputs.append(nid)
        return self

    # ---- the result ----
    def to_dict(self, outputs: Iterable[Node | str] | None = None) -> dict[str, Any]:
        """The graph JSON object {"nodes", "outputs"}; outputs default to Graph.output's."""
        outs = [n.id if isinstance(n, Node) else n for n in outputs] if outputs is not None else list(self.outputs)
        if not outs:
            raise ValueError("the graph has no outputs (Graph.output)")
        return {"nodes": [dict(n) for n in self.nodes], "outputs": outs}

    def to_json(self, outputs: Iterable[Node | str] | None = None) -> str:
        return json.dumps(self.to_dict(outputs))

    def input_names(self) -> list[str]:
        return [n["id"] for n in self.nodes if n["op"] == "input"]

    # ---- internals ----
    def _node(self, v: Any) -> Node:
        if isinstance(v, Node):
            if v.graph is not self:
                raise ValueError(f"{v.id}: a node of another graph")
            return v
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return self.const(float(v))
        raise TypeError(f"not a node or a number: {v!r}")

    def _add(self, name: str | None, op: str, ins: list[str], attrs: dict[str, Any]) -> Node:
        if name is None:
            while True:
                self._counter += 1
                name = f"{op}_{self._counter}"
                if name not in self._ids:
                    break
        elif name in self._ids:
            raise ValueError(f"node id {name!r} is already used")
        if not 1 <= len(name.encode()) <= 64:
            raise ValueError(f"node id {name!r}: 1 to 64 bytes")
        node: dict[str, Any] = {"id": name, "op": op}
        if ins:
            node["in"] = ins
        node.update(attrs)
        self.nodes.append(node)
        self._ids.add(name)
        return Node(self, name, op)


def _dims(shape: Sequence[int | None]) -> list[int]:
    return [-1 if d is None else int(d) for d in shape]


def _op_method(op: str, kind: str):
    attr_names = KINDS[kind]
    takes_attrs = bool(attr_names)

    def method(self: Graph, *args: Any, name: str | None = None, **attrs: Any) -> Node:
        inputs: list[Any] = []
        rest: list[Any] = []
        for a in args:  # leading nodes are inputs; what follows fills the attributes in order
            (inputs if not takes_attrs or (isinstance(a, Node) and not rest) else rest).append(a)
        if len(rest) > len(attr_names):
            raise ValueError(f"{op}: too many arguments")
        for key, value in zip(attr_names, rest):
            if key in attrs:
                raise ValueError(f"{op}: {key} given twice")
            attrs[key] = value
        return self.op(op, *inputs, name=name, **attrs)

    lo, hi, _ = OPS[op]
    method.__name__ = op
    method.__doc__ = (f"The {op} op: {lo if lo == hi else f'{lo} to {hi}'} input(s)"
                      + (f", then {', '.join(attr_names)}" if attr_names else "") + ".")
    return method


for _op, (_lo, _hi, _kind) in OPS.items():
    if _kind not in ("LEAF", "CONST"):
        setattr(Graph, _op, _op_method(_op, _kind))

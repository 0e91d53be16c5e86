#!/usr/bin/env python3
"""make_corpus.py: writes the seed corpus of the fuzz targets (loaders, request decoder, graph validator) (tests/fuzz/corpus/), a few
tiny valid files and the edge cases of issue 11. Run from anywhere; the output is committed."""
import gzip
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def st(header, data=b"", raw_json=None):
    text = raw_json if raw_json is not None else json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + data


def idx(dims, data, typ=8):
    return bytes([0, 0, typ, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + data


SAFETENSORS = {
    "f32_2x2": st({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}},
                  struct.pack("<4f", 1, 2, 3, 4)),
    "every_dtype": st({
        "a": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]},
        "b": {"dtype": "I32", "shape": [1], "data_offsets": [8, 12]},
        "c": {"dtype": "F16", "shape": [1], "data_offsets": [12, 14]},
        "d": {"dtype": "U8", "shape": [1], "data_offsets": [14, 15]},
        "e": {"dtype": "BOOL", "shape": [1], "data_offsets": [15, 16]},
        "__metadata__": {"format": "pt"},
    }, bytes(15) + b"\x01"),
    "scalar_and_empty": st({
        "s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]},
        "z": {"dtype": "F32", "shape": [0, 3], "data_offsets": [4, 4]},
    }, bytes(4)),
    "zero_dim_overflow": st({"w": {"dtype": "U8", "shape": [0, 2 ** 40, 2 ** 40],
                                   "data_offsets": [0, 0]}}),
    "cjson_14_bytes": bytes.fromhex("0600000000000000 7b22223a302c".replace(" ", "")),
    "nul_metadata": st(None, b"a", raw_json=b'{"__metadata__\\u0000x":{"dtype":"U8","shape":[1],'
                                            b'"data_offsets":[0,1]}}'),
    "empty_name": st({"": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"a"),
    "overlap": st({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                   "b": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}}, b"abc"),
}

IDX = {
    "u8_2x3": idx([2, 3], bytes(range(6))),
    "u8_1d": idx([4], b"\x00\x7f\x80\xff"),
    "claims_16gib": bytes.fromhex("000008020001000000040000"),
    "zero_dims": idx([0, 0xFFFFFFFF, 0xFFFFFFFF], b""),
    # 'z' + bytes: the target gzips the rest itself
    "z_u8_2x2": b"z" + idx([2, 2], b"\x01\x02\x03\x04"),
    "z_truncated": b"z" + idx([100], b"\x01\x02"),
}


def tsd(header, payloads=(), raw_json=None):
    """A protocol message (docs/PROTOCOL.md): TSD1, u32 JSON length, JSON, 64-byte aligned payloads;
    header["tensors"] gets offsets and byte counts for payloads [(name, dtype, shape, bytes)]."""
    tensors, area, off = [], b"", 0
    for name, dtype, shape, data in payloads:
        tensors.append({"name": name, "dtype": dtype, "shape": shape, "offset": off, "nbytes": len(data)})
        area += data
        off += len(data)
        pad = -off % 64
        area += bytes(pad)
        off += pad
    if tensors:
        header = dict(header, tensors=tensors)
    text = raw_json if raw_json is not None else json.dumps(header, separators=(",", ":")).encode()
    msg = b"TSD1" + struct.pack("<I", len(text)) + text
    if payloads:  # the message ends with the last payload's bytes (no padding after it)
        msg += bytes(-len(msg) % 64) + area[:len(area) - pad]
    return msg


MLP = {"nodes": [
    {"id": "x", "op": "input", "dtype": "float32", "shape": [-1, 4]},
    {"id": "w1", "op": "param", "dtype": "float32", "shape": [4, 8]},
    {"id": "b1", "op": "param", "dtype": "float32", "shape": [8]},
    {"id": "h", "op": "matmul", "in": ["x", "w1"]},
    {"id": "hb", "op": "add", "in": ["h", "b1"]},
    {"id": "a", "op": "relu", "in": ["hb"]},
    {"id": "s", "op": "sum", "in": ["a"], "axes": [1], "keepdim": True},
    {"id": "p", "op": "softmax", "in": ["a"], "axis": -1},
    {"id": "r", "op": "reshape", "in": ["p"], "shape": [-1, 2, 4]},
    {"id": "t", "op": "transpose", "in": ["r"], "dims": [1, 2]},
    {"id": "k", "op": "const", "value": 2.5, "dtype": "float32"},
    {"id": "m", "op": "mul", "in": ["t", "k"]},
    {"id": "c", "op": "cast", "in": ["m"], "dtype": "float16"},
], "outputs": ["s", "c"]}
CONV = {"nodes": [
    {"id": "x", "op": "input", "dtype": "float32", "shape": [-1, 1, 6, 6]},
    {"id": "w", "op": "param", "dtype": "float32", "shape": [2, 1, 3, 3]},
    {"id": "b", "op": "param", "dtype": "float32", "shape": [2]},
    {"id": "c", "op": "conv2d", "in": ["x", "w", "b"], "stride": 2, "padding": [1, 1]},
    {"id": "q", "op": "permute", "in": ["c"], "perm": [0, 2, 3, 1]},
    {"id": "l", "op": "log_softmax", "in": ["q"], "axis": 3},
    {"id": "mx", "op": "max", "in": ["l"], "axes": [1, 2]},
    {"id": "mn", "op": "mean", "in": ["l"]},
    {"id": "e", "op": "exp", "in": ["mx"]}, {"id": "n", "op": "neg", "in": ["e"]},
    {"id": "lg", "op": "log", "in": ["e"]}, {"id": "sq", "op": "sqrt", "in": ["e"]},
    {"id": "sg", "op": "sigmoid", "in": ["sq"]}, {"id": "th", "op": "tanh", "in": ["sg"]},
    {"id": "d", "op": "div", "in": ["th", "lg"]}, {"id": "u", "op": "sub", "in": ["d", "n"]},
], "outputs": ["u", "mn"]}
LINEAR = {"nodes": [
    {"id": "x", "op": "input", "dtype": "float32", "shape": [3, 4]},
    {"id": "w", "op": "param", "dtype": "float32", "shape": [2, 4]},
    {"id": "y", "op": "linear", "in": ["x", "w"]},
], "outputs": ["y"]}

REQUEST = {
    "infer_two_tensors": tsd({"id": "req-1", "verb": "infer", "model": "mlp"},
                             [("x", "float32", [2, 3], struct.pack("<6f", *range(6))),
                              ("mask", "uint8", [2], b"\x01\x00")]),
    "every_dtype": tsd({"id": 7, "verb": "infer"},
                       [("a", "bool", [1], b"\x01"), ("b", "uint8", [2], b"ab"),
                        ("c", "int32", [1], bytes(4)), ("d", "int64", [1], bytes(8)),
                        ("e", "float16", [1, 1], bytes(2)), ("f", "float32", [], bytes(4)),
                        ("z", "float32", [0, 5], b"")]),
    "hello": tsd({"id": 0, "verb": "hello", "version": 1}),
    "realize_mlp": tsd({"id": "g", "verb": "realize", "graph": MLP},
                       [("x", "float32", [2, 4], bytes(32))]),
    "realize_conv": tsd({"id": "g2", "verb": "realize", "graph": CONV}),
    "realize_linear": tsd({"id": "g3", "verb": "realize", "graph": LINEAR}),
    "cycle": tsd({"id": 1, "verb": "realize", "graph": {"nodes": [
        {"id": "a", "op": "relu", "in": ["b"]}, {"id": "b", "op": "relu", "in": ["a"]}], "outputs": ["a"]}}),
    "overlap": tsd({"id": 1, "verb": "infer"}, raw_json=b'{"id":1,"verb":"infer","tensors":['
                   b'{"name":"a","dtype":"uint8","shape":[64],"offset":0,"nbytes":64},'
                   b'{"name":"b","dtype":"uint8","shape":[64],"offset":0,"nbytes":64}]}') + bytes(40 + 64),
    "huge_shape": tsd({"id": 1, "verb": "infer"}, raw_json=b'{"id":1,"verb":"infer","tensors":['
                      b'{"name":"a","dtype":"float32","shape":[4294967296,4294967296],"offset":0,"nbytes":0}]}'),
}


def graph(nodes, outputs):
    return {"nodes": nodes, "outputs": outputs}


XB = {"id": "x", "op": "input", "dtype": "float32", "shape": [-1, 4]}
XB3 = {"id": "x", "op": "input", "dtype": "float32", "shape": [-1, 3, 4]}
# fuzz_graph: JSON text of a graph alone; tests/test_graph_batch.c checks what each one gives
GRAPH = {
    "mlp": MLP, "conv": CONV, "linear": LINEAR,
    "permuted": graph([XB3, {"id": "p", "op": "permute", "in": ["x"], "perm": [2, 0, 1]},
                       {"id": "t", "op": "transpose", "in": ["p"], "dims": [0, 1]},
                       {"id": "w", "op": "param", "dtype": "float32", "shape": [3, 5]},
                       {"id": "m", "op": "matmul", "in": ["t", "w"]},
                       {"id": "r", "op": "reshape", "in": ["m"], "shape": [-1, 20]}], ["p", "r"]),
    "two_inputs": graph([XB3, {"id": "y", "op": "input", "dtype": "float16", "shape": [-1, 4, 2]},
                         {"id": "m", "op": "matmul", "in": ["x", "y"]},
                         {"id": "c", "op": "cast", "in": ["m"], "dtype": "float32"}], ["c", "y"]),
    "mean_batch": graph([XB, {"id": "m", "op": "mean", "in": ["x"], "axes": [0], "keepdim": True},
                         {"id": "d", "op": "sub", "in": ["x", "m"]}], ["d"]),
    "gram": graph([XB, {"id": "t", "op": "transpose", "in": ["x"], "dims": [0, 1]},
                   {"id": "g", "op": "matmul", "in": ["t", "x"]}], ["g"]),
    "reshape_moves": graph([XB3, {"id": "r", "op": "reshape", "in": ["x"], "shape": [3, -1, 4]}], ["r"]),
    "outer": graph([XB, {"id": "a", "op": "reshape", "in": ["x"], "shape": [-1, 1, 4]},
                    {"id": "b", "op": "reshape", "in": ["x"], "shape": [1, -1, 4]},
                    {"id": "s", "op": "add", "in": ["a", "b"]},
                    {"id": "p", "op": "softmax", "in": ["s"], "axis": 0}], ["s", "p"]),
    "decode": graph([{"id": "ids", "op": "input", "dtype": "int32", "shape": [-1, 3]},
                     {"id": "e", "op": "param", "dtype": "float32", "shape": [8, 4]},
                     {"id": "one", "op": "const", "value": 1, "dtype": "int32"},
                     {"id": "i1", "op": "sub", "in": ["ids", "one"]},
                     {"id": "oh", "op": "one_hot", "in": ["i1"], "num_classes": 8},
                     {"id": "bag", "op": "sum", "in": ["oh"], "axes": 1},
                     {"id": "c", "op": "matmul", "in": ["bag", "e"]},
                     {"id": "y0", "op": "argmax", "in": ["c"], "axis": -1},
                     {"id": "m", "op": "max", "in": ["c"], "axes": -1, "keepdim": True},
                     {"id": "h", "op": "eq", "in": ["c", "m"]},
                     {"id": "z", "op": "const", "value": 0},
                     {"id": "n", "op": "lt", "in": ["c", "z"]},
                     {"id": "w", "op": "where", "in": ["h", "c", "z"]},
                     {"id": "k", "op": "contiguous", "in": ["w"]},
                     {"id": "r", "op": "slice", "in": ["e"], "axis": 0, "start": 1, "stop": -1, "step": 2},
                     {"id": "j", "op": "cat", "in": ["k", "c"], "axis": 1},
                     {"id": "y1", "op": "argmax", "in": ["j"], "keepdim": True},
                     {"id": "p", "op": "stack", "in": ["y0", "y0"], "axis": 1}], ["p", "y1", "n"]),
    "argmax_batch": graph([XB, {"id": "a", "op": "argmax", "in": ["x"], "axis": 0}], ["a"]),
    "unknown_op": graph([XB, {"id": "y", "op": "gelu", "in": ["x"]}], ["y"]),
    "bad_shape": graph([XB, {"id": "w", "op": "param", "dtype": "float32", "shape": [5, 2]},
                        {"id": "y", "op": "matmul", "in": ["x", "w"]}], ["y"]),
}


# ---- ONNX (protobuf wire format written by hand: field numbers from onnx.proto) ----

def pb_varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def pb(num, value):
    """One field: an int as a varint, bytes/str length-delimited."""
    if isinstance(value, int):
        return pb_varint(num << 3) + pb_varint(value)
    if isinstance(value, str):
        value = value.encode()
    return pb_varint(num << 3 | 2) + pb_varint(len(value)) + value


def onnx_value(name, dims):
    shape = b"".join(pb(1, pb(2, d) if isinstance(d, str) else pb(1, d)) for d in dims)
    return pb(1, name) + pb(2, pb(1, pb(1, 1) + pb(2, shape)))


def onnx_model(nodes, inits, inputs, outputs, opset=13):
    g = b"".join(pb(1, n) for n in nodes) + pb(2, "g") + b"".join(pb(5, t) for t in inits)
    g += b"".join(pb(11, v) for v in inputs) + b"".join(pb(12, v) for v in outputs)
    return pb(1, 8) + pb(8, pb(1, "") + pb(2, opset)) + pb(7, g)


def onnx_node(op, ins, outs, attrs=b""):
    return b"".join(pb(1, i) for i in ins) + b"".join(pb(2, o) for o in outs) + pb(4, op) + attrs


ONNX = {
    "add_init": onnx_model([onnx_node("Add", ["x", "w"], ["y"])],
                           [pb(1, 2) + pb(1, 3) + pb(2, 1) + pb(8, "w") + pb(9, struct.pack("<6f", *range(6)))],
                           [onnx_value("x", ["batch", 3])], [onnx_value("y", ["batch", 3])]),
    "reshape_const": onnx_model([onnx_node("Constant", [], ["s"], pb(5, pb(1, "value") + pb(20, 4) + pb(5, pb(1, 1) + pb(2, 7) + pb(7, 6) + pb(8, "s")))),
                                 onnx_node("Reshape", ["x", "s"], ["y"]), onnx_node("Relu", ["y"], ["z"])],
                                [], [onnx_value("x", [2, 3])], [onnx_value("z", [6])]),
}


def main():
    # 'J' seeds: JSON, NUL, payload area; fuzz_request frames them (so JSON mutations keep the length)
    for name, msg in list(REQUEST.items()):
        jl = struct.unpack("<I", msg[4:8])[0]
        area = msg[(8 + jl + 63) // 64 * 64:]
        REQUEST["J_" + name] = b"J" + msg[8:8 + jl] + (b"\0" + area if area else b"")
    graphs = {k: json.dumps(v, separators=(",", ":")).encode() for k, v in GRAPH.items()}
    for name, files in (("safetensors", SAFETENSORS), ("idx", IDX), ("request", REQUEST), ("graph", graphs), ("onnx", ONNX)):
        d = os.path.join(HERE, "corpus", name)
        os.makedirs(d, exist_ok=True)
        for fn, data in files.items():
            with open(os.path.join(d, fn), "wb") as f:
                f.write(data)
    # one real gzip file (the target's 'z' mode covers valid streams; this one is mutated raw)
    with open(os.path.join(HERE, "corpus", "idx", "gz_u8_3"), "wb") as f:
        f.write(gzip.compress(idx([3], b"abc"), mtime=0))


if __name__ == "__main__":
    main()

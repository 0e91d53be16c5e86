#!/usr/bin/env python3
"""make_corpus.py: writes the seed corpus of the loader fuzz targets (tests/fuzz/corpus/), a few
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


def main():
    for name, files in (("safetensors", SAFETENSORS), ("idx", IDX)):
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

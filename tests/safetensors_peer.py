#!/usr/bin/env python3
# safetensors_peer.py: an independent safetensors reader/writer (standard library only) that
# test_io.c uses to check tensord's files interoperate: `write PATH` and `check PATH`.
"""Writes or checks a small safetensors file holding the tensors of EXPECTED.

write PATH  writes them (with __metadata__, data in a different order than tensord's writer).
check PATH  reads PATH and verifies it as the reference implementation would (header length
            and padding, JSON, dtypes, shapes, contiguous data_offsets covering the data) and
            that every tensor holds exactly the expected values. Exit 0 if so, 1 otherwise,
            with the problems on stderr.
"""
import json
import struct
import sys

# dtype -> (struct format character, item size)
DTYPES = {"F32": ("f", 4), "F16": ("e", 2), "I64": ("q", 8), "I32": ("i", 4), "U8": ("B", 1), "BOOL": ("?", 1)}


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


# name -> (dtype, shape, values); test_io.c builds the same tensors (keep the two in step).
EXPECTED = {
    "weight_f32": ("F32", [3, 4], [(i - 5) * 0.5 for i in range(12)]),
    "half": ("F16", [2, 3], [(i - 2) * 0.375 for i in range(6)]),
    "ids": ("I64", [5], [i * 1000000007 - 3000000000 for i in range(5)]),
    "counts": ("I32", [2, 2], [-7 * i + 3 for i in range(4)]),
    "pixels": ("U8", [7], [(i * 37) % 256 for i in range(7)]),
    "mask": ("BOOL", [4], [True, False, True, True]),
    "scalar": ("F32", [], [3.5]),
    "empty": ("F32", [0, 3], []),
}


def pack(dtype, values):
    fmt, _ = DTYPES[dtype]
    return struct.pack("<%d%s" % (len(values), fmt), *values)


def write(path):
    header, blobs, off = {"__metadata__": {"format": "pt", "producer": "safetensors_peer.py"}}, [], 0
    for name in sorted(EXPECTED, reverse=True):  # another order than tensord's writer uses
        dtype, shape, values = EXPECTED[name]
        blob = pack(dtype, values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return []


def check(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        return ["file is %d bytes, too short" % len(raw)]
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        return ["header length %d exceeds the file (%d bytes)" % (n, len(raw))]
    errs = []
    if n % 8:
        errs.append("header length %d is not a multiple of 8" % n)
    text = raw[8 : 8 + n]
    if not text.startswith(b"{"):
        errs.append("header does not start with '{'")
    try:
        header = json.loads(text.decode("utf-8"))
    except ValueError as e:
        return errs + ["header is not valid UTF-8 JSON: %s" % e]
    data = raw[8 + n :]
    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        errs.append("__metadata__ is not an object of strings")
    if sorted(header) != sorted(EXPECTED):
        errs.append("names %s, expected %s" % (sorted(header), sorted(EXPECTED)))
    # the reference requires the ranges to be contiguous from 0 and to cover all the data
    ranges = []
    for name, info in header.items():
        offs = info.get("data_offsets") if isinstance(info, dict) else None
        if not (isinstance(offs, list) and len(offs) == 2 and all(type(o) is int for o in offs)):
            return errs + ["%s: data_offsets %r are not two integers" % (name, offs)]
        ranges.append((offs[0], offs[1], name))
    end = 0
    for begin, stop, name in sorted(ranges):
        if begin != end or stop < begin:
            errs.append("%s: data_offsets [%d, %d] do not follow the previous end %d" % (name, begin, stop, end))
        end = max(end, stop)
    if end != len(data):
        errs.append("data_offsets cover %d bytes, the data is %d" % (end, len(data)))
    for name, info in header.items():
        if name not in EXPECTED:
            continue
        dtype, shape, values = EXPECTED[name]
        if info.get("dtype") != dtype or info.get("shape") != shape:
            errs.append("%s: %s %s, expected %s %s" % (name, info.get("dtype"), info.get("shape"), dtype, shape))
            continue
        begin, stop = info["data_offsets"]
        if stop - begin != numel(shape) * DTYPES[dtype][1]:
            errs.append("%s: %d bytes for shape %s" % (name, stop - begin, shape))
            continue
        got = list(struct.unpack("<%d%s" % (numel(shape), DTYPES[dtype][0]), data[begin:stop]))
        if got != values:
            errs.append("%s: values %s, expected %s" % (name, got, values))
    return errs


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        sys.stderr.write("usage: safetensors_peer.py write|check PATH\n")
        return 2
    errs = (write if sys.argv[1] == "write" else check)(sys.argv[2])
    for e in errs:
        sys.stderr.write("safetensors_peer.py: %s: %s\n" % (sys.argv[2], e))
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())

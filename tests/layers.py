#!/usr/bin/env python3
"""layers.py: checks that dependencies point one way (docs/ARCHITECTURE.md, "Layers").

Reads the symbol tables of the built objects (nm) and fails when an object uses a symbol defined
in a layer above its own, or in another folder of its own layer (one backend calling another);
and reads #include lines so that backends include only the backend interface, engine/util and the
public headers, and daemon/, clients/, examples/, bench/ only the public headers (clients/ also
protocol/'s, the shared wire library).

Usage: tests/layers.py BUILD_DIR           check the objects under BUILD_DIR
       tests/layers.py --self-test BUILD   also prove the check catches a backward call
"""
import os
import re
import subprocess
import sys
import tempfile

# Lowest first. An object may use symbols of its own folder and of lower layers only.
LAYERS = [
    ["engine/util"],                                   # strings, hashes: no engine types
    ["backends/backend.c", "backends/cpu", "backends/ocl"],  # each backend on its own
    ["backends/registry.c"],                           # the one place that names backends
    ["engine/core"],                                   # status, first error, dtypes, shapes
    ["engine/device"],                                 # devices through the registry, buffers
    ["engine/graph"],                                  # op table, interned nodes
    ["engine/codegen"],                                # lowering, uops, linearizing
    ["engine/renderer"],                               # loop IR -> C-family text
    ["engine/schedule"],                               # fusion boundaries, schedule cache
    ["engine/cache"],                                  # programs in memory and on disk
    ["engine/realize"],                                # render, compile, launch
    ["engine/tensor"],                                 # the Tensor API, autograd, contexts
    ["engine/jit"],                                    # capture and replay
    ["engine/nn"],                                     # layers, losses, optimizers
    ["engine/io"],                                     # safetensors, IDX
    ["engine/onnx"],                                   # ONNX import: protobuf -> Tensor API graph
    ["protocol"],                                      # wire codec, graph format (public API only)
    ["clients", "daemon"],                             # client library and tensorctl; the server (each on its own)
]
PUBLIC_ONLY = ["protocol", "daemon", "clients", "examples", "bench"]
# Folders whose headers a public-only folder may also include with "name.h" (its -I path).
ALSO_INCLUDE = {"clients": ["protocol"], "daemon": ["protocol"]}


def unit_of(path):
    """(layer index, unit) of a source path relative to the repo, or None if unlayered."""
    for i, units in enumerate(LAYERS):
        for u in units:
            if path == u or path.startswith(u + "/"):
                return i, u
    return None


def nm(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TDBRCGSV":
            defined.add(f[2])
        elif len(f) == 2 and f[0] == "U":
            used.add(f[1])
    return defined, used


def check_symbols(build, extra=()):
    objs = []
    for root, _, files in os.walk(build):
        for f in files:
            if f.endswith(".o"):
                rel = os.path.relpath(os.path.join(root, f), build)
                if unit_of(rel):
                    objs.append((rel, os.path.join(root, f)))
    objs += list(extra)
    if not objs:
        sys.exit(f"layers: no engine objects under {build} (build first)")
    owner, uses = {}, {}
    for rel, path in objs:
        d, u = nm(path)
        uses[rel] = u
        for s in d:
            owner[s] = rel
    bad = []
    for rel, used in sorted(uses.items()):
        li, lu = unit_of(rel)
        for s in sorted(used):
            if s not in owner:
                continue  # libc, libraries
            ti, tu = unit_of(owner[s])
            if ti > li or (ti == li and tu != lu):
                why = "a layer above" if ti > li else "another unit of its layer"
                bad.append(f"{rel[:-2]}.c uses {s} from {owner[s][:-2]}.c ({why}: {tu})")
    return bad, len(objs)


INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def source_files(root, top):
    """The C sources under top: those git tracks (a checkout), else every one not in a hidden
    folder (a venv or a build tree must not count)."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", top], cwd=root, capture_output=True, text=True, check=True)
        return [f for f in out.stdout.split() if f.endswith((".c", ".h"))]
    except (OSError, subprocess.CalledProcessError):
        found = []
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [x for x in dirs if not x.startswith(".")]
            found += [os.path.relpath(os.path.join(d, f), root) for f in files if f.endswith((".c", ".h"))]
        return found


def include_ok(root, top, d, kind, inc):
    """May a file of top in folder d (absolute) include inc (kind '<' or '"')?"""
    if top == "backends":
        return kind == "<" or inc.startswith(("backends/", "util/")) or "/" not in inc
    banned = tuple(os.path.join(root, p) + "/" for p in ("engine", "backends"))
    if kind == "<":
        return not inc.startswith(("engine/", "backends/"))
    dirs = [d] + [os.path.join(root, p) for p in ALSO_INCLUDE.get(top, [])]
    for base in dirs:
        path = os.path.normpath(os.path.join(base, inc))
        if os.path.exists(path) and (base == d or path.startswith(base + "/")):
            return not path.startswith(banned)
    return False


def check_includes(root):
    bad = []
    for top in ["backends"] + PUBLIC_ONLY:
        also = "".join(f" and {p}/" for p in ALSO_INCLUDE.get(top, []))
        for rel in source_files(root, top):
            path = os.path.join(root, rel)
            d = os.path.dirname(path)
            for kind, inc in INCLUDE.findall(open(path, errors="replace").read()):
                if not include_ok(root, top, d, kind, inc):
                    bad.append(f"{rel} includes {inc}: " +
                               ("backends include the backend interface, engine/util and public headers only"
                                if top == "backends" else f"only include/tensord/{also} headers here"))
    return bad


def self_test(build):
    """A graph-layer object calling the realize layer must be reported."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "backward.c")
        obj = os.path.join(tmp, "backward.o")
        with open(src, "w") as f:
            f.write("int eng_realize_nodes(void *, void *const *, int);\n"
                    "int layers_selftest(void) { return eng_realize_nodes(0, 0, 0); }\n")
        subprocess.run(["cc", "-c", src, "-o", obj], check=True)
        bad, _ = check_symbols(build, [("engine/graph/zz_backward.o", obj)])
    hit = [b for b in bad if "zz_backward" in b and "eng_realize_nodes" in b]
    if not hit:
        sys.exit("layers: self-test FAILED: a backward call from engine/graph was not reported")
    print(f"layers: self-test: a backward call is caught ({hit[0]})")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    clients = os.path.join(root, "clients")
    cases = [("protocol", '"', "message.h", True), ("engine", '"', "../engine/core/context.h", False),
             ("engine", '<', "engine/core/context.h", False), ("absent", '"', "nothere.h", False)]
    for what, kind, inc, want in cases:
        if include_ok(root, "clients", clients, kind, inc) != want:
            sys.exit(f"layers: self-test FAILED: clients/ including {inc} ({what}) "
                     f"{'refused' if want else 'allowed'}")
    print("layers: self-test: clients/ may include protocol/ headers, never engine/ internals")


def main():
    args = sys.argv[1:]
    selftest = "--self-test" in args
    args = [a for a in args if a != "--self-test"]
    build = args[0] if args else "build"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bad, nobj = check_symbols(build)
    bad += check_includes(root)
    for b in bad:
        print("layers: " + b)
    if bad:
        sys.exit(f"layers: {len(bad)} backward dependencies")
    print(f"layers: {nobj} objects in {len(LAYERS)} layers, every dependency points down")
    if selftest:
        self_test(build)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""layers.py: checks that dependencies point one way (docs/ARCHITECTURE.md, "Layers").

Fails on four kinds of backward dependency:
  symbols   an object uses (nm) a symbol defined in a layer above its own, or in another unit
            of its own layer (one backend calling another);
  includes  a file (header or source, engine, backends, include/, protocol/, daemon/, clients/,
            examples/, bench/) includes a header of a higher layer: an engine or backend file only
            its own unit's headers, lower layers' and the public include/tensord/ ones; the public
            headers only public ones; protocol/, examples/, bench/ only include/tensord/ and their
            own folder, daemon/ and clients/ also protocol/'s. Headers are checked like sources,
            so nothing reaches a higher header through a lower one; the compiler's .d files
            (every header an object really read) are the safety net for what the scan missed;
  types     an engine file names a type (typedef) whose definition lives in a higher layer, a
            public-only folder names an engine-internal type; an opaque `struct tag *` may point
            up (the context's and the device's slots for the layers above), a typedef not;
  circles   a cycle between daemon/ files (file = basename, a .c and its .h are one): A depends
            on B when A's object uses a symbol B's defines or A includes B's header.

Usage: tests/layers.py BUILD_DIR              check the objects and sources
       tests/layers.py --self-test BUILD      also prove each check catches a planted case
       tests/layers.py --circles DIR BUILD    print the file circles of any folder (engine/tensor)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Lowest first. An object may use symbols of its own unit and of lower layers only; a file may
# include headers of its own unit, of lower layers and include/tensord/. A unit is a folder, a file
# or (name, paths) for a few files that belong together.
LAYERS = [
    ["engine/util"],                                   # strings, hashes: no engine types
    [("backends/interface", ("backends/backend.c", "backends/backend.h", "backends/dialect.h"))],  # vtable, target, dialect
    ["backends/cpu", "backends/ocl", "backends/cuda"], # each backend on its own
    [("backends/registry", ("backends/registry.c", "backends/registry.h"))],  # the one place that names backends
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
ENGINE = ["engine", "backends"]
PUBLIC = "include"
PUBLIC_ONLY = ["protocol", "daemon", "clients", "examples", "bench"]
# Folders whose headers a public-only folder may also include with "name.h" (its -I path).
# (examples/ and bench/ share their helpers: a bench times an example's model, an example reports
# as a bench does.)
ALSO_INCLUDE = {"clients": ["protocol"], "daemon": ["protocol"], "examples": ["bench"], "bench": ["examples"]}
# Folders with no circle between their files.
NO_CIRCLES = ["daemon"]


def unit_of(path):
    """(layer index, unit name) of a path relative to the repo, or None if unlayered."""
    for i, units in enumerate(LAYERS):
        for u in units:
            name, paths = u if isinstance(u, tuple) else (u, (u,))
            for p in paths:
                if path == p or path.startswith(p + "/"):
                    return i, name
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


def objects(build):
    """(path relative to the repo as a .o, path) of every object under build."""
    found = []
    for root, _, files in os.walk(build):
        for f in files:
            if f.endswith(".o"):
                found.append((os.path.relpath(os.path.join(root, f), build), os.path.join(root, f)))
    return found


def check_symbols(build, extra=()):
    objs = [(rel, p) for rel, p in objects(build) if unit_of(rel)] + list(extra)
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
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", top],
                             cwd=root, capture_output=True, text=True, check=True)
        files = [f for f in out.stdout.split() if f.endswith((".c", ".h"))]
        if files or os.path.isdir(os.path.join(root, ".git")) or os.path.isfile(os.path.join(root, ".git")):
            return [f for f in files if os.path.exists(os.path.join(root, f))]
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for d, dirs, files in os.walk(os.path.join(root, top)):
        dirs[:] = [x for x in dirs if not x.startswith(".")]
        found += [os.path.relpath(os.path.join(d, f), root) for f in files if f.endswith((".c", ".h"))]
    return sorted(found)


def search_path(top, build):
    """The -I folders (relative to the repo) a file of top is compiled with (the Makefile's INC)."""
    if top in ENGINE:
        return ["include", "engine", ".", os.path.join(build, "gen")]
    if top == PUBLIC:
        return ["include"]
    return ["include"] + ALSO_INCLUDE.get(top, [])


def resolve(root, rel, kind, inc, build):
    """The repo-relative path that rel's #include (kind '<' or '"') of inc names, or None (a system
    header, or nothing)."""
    top = rel.split("/")[0]
    bases = ([os.path.dirname(rel)] if kind == '"' else []) + search_path(top, build)
    for base in bases:
        p = os.path.normpath(os.path.join(root, base, inc))
        if os.path.isfile(p):
            return os.path.relpath(p, root)
    return None


def include_rule(rel, target, kind, build, inc=""):
    """Why rel may not include target (inc resolved, repo-relative; None: not found), or None if
    it may."""
    top = rel.split("/")[0]
    if target is None:
        if top not in ENGINE and inc.startswith(tuple(t + "/" for t in ENGINE)):
            return "engine internals are not on its include path"
        return None if kind == "<" or top in ENGINE else "not found in its own folder or include path"
    if target.startswith(os.path.normpath(build) + "/") or target.startswith("build/"):
        return None  # generated (the ONNX parser)
    if target.startswith(PUBLIC + "/"):
        return None  # the public API, for everyone
    if top == PUBLIC:
        return "the public headers include only public headers"
    if top in ENGINE:
        mine, theirs = unit_of(rel), unit_of(target)
        if mine is None:
            return None
        if theirs is None:
            return "not a layered engine header"
        if theirs[0] > mine[0]:
            return f"a layer above ({theirs[1]})"
        if theirs[0] == mine[0] and theirs[1] != mine[1]:
            return f"another unit of its layer ({theirs[1]})"
        return None
    allowed = [top] + ALSO_INCLUDE.get(top, [])
    if any(target.startswith(a + "/") for a in allowed):
        return None
    also = "".join(f" and {p}/" for p in ALSO_INCLUDE.get(top, []))
    return f"only include/tensord/{also} headers and its own folder's here"


def include_graph(root, build):
    """{file: [(kind, inc, resolved target)]} for every checked file."""
    graph = {}
    for top in ENGINE + [PUBLIC] + PUBLIC_ONLY:
        for rel in source_files(root, top):
            text = open(os.path.join(root, rel), errors="replace").read()
            graph[rel] = [(k, inc, resolve(root, rel, k, inc, build)) for k, inc in INCLUDE.findall(strip(text, keep_pp=True))]
    return graph


def check_includes(root, build):
    bad, flagged = [], set()
    graph = include_graph(root, build)
    for rel, incs in sorted(graph.items()):
        for kind, inc, target in incs:
            if target == rel:
                bad.append(f"{rel} includes itself ({inc})")
                flagged.add(rel)
                continue
            why = include_rule(rel, target, kind, build, inc)
            if why:
                bad.append(f"{rel} includes {inc}: {why}")
                flagged.add(rel)
    bad += check_depfiles(root, build, flagged)
    return bad, graph


def check_depfiles(root, build, flagged):
    """Every header an engine object read (its .d file) must be allowed to it; reported only where
    no include line on the way was (what the scan above missed: a macro include, say)."""
    bad = []
    for orel, opath in objects(build):
        src = orel[:-2] + ".c"
        dpath = opath[:-2] + ".d"
        if src.split("/")[0] not in ENGINE or not unit_of(src) or not os.path.exists(dpath):
            continue
        text = open(dpath, errors="replace").read().replace("\\\n", " ")
        first = text.split("\n", 1)[0]
        deps = first.split(":", 1)[1].split() if ":" in first else []
        heads = []
        for d in deps:
            p = os.path.relpath(os.path.normpath(os.path.join(root, d)), root)
            if p.endswith(".h") and not p.startswith(".."):
                heads.append(p)
        if src in flagged or any(h in flagged for h in heads):
            continue
        for h in heads:
            why = include_rule(src, h, '"', build)
            if why:
                bad.append(f"{src} reads {h} through its includes: {why}")
    return bad


# --- types ---------------------------------------------------------------------------------------

def strip(text, keep_pp=False):
    """text without comments; unless keep_pp (for the #include lines), also without string and
    char literals (kept as "" and 0) and preprocessor lines."""
    out = re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                 lambda m: (m.group(0) if keep_pp else '""') if m.group(0)[0] == '"' else ("\n" * m.group(0).count("\n") if m.group(0)[0] == "/" else "0"),
                 text, flags=re.S)
    if keep_pp:
        return out
    return re.sub(r'^\s*#(?:[^\n]*\\\n)*[^\n]*', "", out, flags=re.M)


TYPEDEF = re.compile(r'\btypedef\b')
TAGBODY = re.compile(r'\b(struct|union|enum)\s+(\w+)\s*\{')
IDENT = re.compile(r'\b[A-Za-z_]\w*\b')


def typedefs(text):
    """(name, tag or None, has a body) of each typedef in stripped text."""
    found = []
    for m in TYPEDEF.finditer(text):
        depth, i = 0, m.end()
        while i < len(text):
            c = text[i]
            if c in "({[":
                depth += 1
            elif c in ")}]":
                depth -= 1
            elif c == ";" and depth == 0:
                break
            i += 1
        decl = text[m.end():i]
        alias = re.fullmatch(r'\s*(?:const\s+)?(struct|union|enum)\s+(\w+)\s+(\w+)\s*', decl)
        if alias:
            found.append((alias.group(3), alias.group(2), False))
            continue
        if "}" in decl:
            names = IDENT.findall(decl[decl.rfind("}") + 1:])
            tag = re.match(r'\s*(?:struct|union|enum)\s+(\w+)\s*\{', decl)
            if names:
                found.append((names[-1], tag.group(1) if tag else None, True))
            continue
        fnptr = re.search(r'\(\s*\*\s*(\w+)\s*\)', decl)
        names = [fnptr.group(1)] if fnptr else IDENT.findall(decl.split("[")[0])
        if names:
            found.append((names[-1], None, True))
    return found


def type_owners(root, files):
    """{typedef name: defining file}: where its struct's body (or the typedef itself) is; names
    declared in include/ are public and left out."""
    bodies, named, public = {}, {}, set()
    texts = {rel: strip(open(os.path.join(root, rel), errors="replace").read()) for rel in files}
    for rel, t in texts.items():
        for m in TAGBODY.finditer(t):
            bodies.setdefault(m.group(2), rel)
    for rel, t in texts.items():
        if not rel.endswith(".h") or rel.split("/")[0] not in ENGINE + [PUBLIC]:
            continue  # a type a .c file defines is its own; daemon/ and clients/ types are checked by their includes
        for name, tag, body in typedefs(t):
            if rel.startswith(PUBLIC + "/"):
                public.add(name)
            elif body:
                named.setdefault(name, rel)
            elif tag in bodies:
                named.setdefault(name, bodies[tag])
    owners = {n: f for n, f in named.items() if n not in public and not f.startswith(PUBLIC + "/")}
    return owners, texts


def check_types(root):
    files = [f for top in ENGINE + [PUBLIC] + PUBLIC_ONLY for f in source_files(root, top)]
    owners, texts = type_owners(root, files)
    bad = []
    for rel in sorted(files):
        top = rel.split("/")[0]
        if top == PUBLIC:
            continue
        mine = unit_of(rel)
        seen = set()
        for name in IDENT.findall(re.sub(r'\b(?:struct|union|enum)\s+\w+', " ", texts[rel])):
            own = owners.get(name)
            if not own or name in seen or own == rel:
                continue
            seen.add(name)
            if top in PUBLIC_ONLY:
                if own.split("/")[0] in ENGINE:
                    bad.append(f"{rel} names {name}, an engine-internal type ({own})")
                continue
            theirs = unit_of(own)
            if mine and theirs and (theirs[0] > mine[0] or (theirs[0] == mine[0] and theirs[1] != mine[1])):
                why = "a layer above" if theirs[0] > mine[0] else "another unit of its layer"
                bad.append(f"{rel} names {name} of {own} ({why}: {theirs[1]})")
    return bad


# --- circles -------------------------------------------------------------------------------------

def file_graph(root, build, folder, graph, extra_objs=()):
    """{file: {file: why}} between the files of folder (basename without extension)."""
    def node(rel):
        """A .c and its .h are one file; a table (verbs.def) is a file of its own."""
        base, ext = os.path.splitext(os.path.basename(rel))
        return base if ext in (".c", ".h", ".o") else base + ext
    edges = {}
    for rel in source_files(root, folder):
        if os.path.dirname(rel) == folder:
            edges.setdefault(node(rel), {})
    objs = [(r, p) for r, p in objects(build) if os.path.dirname(r) == folder] + list(extra_objs)
    if edges and not objs:
        sys.exit(f"layers: no objects of {folder}/ under {build} (build first)")
    owner, uses = {}, {}
    for rel, path in objs:
        d, u = nm(path)
        uses[node(rel)] = u
        for s in d:
            owner[s] = node(rel)
    for a, used in uses.items():
        for s in sorted(used):
            b = owner.get(s)
            if b and b != a:
                edges.setdefault(a, {}).setdefault(b, f"uses {s}")
    for rel, incs in graph.items():
        if os.path.dirname(rel) != folder:
            continue
        for _, inc, target in incs:
            if target and os.path.dirname(target) == folder and node(target) != node(rel):
                edges.setdefault(node(rel), {}).setdefault(node(target), f"includes {os.path.basename(target)}")
    for a in list(edges):
        for b in edges[a]:
            edges.setdefault(b, {})
    return edges


def sccs(edges):
    """Strongly connected components with more than one file (Tarjan, iterative)."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = n[0]; n[0] += 1; stack.append(start); on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n[0]; n[0] += 1; stack.append(w); on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def cycles(edges):
    """Cycles that between them cover every edge of every circle, shortest first: for each edge
    a -> b not yet on a reported cycle, b's shortest way back to a."""
    found = []
    for comp in sccs(edges):
        inside = set(comp)
        covered = set()
        for a in comp:
            for b in sorted(edges[a]):
                if b not in inside or (a, b) in covered:
                    continue
                prev, queue = {b: None}, [b]
                for v in queue:
                    if v == a:
                        break
                    for w in sorted(edges[v]):
                        if w in inside and w not in prev:
                            prev[w] = v
                            queue.append(w)
                path, v = [], a
                while v is not None:
                    path.append(v)
                    v = prev[v]
                path = [a] + path[::-1]  # a -> b -> ... -> a
                for x, y in zip(path, path[1:]):
                    covered.add((x, y))
                found.append(path)
    return found


def check_circles(root, build, graph, folders=NO_CIRCLES):
    bad = []
    for folder in folders:
        edges = file_graph(root, build, folder, graph)
        for comp in sccs(edges):
            bad.append(f"{folder}/: {len(comp)} files in one circle: {', '.join(comp)}")
        for path in cycles(edges):
            steps = " ".join(f"-> {y} ({edges[x][y]})" for x, y in zip(path, path[1:]))
            bad.append(f"{folder}/ circle: {' -> '.join(path)}   [{path[0]} {steps}]")
    return bad


# --- self-test -----------------------------------------------------------------------------------

def copy_tree(dst):
    """A copy of the checked sources (not the build) under dst."""
    for top in ENGINE + [PUBLIC] + PUBLIC_ONLY:
        for rel in source_files(ROOT, top):
            os.makedirs(os.path.join(dst, os.path.dirname(rel)), exist_ok=True)
            shutil.copy(os.path.join(ROOT, rel), os.path.join(dst, rel))
    for f in ["engine/graph/ops.def", "include/tensord/errors.def"]:
        if os.path.exists(os.path.join(ROOT, f)):
            shutil.copy(os.path.join(ROOT, f), os.path.join(dst, f))


def plant(dst, rel, text):
    os.makedirs(os.path.join(dst, os.path.dirname(rel)), exist_ok=True)
    with open(os.path.join(dst, rel), "w") as f:
        f.write(text)


def fail(what):
    sys.exit(f"layers: self-test FAILED: {what}")


def self_test(build):
    """Plant one of each kind and prove it is reported."""
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
        fail("a backward call from engine/graph was not reported")
    print(f"layers: self-test: a backward call is caught ({hit[0]})")

    clients = "clients/zz.c"
    cases = [("protocol", '"', "message.h", True), ("engine", '"', "../engine/core/context.h", False),
             ("engine", '<', "engine/core/context.h", False), ("absent", '"', "nothere.h", False),
             ("daemon", '"', "../daemon/server.h", False)]
    for what, kind, inc, want in cases:
        target = resolve(ROOT, clients, kind, inc, build)
        if (include_rule(clients, target, kind, build, inc) is None) != want:
            fail(f"clients/ including {inc} ({what}) {'refused' if want else 'allowed'}")
    print("layers: self-test: clients/ may include protocol/ headers, never engine/ internals or daemon/")

    with tempfile.TemporaryDirectory() as tmp:
        copy_tree(tmp)
        before = set(check_includes(tmp, build)[0]) | set(check_types(tmp))
        plant(tmp, "engine/graph/zz_up.c", '#include "realize/realize.h"\nint zz_up;\n')
        plant(tmp, "engine/core/zz_low.h", '#ifndef ZZ_LOW_H\n#define ZZ_LOW_H\n#include "tensor/tensor.h"\n#endif\n')
        plant(tmp, "engine/core/zz_user.c", '#include "zz_low.h"\nint zz_user;\n')
        plant(tmp, "engine/core/zz_self.h", '#include "zz_self.h"\n')
        plant(tmp, "engine/util/zz_type.h", "typedef struct eng_kernel_ir eng_kernel_ir;\n"
                                             "int zz_type(const eng_kernel_ir *ir);\n")
        plant(tmp, "daemon/zz_peek.c", '#include "../engine/core/context.h"\n')
        after = (set(check_includes(tmp, build)[0]) | set(check_types(tmp))) - before
        want = [("an upward include in an engine folder", "engine/graph/zz_up.c includes realize/realize.h: a layer above"),
                ("an upward include from a lower header", "engine/core/zz_low.h includes tensor/tensor.h: a layer above"),
                ("a header including itself", "engine/core/zz_self.h includes itself"),
                ("a higher layer's type named in a lower one", "engine/util/zz_type.h names eng_kernel_ir of engine/codegen/kernel.h"),
                ("an engine header from the daemon", "daemon/zz_peek.c includes ../engine/core/context.h: only")]
        for what, line in want:
            hit = [b for b in after if b.startswith(line)]
            if not hit:
                fail(f"{what} was not reported (new reports: {sorted(after)})")
            print(f"layers: self-test: {what} is caught ({hit[0]})")
        if any(b.startswith("engine/core/zz_user.c") for b in after):
            fail("the lower header's user was blamed instead of the header")

    with tempfile.TemporaryDirectory() as tmp:
        # An object whose .d file says it read a higher header that no include line shows.
        os.makedirs(os.path.join(tmp, "engine/core"))
        open(os.path.join(tmp, "engine/core/zz_dep.o"), "w").close()
        with open(os.path.join(tmp, "engine/core/zz_dep.d"), "w") as f:
            f.write("build/engine/core/zz_dep.o: engine/core/zz_dep.c \\\n engine/tensor/tensor.h\n")
        hit = [b for b in check_depfiles(ROOT, tmp, set()) if b.startswith("engine/core/zz_dep.c reads engine/tensor/tensor.h")]
        if not hit:
            fail("a higher header in an object's .d file was not reported")
        print(f"layers: self-test: a higher header the compiler read is caught ({hit[0]})")

    with tempfile.TemporaryDirectory() as tmp:
        # A daemon of three files: a -> b (a symbol) -> c (an include) -> a (a symbol), d one way.
        files = {"daemon/zz_a.c": "int zz_b_fn(void);\nint zz_a_fn(void) { return zz_b_fn(); }\n",
                 "daemon/zz_b.h": "int zz_b_fn(void);\n",
                 "daemon/zz_b.c": '#include "zz_b.h"\n#include "zz_c.h"\nint zz_b_fn(void) { return 1; }\n',
                 "daemon/zz_c.h": "int zz_c_fn(void);\n",
                 "daemon/zz_c.c": "int zz_a_fn(void);\nint zz_c_fn(void) { return zz_a_fn(); }\n",
                 "daemon/zz_d.c": '#include "zz_b.h"\nint zz_d_fn(void) { return zz_b_fn(); }\n'}
        objs = []
        for rel, text in files.items():
            plant(tmp, rel, text)
        for rel in files:
            if rel.endswith(".c"):
                o = os.path.join(tmp, "build", rel[:-2] + ".o")
                os.makedirs(os.path.dirname(o), exist_ok=True)
                subprocess.run(["cc", "-c", os.path.join(tmp, rel), "-o", o], check=True)
        tbuild = os.path.join(tmp, "build")
        bad = check_circles(tmp, tbuild, include_graph(tmp, tbuild), ["daemon"])
        cyc = [b for b in bad if "circle: zz_a -> zz_b -> zz_c -> zz_a" in b]
        if not cyc or any("zz_d" in b for b in bad):
            fail(f"a daemon circle zz_a -> zz_b -> zz_c -> zz_a was not reported as such ({bad})")
        print(f"layers: self-test: a daemon circle is caught ({cyc[0].split('   ')[0]})")


def main():
    args = sys.argv[1:]
    selftest = "--self-test" in args
    args = [a for a in args if a != "--self-test"]
    if args and args[0] == "--circles":
        build = args[2] if len(args) > 2 else "build"
        _, graph = check_includes(ROOT, build)
        bad = check_circles(ROOT, build, graph, [args[1].rstrip("/")])
        print("\n".join(bad) or f"layers: no circle in {args[1]}")
        return
    build = args[0] if args else "build"
    if selftest:
        self_test(build)
    bad, nobj = check_symbols(build)
    inc, graph = check_includes(ROOT, build)
    bad += inc + check_types(ROOT)
    circles = check_circles(ROOT, build, graph)
    for b in bad + circles:
        print("layers: " + b)
    if bad or circles:
        sys.exit(f"layers: {len(bad)} backward dependencies, {sum('circle:' in c for c in circles)} daemon circles")
    print(f"layers: {nobj} objects in {len(LAYERS)} layers, every dependency points down; "
          f"no circle in {', '.join(f + '/' for f in NO_CIRCLES)}")


if __name__ == "__main__":
    main()

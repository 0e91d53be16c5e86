"""Walks the ONNX importer's op table (engine/onnx/optable.c) against the operator schemas of the
onnx package it runs under (tests/onnx/.venv: onnx 1.23.2), opset by opset over each row's range.

Fails when a row claims an opset at which the op does not exist, or lists an attribute that the
schema in effect at one of its opsets does not define (the importer would then take, without a
word, an attribute the model's opset gives no meaning to: DequantizeLinear's axis at opset 10-12).
The other direction holds by construction and is counted, not failed: an attribute the schema
defines and the row does not list is refused when a model sets it (graph.c's check_attrs), and an
input given to a node that its op function did not read is refused after the call (run_node).
Rows that take an attribute beyond the opsets that define it today are listed, op and attribute
a line, in the baseline (tests/onnx/optable-lenient.txt): a pair found and not listed fails, and
so does a listed pair no longer found (the list stays true as rows are split by opset).
Prints a summary line; with -v, each refused attribute and each schema revision a row spans;
--write BASELINE rewrites the baseline with the pairs found.
Usage: onnx-optable-check.py [-v] [--write] engine/onnx/optable.c tests/onnx/optable-lenient.txt"""
import re
import sys

import onnx.defs as D

LEGACY = {"consumed_inputs"}  # opsets < 6: an optimisation hint (optable.c's LEGACY), never an error
# a row: {"Name", since, until, function, attributes, domain}, the attributes string literals and
# macros of the file (#define NAME "..." or NAME "..." ...), concatenated
ROW = re.compile(r'^\s*\{"(\w+)",\s*(\d+),\s*(\d+|ANY),\s*\w+,\s*((?:"[^"]*"|[A-Z_][A-Z0-9_]*|\s)+),\s*(NULL|[A-Z_]+|"[^"]*")\}', re.M)
DEFINE = re.compile(r'^#define\s+([A-Z_][A-Z0-9_]*)\s+(.*?)\s*(?:/\*.*)?$', re.M)


def attrs_of(text, macros, depth=0):
    names = set()
    for tok in re.findall(r'"[^"]*"|[A-Z_][A-Z0-9_]*', text):
        if tok.startswith('"'):
            names |= {a for a in tok.strip('"').split(",") if a}
        elif tok in macros and depth < 8:
            names |= attrs_of(macros[tok], macros, depth + 1)
        else:
            raise SystemExit(f"onnx-optable-check: unknown macro {tok} in the attributes of a row")
    return names


def main():
    verbose, write = "-v" in sys.argv, "--write" in sys.argv
    path, base = [a for a in sys.argv[1:] if not a.startswith("-")][:2]
    src = open(path).read()
    macros = dict(DEFINE.findall(src))
    rows = ROW.findall(src)
    nrows = len(re.findall(r'^\s*\{"\w+",', src, re.M))
    if len(rows) != nrows:
        sys.exit(f"onnx-optable-check: read {len(rows)} of the {nrows} rows of {path}: the table's format changed")
    if len(rows) < 100:
        sys.exit(f"onnx-optable-check: only {len(rows)} rows read from {path}: the table's format changed")
    errors, refused, revisions, checked, lenient = [], 0, 0, 0, {}
    for name, since, until, attrs, dom in rows:
        d = macros.get(dom, dom) if dom != "NULL" else '""'
        domain = d.strip('"')
        latest = D.onnx_opset_version() if domain == "" else 1
        lo, hi = int(since), min(latest, 10**9 if until == "ANY" else int(until))
        listed = attrs_of(attrs, macros)
        prev = None
        for v in range(lo, hi + 1):
            try:
                s = D.get_schema(name, v, domain)
            except Exception:
                if v == lo:
                    errors.append(f"{name} (row {since}-{until}): no schema at opset {v}")
                break
            checked += 1
            known = set(s.attributes) | LEGACY
            for a in sorted(listed - known):
                if (name, a) not in lenient:
                    lenient[(name, a)] = f"from opset {v} (schema of opset {s.since_version})"
            if prev != s.since_version:
                for a in sorted(set(s.attributes) - listed):
                    refused += 1
                    if verbose:
                        print(f"refused: {name} opset {s.since_version} attribute '{a}'")
                if prev is not None:
                    revisions += 1
                    if verbose:
                        print(f"revision: {name} row {since}-{until} spans the schema of opset {s.since_version}")
                prev = s.since_version
    if write:
        with open(base, "w") as f:
            f.write("# Op table rows that take an attribute at opsets whose schema does not define it (a model\n"
                    "# giving it there is taken, not refused): op, attribute, where it starts; written by\n"
                    "# scripts/onnx-optable-check.py --write. Splitting the row by opset removes the line.\n")
            for (op, a), where in sorted(lenient.items()):
                f.write(f"{op} {a}  {where}\n")
    listed_base = set()
    for line in open(base):
        if line.strip() and not line.startswith("#"):
            listed_base.add(tuple(line.split()[:2]))
    for op, a in sorted(set(lenient) - listed_base):
        errors.append(f"{op} takes attribute '{a}' {lenient[(op, a)]}, which the schema does not define there (not in {base})")
    for op, a in sorted(listed_base - set(lenient)):
        errors.append(f"{base} lists {op} {a}, which the table no longer takes beyond its opsets: remove the line")
    for e in errors:
        print("onnx-optable-check:", e)
    print(f"onnx-optable-check: {len(rows)} rows, {checked} (row, opset) pairs against onnx's schemas: "
          f"{len(errors)} errors; {len(lenient)} attributes taken beyond their opsets (the baseline), "
          f"{refused} schema attributes refused by name, {revisions} schema revisions inside rows")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()

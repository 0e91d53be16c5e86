#!/usr/bin/env python3
"""config-table.py TENSORD: prints docs/USAGE.md's configuration table from `TENSORD --help`
(every key of daemon/config.def with its type, default, bounds and description), so the table
is regenerated rather than edited: scripts/config-table.py build/bin/tensord --write docs/USAGE.md;
--check docs/USAGE.md exits 1 when the file's table differs (make docs-check, in make check)."""
import re
import subprocess
import sys

help_text = subprocess.run([sys.argv[1], "--help"], capture_output=True, text=True).stdout
rows = ["| key | type | default | bounds | what it sets |", "|---|---|---|---|---|"]
lines = help_text.splitlines()
for i, line in enumerate(lines):
    m = re.match(r"^  --(\w+) <([^>]+)>  default (.*?)  \((.*)\)$", line)
    if not m:
        continue
    key, typ, default, bounds = m.groups()
    desc = lines[i + 1].strip() if i + 1 < len(lines) else ""
    bounds, desc = bounds.replace("|", "\\|"), desc.replace("|", "\\|")
    rows.append(f"| `{key}` | {typ} | `{default}` | {bounds} | {desc} |")
table = "\n".join(rows) + "\n"
if len(sys.argv) > 3 and sys.argv[2] in ("--write", "--check"):
    path = sys.argv[3]
    text = open(path).read()
    start = text.index("| key | type | default | bounds | what it sets |")
    end = text.index("\n\n", start) + 1
    if sys.argv[2] == "--check":
        if text[start:end] != table:
            sys.exit(f"{path}: its configuration table is not tensord --help's; run scripts/config-table.py {sys.argv[1]} --write {path}")
        print(f"{path}: the configuration table matches tensord --help ({len(rows) - 2} keys)")
    else:
        open(path, "w").write(text[:start] + table + text[end:])
else:
    sys.stdout.write(table)

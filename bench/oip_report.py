"""oip_report.py: the figures of bench/compare_oip.sh: wrk's output as oip_load.py's JSON line
(wrk), one line of a point for the log (brief), and the markdown tables with issue 27's ratios
and goals from the run's JSON lines (table).

  wrk --label L --model M -c N < wrk's output (--latency)
  brief < JSON lines
  table [--about FILE] RESULTS.jsonl

Usage: bench/.venv-kserve/bin/python bench/oip_report.py wrk|brief|table ..."""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys

UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6, "m": 6e7}


def us(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    return float(m.group(1)) * UNITS[m.group(2)] if m else float("nan")


def wrk(a) -> int:
    out = sys.stdin.read()
    line = {"label": a.label, "protocol": "wrk", "model": a.model, "concurrency": a.concurrency, "binary": True}
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+),", out)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    lat = re.search(r"Latency\s+(\S+)\s+(\S+)\s+(\S+)", out)
    if not (m and rps and lat):
        line.update(requests=0, errors=1, throughput=0.0, check="wrk failed", first_errors=[out[-500:]])
        print(json.dumps(line))
        return 1
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = (int(non2xx.group(1)) if non2xx else 0) + (sum(int(x) for x in sock.groups()) if sock else 0)
    line.update(requests=int(m.group(1)), errors=errors, throughput=float(rps.group(1)), max_us=us(lat.group(3)),
                check="status only" if not errors else "errors")
    if a.cpu_s is not None and line["requests"]:
        line["server_cpu_us"] = round(a.cpu_s * 1e6 / line["requests"], 1)  # per answer
    for q in ("50", "90", "99"):
        p = re.search(rf"^\s+{q}%\s+(\S+)", out, re.M)
        line[f"p{q}_us"] = us(p.group(1)) if p else float("nan")
    print(json.dumps(line))
    return 0


def brief(_a) -> int:
    for text in sys.stdin:
        r = json.loads(text)
        extra = f", {r['errors']} errors: {r.get('first_errors', [''])[0][:200]}" if r.get("errors") else ""
        print(f"  {r['label']:18s} c={r['concurrency']:<3d} {r['throughput']:9.1f}/s  p50 {r.get('p50_us', 0) / 1e3:8.3f} ms"
              f"  p99 {r.get('p99_us', 0) / 1e3:8.3f} ms  outputs {r.get('check', '?')}{extra}")
    return 0


def fmt(r: dict | None) -> str:
    if not r:
        return "not measured"
    if not r.get("requests"):
        return "no answer in the window" if not r.get("errors") else "failed"
    cpu = f", {r['server_cpu_us']:.0f} us CPU" if "server_cpu_us" in r else ""
    return f"{r['throughput']:,.0f}/s ({r['p50_us'] / 1e3:.2f} / {r['p99_us'] / 1e3:.2f}{cpu})"


def ratio(x: float | None, goal: float, more: bool = True) -> str:
    if x is None:
        return "n/a"
    ok = x >= goal if more else x <= goal
    return f"{x:.2f}x {'met' if ok else 'MISSED'}"


def table(a) -> int:
    rows = [json.loads(t) for t in open(a.results) if t.strip()]
    if a.about:
        print("\n".join(f"{t.rstrip()}  " for t in open(a.about)))
        print()
    goals: list[tuple[str, bool]] = []

    # the tiny model: medians over the rounds of each server's p50
    def p50s(label: str) -> list[float]:
        return [r["p50_us"] for r in rows if r["label"] == label and r.get("requests")]
    tiny = [("HTTP, tritonclient (Python)", "tiny tensord http", "tiny floor http"),
            ("HTTP, wrk (C)", "tiny tensord wrk", "tiny floor wrk"),
            ("gRPC unary, tritonclient (Python)", "tiny tensord grpc", "tiny floor grpc")]
    if any(p50s(t[1]) for t in tiny):
        print("Tiny model (examples/models/mlp.json), concurrency 1, binary data: p50 in microseconds, "
              "median of the rounds (each round's p50)")
        print()
        print("| protocol, client | tensord p50 | floor p50 (h2o; gRPC's C core) | tensord / floor (goal <= 1.5x) | server CPU per answer, "
              "tensord / floor | rounds (p50s: tensord / floor) |")
        print("|---|---:|---:|---:|---:|---|")
        for name, t, f in tiny:
            pt, pf = p50s(t), p50s(f)
            if not pt or not pf:
                continue
            x = statistics.median(pt) / statistics.median(pf)
            goals.append((f"tiny model p50 within 1.5x of its library's floor ({name})", x <= 1.5))
            ct = [r["server_cpu_us"] for r in rows if r["label"] == t and "server_cpu_us" in r]
            cf = [r["server_cpu_us"] for r in rows if r["label"] == f and "server_cpu_us" in r]
            cpu = (f"{statistics.median(ct):.1f} / {statistics.median(cf):.1f} us" if ct and cf else "")
            print(f"| {name} | {statistics.median(pt):.1f} | {statistics.median(pf):.1f} | {ratio(x, 1.5, more=False)} | "
                  f"{cpu} | {len(pt)} ({', '.join(f'{p:.0f}' for p in pt)} / {', '.join(f'{p:.0f}' for p in pf)}) |")
        print()

    pts = {(r["label"], r["model"], r["concurrency"]): r for r in rows if not r["label"].startswith("tiny ")}
    models = list(dict.fromkeys(k[1] for k in pts))
    levels = sorted({k[2] for k in pts})
    has_grpc = any(k[0] == "tensord grpc" for k in pts)
    print("ONNX models: throughput (answers per second) and, in brackets, p50 / p99 latency in ms; "
          "ratios against KServe: tensord's throughput over KServe's, KServe's p99 over tensord's")
    print()
    print("| model | c | tensord HTTP | tensord gRPC | tensord TSD1 | wrk on tensord HTTP | KServe HTTP | KServe HTTP, JSON "
          "| KServe gRPC | HTTP vs KServe HTTP (its faster form): req/s, p99 (goal >= 5x each) "
          "| gRPC vs KServe gRPC (goal >= 5x each) | HTTP / TSD1 req/s (goal >= 0.8x at c=32) | gRPC / TSD1 "
          "| outputs (max abs diff vs onnxruntime) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|---|")
    for m in models:
        for c in levels:
            g = {s: pts.get((s, m, c)) for s in ("tensord http", "tensord grpc", "tensord tsd", "tensord wrk",
                                                 "kserve http", "kserve http json", "kserve grpc")}
            if not any(g.values()):
                continue

            def vs(ours: str, *peers: str) -> str:
                """ours against the peer's fastest form (by throughput) of those measured."""
                o = g[ours]
                got = [g[p] for p in peers if g[p] and g[p].get("requests")]
                if not (o and o.get("requests") and got):
                    return "not measured"
                p = max(got, key=lambda r: r["throughput"])
                t, l = o["throughput"] / p["throughput"], p["p99_us"] / o["p99_us"]
                goals.append((f"{m} c={c} {ours} >= 5x {p['label']} throughput and p99 <= 1/5", t >= 5 and l >= 5))
                form = f" (vs {'JSON' if not p.get('binary', True) else 'binary'})" if len(peers) > 1 else ""
                return f"{ratio(t, 5)}, {ratio(l, 5)}{form}"

            def tsd(ours: str) -> str:
                o, p = g[ours], g["tensord tsd"]
                if not (o and p and o.get("requests") and p.get("requests")):
                    return "not measured"
                x = o["throughput"] / p["throughput"]
                if c == 32:
                    goals.append((f"{m} c=32 {ours} >= 0.8x TSD1 throughput", x >= 0.8))
                    return ratio(x, 0.8)
                return f"{x:.2f}x"

            checks = []
            for s in ("tensord http", "tensord grpc", "tensord tsd", "kserve http", "kserve http json", "kserve grpc"):
                r = g[s]
                if r and r.get("requests") and r.get("check") not in (None, "skipped"):
                    d = r.get("max_abs_diff")
                    checks.append(f"{s.split()[0][0].upper()}{' '.join(s.split()[1:])}: {r['check']}"
                                  + (f" {d:.0e}" if isinstance(d, float) else ""))
                    goals.append((f"{m} c={c} {s} outputs within 1e-4", r["check"] == "ok"))
            print(f"| {m} | {c} | {fmt(g['tensord http'])} | {fmt(g['tensord grpc']) if has_grpc else 'no gRPC frontend'} "
                  f"| {fmt(g['tensord tsd'])} | {fmt(g['tensord wrk'])} | {fmt(g['kserve http'])} "
                  f"| {fmt(g['kserve http json'])} | {fmt(g['kserve grpc'])} "
                  f"| {vs('tensord http', 'kserve http', 'kserve http json')} | {vs('tensord grpc', 'kserve grpc') if has_grpc else 'not measured'} "
                  f"| {tsd('tensord http')} | {tsd('tensord grpc') if has_grpc else 'not measured'} | {'; '.join(checks)} |")
    print()
    met = sum(ok for _, ok in goals)
    print(f"Goals: {met} of {len(goals)} met" + ("" if has_grpc else "; tensord's gRPC goals not measured (no gRPC frontend)"))
    for what, ok in goals:
        if not ok:
            print(f"  missed: {what}")
    errs = [r for r in rows if r.get("errors")]
    for r in errs:
        print(f"  errors: {r['label']} {r['model']} c={r['concurrency']}: {r['errors']} ({r.get('first_errors', [''])[0][:200]})")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("wrk")
    w.add_argument("--label", required=True)
    w.add_argument("--model", required=True)
    w.add_argument("-c", "--concurrency", type=int, required=True)
    w.add_argument("--cpu-s", type=float, help="the server's CPU seconds over the run")
    sub.add_parser("brief")
    t = sub.add_parser("table")
    t.add_argument("--about")
    t.add_argument("results")
    a = ap.parse_args()
    return {"wrk": wrk, "brief": brief, "table": table}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())

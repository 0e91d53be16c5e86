"""oip_load.py: one load generator for every server of bench/compare_oip.sh: tensord over the Open
Inference Protocol (HTTP or gRPC) and over TSD1, KServe's ModelServer, the h2o floor. The OIP
servers are driven by Triton's own client (tritonclient.http / tritonclient.grpc: the same client
for tensord and KServe), TSD1 by the tensord package of this checkout (clients/python).

N clients, each with its own connection, in a closed loop (a request, its answer, the next),
spread over P processes of N/P threads (one process holds the GIL for the client's Python; -P
lets the client use more than one core). Every client warms up for --warmup seconds, then the
answers that come in the next --duration seconds (or the first --count per client) are timed
(throughput: those answers over the window's length; latency: each from its request's start).
Prints one JSON line: throughput (answers per second), p50/p90/p99/max latency in microseconds,
errors, and the check: each client's first timed answer against the reference outputs (max
abs difference <= 1e-4).

  prep SITE DIR: for each model of DIR (bench_onnx_models -o: models.txt, MODEL.load.json,
      MODEL-b1-in<i>.npy) writes DIR/req/MODEL/in/<input>.npy (the inputs a client sends: the
      model.load's constants left out), ref/<output>.npy (onnxruntime on the same inputs,
      bench/ort_models.py's session) and body.bin + body.hlen (the binary infer request for wrk).
  grpc-answer --url U --model M --req REQ [--priority P] FILE: the server's serialized
      ModelInferResponse to that request (the gRPC floor's fixed answer).
  body REQ [--priority P]: only the binary request (body.bin, body.hlen) of REQ/in/ (the tiny model's).
  run --url U --protocol http|grpc|tsd --model M --req DIR/req/M [-c N] [-P P] [-d S | -n K]
      [--warmup S] [--json] [--label L]

Usage: bench/.venv-kserve/bin/python bench/oip_load.py prep|run ..."""

from __future__ import annotations

import argparse
import glob
import json
import multiprocessing as mp
import os
import sys
import threading
import time
from urllib.parse import quote, unquote

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TOL = 1e-4


def read_dir(d: str) -> dict[str, np.ndarray]:
    """{tensor name: array} of D/<name, %-quoted>.npy."""
    return {unquote(os.path.basename(p)[:-4]): np.load(p) for p in sorted(glob.glob(os.path.join(d, "*.npy")))}


def save(d: str, name: str, v: np.ndarray) -> None:
    np.save(os.path.join(d, quote(name, safe="") + ".npy"), v)


def prep(site: str, out_dir: str) -> None:
    sys.path.insert(0, HERE)
    import ort_models

    for name, rel in ort_models.models(out_dir):
        sess = ort_models.session(os.path.join(site, rel))
        consts = ort_models.load_spec(out_dir, name).get("constants", {})
        prefix = dict(ort_models.runs(out_dir, name))[1]
        feed = ort_models.feed(sess, prefix)
        ref = sess.run(None, feed)
        base = os.path.join(out_dir, "req", name)
        os.makedirs(os.path.join(base, "in"), exist_ok=True)
        os.makedirs(os.path.join(base, "ref"), exist_ok=True)
        sent = {k: v for k, v in feed.items() if k not in consts}
        for k, v in sent.items():
            save(os.path.join(base, "in"), k, v)
        for meta, v in zip(sess.get_outputs(), ref):
            save(os.path.join(base, "ref"), meta.name, v)
        n = body(base)
        print(f"prep {name}: inputs {', '.join(f'{k}{list(v.shape)}' for k, v in sent.items())}; "
              f"constants {consts or 'none'}; outputs {', '.join(m.name for m in sess.get_outputs())}; "
              f"binary request {n} bytes")


def body(base: str, priority: int = 0) -> int:
    """Writes BASE/body.bin and body.hlen: the binary infer request of BASE/in/ (all outputs
    asked as binary data; Triton's priority when not 0), as tritonclient sends it; returns its
    size."""
    import tritonclient.http as httpclient
    from tritonclient.utils import np_to_triton_dtype

    ins = []
    for k, v in read_dir(os.path.join(base, "in")).items():
        i = httpclient.InferInput(k, list(v.shape), np_to_triton_dtype(v.dtype))
        i.set_data_from_numpy(v, binary_data=True)
        ins.append(i)
    b, hlen = httpclient.InferenceServerClient.generate_request_body(ins, priority=priority)
    with open(os.path.join(base, "body.bin"), "wb") as f:
        f.write(b)
    with open(os.path.join(base, "body.hlen"), "w") as f:
        f.write(f"{hlen if hlen is not None else len(b)}\n")
    return len(b)


def grpc_answer(a) -> int:
    """Writes the server's ModelInferResponse to REQ/in/'s request, serialized (bench_oip_grpc_floor's
    fixed answer); returns its size."""
    import tritonclient.grpc as gc
    from tritonclient.utils import np_to_triton_dtype

    c = gc.InferenceServerClient(url=a.url)
    ins = []
    for k, v in read_dir(os.path.join(a.req, "in")).items():
        i = gc.InferInput(k, list(v.shape), np_to_triton_dtype(v.dtype))
        i.set_data_from_numpy(v)
        ins.append(i)
    b = c.infer(a.model, ins, priority=a.priority).get_response().SerializeToString()
    c.close()
    with open(a.out, "wb") as f:
        f.write(b)
    return len(b)


# ---- one client ----

def make_caller(protocol: str, url: str, model: str, inputs: dict[str, np.ndarray], binary: bool, priority: int):
    """A function that sends one request and returns {output: array}, and one that closes its
    connection (each caller its own). priority: Triton's (0 the default, 1 the highest), for
    TSD1 tensord's level of the same (1 realtime, 3 and more bulk: docs/PROTOCOL.md)."""
    if protocol == "tsd":
        import tensord  # clients/python (on sys.path: main)
        c = tensord.Client(url)
        level = "realtime" if priority == 1 else "bulk" if priority >= 3 else None
        return lambda: c.infer(model, inputs, priority=level), c.close
    from tritonclient.utils import np_to_triton_dtype
    if protocol == "http":
        import tritonclient.http as tc
        if NODELAY[0]:
            nodelay()
    elif protocol == "grpc":
        import tritonclient.grpc as tc
    else:
        raise SystemExit(f"oip_load: protocol {protocol}: http, grpc or tsd")
    c = tc.InferenceServerClient(url=url)
    ins = []
    for k, v in inputs.items():
        i = tc.InferInput(k, list(v.shape), np_to_triton_dtype(v.dtype))
        if protocol == "http":
            i.set_data_from_numpy(v, binary_data=binary)
        else:
            i.set_data_from_numpy(v)
        ins.append(i)
    outs, hdrs = None, None
    if protocol == "http" and not binary:  # JSON answers too (outputs=None asks for binary ones)
        outs = [tc.InferRequestedOutput(k, binary_data=False) for k in OUTPUT_NAMES]
        hdrs = {"Content-Type": "application/json"}  # KServe reads a body without it as bytes

    def call():
        r = c.infer(model, ins, outputs=outs, priority=priority, headers=hdrs)
        resp = r.get_response()
        names = [o["name"] for o in resp["outputs"]] if isinstance(resp, dict) else [o.name for o in resp.outputs]
        return {n: r.as_numpy(n) for n in names}
    return call, c.close


OUTPUT_NAMES: list[str] = []
NODELAY = [True]


def nodelay() -> None:
    """tritonclient.http's sockets (geventhttpclient's pool) with TCP_NODELAY, as wrk's and curl's
    (a precaution: with Nagle's algorithm the end of a body past one segment may wait for the
    server's ACK; no difference was seen on ppocr-cls's 110 KB requests, 2026-12-03)."""
    import socket
    from geventhttpclient.connectionpool import ConnectionPool
    ConnectionPool.after_connect = lambda self, sock: sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def check(got: dict, ref: dict[str, np.ndarray]) -> float:
    """The largest abs difference of got's outputs from ref's (inf: one missing or misshapen)."""
    worst = 0.0
    for k, r in ref.items():
        g = got.get(k)
        if g is None:
            return float("inf")
        g = np.asarray(g)
        if g.shape != r.shape:
            return float("inf")
        worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - r.astype(np.float64)))) if r.size else 0.0)
    return worst


def client_loop(a, inputs, ref, go_at, out, errs):
    """One closed-loop client: warm-up, then timed requests; appends (latencies us, worst diff, errors)."""
    try:
        call, close = make_caller(a.protocol, a.url, a.model, inputs, not a.json, a.priority)
    except Exception as e:  # noqa: BLE001
        errs.append(f"connect: {e}")
        out.append(([], None, 1, None, None))
        return
    lat, worst, nerr, first, t_first, t_last = [], None, 0, True, None, None
    while time.monotonic() < go_at[0]:
        time.sleep(0.001)
    t_warm = go_at[0] + a.warmup
    t_end = t_warm + a.duration if a.count == 0 else float("inf")
    try:
        while True:
            t0 = time.perf_counter_ns()
            now = time.monotonic()
            if now >= t_end or (a.count and len(lat) >= a.count):
                break
            try:
                got = call()
            except Exception as e:  # noqa: BLE001
                nerr += 1
                if len(errs) < 5:
                    errs.append(str(e)[:300])
                if nerr > 100 and not lat:
                    break
                continue
            t1 = time.perf_counter_ns()
            if t_warm <= time.monotonic() <= t_end:  # the answers that come in the window
                lat.append((t1 - t0) / 1e3)
                t_first = t0 if t_first is None else t_first
                t_last = t1
                if first and ref:
                    worst, first = check(got, ref), False
    finally:
        close()
    out.append((lat, worst, nerr, t_first, t_last))


def proc_main(a, threads, go_at_q, ready_q, result_q):
    inputs = read_dir(os.path.join(a.req, "in")) if a.req else {}
    ref = read_dir(os.path.join(a.req, "ref")) if a.req and a.check else {}
    OUTPUT_NAMES[:] = list(read_dir(os.path.join(a.req, "ref")).keys()) if a.req else []
    NODELAY[0] = a.nodelay
    out, errs, go_at = [], [], [0.0]
    ready_q.put(1)
    go_at[0] = go_at_q.get()
    ts = [threading.Thread(target=client_loop, args=(a, inputs, ref, go_at, out, errs)) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    lat = [x for o in out for x in o[0]]
    worsts = [o[1] for o in out if o[1] is not None]
    firsts = [o[3] for o in out if o[3] is not None]
    lasts = [o[4] for o in out if o[4] is not None]
    result_q.put((lat, max(worsts) if worsts else None, sum(o[2] for o in out), errs,
                  min(firsts) if firsts else None, max(lasts) if lasts else None))


def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def pct(s: list[float], q: float) -> float:
    return s[min(len(s) - 1, int(q * len(s)))] if s else 0.0


def run(a) -> int:
    procs = max(1, min(a.procs or min(a.concurrency, os.cpu_count() or 1), a.concurrency))
    ctx = mp.get_context("fork")
    go_qs = [ctx.Queue() for _ in range(procs)]
    ready_q, result_q = ctx.Queue(), ctx.Queue()
    per = [a.concurrency // procs + (i < a.concurrency % procs) for i in range(procs)]
    ps = [ctx.Process(target=proc_main, args=(a, per[i], go_qs[i], ready_q, result_q)) for i in range(procs)]
    for p in ps:
        p.start()
    for _ in ps:
        ready_q.get()
    go_at = time.monotonic() + 0.2  # the threads' clients connect meanwhile
    for q in go_qs:
        q.put(go_at)
    cpu_s = None
    if a.server_pid and not a.count:  # the server's CPU over the window (user and system)
        time.sleep(max(0.0, go_at + a.warmup - time.monotonic()))
        c0 = proc_cpu_s(a.server_pid)
        time.sleep(max(0.0, go_at + a.warmup + a.duration - time.monotonic()))
        cpu_s = proc_cpu_s(a.server_pid) - c0
    res = [result_q.get() for _ in ps]
    for p in ps:
        p.join()
    lat = sorted(x for r in res for x in r[0])
    worsts = [r[1] for r in res if r[1] is not None]
    errs = [e for r in res for e in r[3]]
    nerr = sum(r[2] for r in res)
    secs = a.duration
    if a.count:  # a count per client: from the first timed request's start to the last's end
        firsts = [r[4] for r in res if r[4] is not None]
        lasts = [r[5] for r in res if r[5] is not None]
        secs = (max(lasts) - min(firsts)) / 1e9 if firsts else 0.0
    worst = max(worsts) if worsts else None
    line = {
        "label": a.label or f"{a.protocol} {a.model}",
        "protocol": a.protocol, "model": a.model, "url": a.url, "concurrency": a.concurrency, "procs": procs,
        "binary": not a.json, "priority": a.priority, "nodelay": a.nodelay, "duration_s": round(secs, 3), "requests": len(lat), "errors": nerr,
        "throughput": round(len(lat) / secs, 1) if secs else 0.0,
        "p50_us": round(pct(lat, 0.50), 1), "p90_us": round(pct(lat, 0.90), 1),
        "p99_us": round(pct(lat, 0.99), 1), "max_us": round(lat[-1], 1) if lat else 0.0,
        "check": "skipped" if not a.check or not os.path.isdir(os.path.join(a.req or "", "ref")) else
        ("ok" if worst is not None and worst <= TOL else "MISMATCH" if worst is not None else "none"),
        "max_abs_diff": worst,
    }
    if cpu_s is not None and lat:
        line["server_cpu_us"] = round(cpu_s * 1e6 / len(lat), 1)  # per answer
    if errs:
        line["first_errors"] = errs[:3]
    print(json.dumps(line), flush=True)
    return 0 if lat and not nerr and line["check"] in ("ok", "skipped") else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prep")
    p.add_argument("site")
    p.add_argument("dir")
    r = sub.add_parser("run")
    r.add_argument("--url", required=True, help="host:port for http and grpc, unix://PATH for tsd")
    r.add_argument("--protocol", required=True, choices=["http", "grpc", "tsd"])
    r.add_argument("--model", required=True)
    r.add_argument("--req", help="DIR/req/MODEL: in/ (the inputs), ref/ (the reference outputs)")
    r.add_argument("-c", "--concurrency", type=int, default=1)
    r.add_argument("-P", "--procs", type=int, default=0, help="client processes (default: min(N, CPUs))")
    r.add_argument("-d", "--duration", type=float, default=3.0, help="timed seconds after the warm-up")
    r.add_argument("-n", "--count", type=int, default=0, help="timed requests per client instead of a duration")
    r.add_argument("--warmup", type=float, default=1.0)
    r.add_argument("--json", action="store_true", help="JSON tensors (http) instead of binary data")
    r.add_argument("--no-check", dest="check", action="store_false")
    r.add_argument("--no-nodelay", dest="nodelay", action="store_false",
                   help="http: leave Nagle's algorithm on in the client's sockets (tritonclient's default)")
    r.add_argument("--priority", type=int, default=0, help="Triton's request priority (1: tensord's realtime)")
    r.add_argument("--server-pid", type=int, default=0, help="the server's process: its CPU per answer")
    r.add_argument("--label", default="")
    g = sub.add_parser("grpc-answer")
    g.add_argument("--url", required=True)
    g.add_argument("--model", required=True)
    g.add_argument("--req", required=True)
    g.add_argument("--priority", type=int, default=0)
    g.add_argument("out")
    b = sub.add_parser("body")
    b.add_argument("req")
    b.add_argument("--priority", type=int, default=0)
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(HERE, "..", "clients", "python"))
    if a.cmd == "grpc-answer":
        print(f"grpc-answer {a.out}: {grpc_answer(a)} bytes")
        return 0
    if a.cmd == "body":
        print(f"body {a.req}: {body(a.req, a.priority)} bytes")
        return 0
    if a.cmd == "prep":
        prep(a.site, a.dir)
        return 0
    return run(a)


if __name__ == "__main__":
    sys.exit(main())

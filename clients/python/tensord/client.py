"""client.py: Client, a connection to the tensord daemon over the C client library: one method
per verb (docs/PROTOCOL.md, "Verbs"), tensors in and out as numpy arrays or Tensor objects."""

from __future__ import annotations

import ctypes
import json
import os
import threading
from typing import Any, Mapping

from . import _lib
from ._numpy import np as _np
from .convert import from_wire, to_wire
from .errors import TensordError, error_for
from .graph import Graph
from .region import Region, input_ref, outputs_from
from .tensor import Tensor

PROTOCOL_VERSION = 1  # TSD_PROTOCOL_VERSION
DEFAULT_TIMEOUT_MS = 60000

Tensors = Mapping[str, Any]


class Reply:
    """A successful reply: header (the JSON object less "tensors") and tensors (name -> value)."""

    __slots__ = ("header", "tensors")

    def __init__(self, header: dict[str, Any], tensors: dict[str, Any]):
        self.header, self.tensors = header, tensors

    def __repr__(self) -> str:
        return f"Reply({self.header!r}, tensors={list(self.tensors)})"


def _graph_dict(graph: Graph | Mapping[str, Any]) -> dict[str, Any]:
    return graph.to_dict() if isinstance(graph, Graph) else dict(graph)


def _merge(base: Mapping[str, Any] | None, **extra: Any) -> dict[str, Any] | None:
    out = dict(base or {})
    out.update({k: v for k, v in extra.items() if v is not None})
    return out or None


SEQUENCE_ID_MAX = 2**53  # an integer sequence_id is in [1, 2^53]
SEQUENCE_NAME_MAX = 128  # a string one has 1 to 128 bytes (UTF-8)


def _sequence_fields(sequence_id: int | str | None, start: bool, end: bool, state: bool) -> dict[str, Any]:
    """The infer header's sequence fields (docs/PROTOCOL.md, "Sequences"), checked here: only
    those that are set, none without a sequence_id."""
    flags = {"sequence_start": start, "sequence_end": end, "sequence_state": state}
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise TypeError(f"{name}: True or False, not {type(value).__name__}")
    if sequence_id is None:
        if start or end or state:
            raise ValueError("sequence_start, sequence_end, sequence_state: need a sequence_id")
        return {}
    if isinstance(sequence_id, bool) or not isinstance(sequence_id, (int, str)):
        raise TypeError(f"sequence_id: an int or a str, not {type(sequence_id).__name__}")
    if isinstance(sequence_id, int) and not 1 <= sequence_id <= SEQUENCE_ID_MAX:
        raise ValueError(f"sequence_id: an integer in [1, 2^53], not {sequence_id}")
    if isinstance(sequence_id, str) and not 1 <= len(sequence_id.encode()) <= SEQUENCE_NAME_MAX:
        raise ValueError(f"sequence_id: a string of 1 to {SEQUENCE_NAME_MAX} bytes (UTF-8), "
                         f"not {len(sequence_id.encode())}")
    out: dict[str, Any] = {"sequence_id": sequence_id}
    out.update({k: True for k, v in flags.items() if v})
    return out


def _sequence_spec(sequence: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if sequence is not None and not isinstance(sequence, Mapping):
        raise TypeError(f"sequence: a dict (state, max_sequences, ...), not {type(sequence).__name__}")
    return dict(sequence) if sequence is not None else None


class Client:
    """A connection to tensord (one client of the C library: a unix socket, or an nng socket).

    url: "unix:///run/tensord/tensord.sock" (the local transport), or an nng address
    ("ipc:///run/tensord/tensord-nng.sock", "tcp://127.0.0.1:7070"); None: the C library's
    default (TENSORD_URL, else unix://$XDG_RUNTIME_DIR/tensord/tensord.sock, else
    unix:///run/tensord/tensord.sock). timeout_ms bounds each send and each reply (<= 0: forever).
    tcp:// with a token: the C library reads TENSORD_TOKEN_FILE (else TENSORD_TOKEN) from the
    environment when the client opens (set os.environ first) and sends it with every request.
    use_numpy: return numpy arrays (default: when numpy can be imported) or Tensor objects.

    Threads: a Client may be shared; its calls are serialised by a lock (one request in flight
    at a time, the library's contract). For requests in parallel, open one Client per thread:
    the C calls release the GIL, so they run concurrently.
    """

    def __init__(self, url: str | None = None, timeout_ms: int = DEFAULT_TIMEOUT_MS, *,
                 use_numpy: bool | None = None):
        self._lib = _lib.library()
        self.url = url if url is not None else _lib.default_url()
        self.timeout_ms = timeout_ms
        self.use_numpy = (_np is not None) if use_numpy is None else bool(use_numpy)
        if self.use_numpy and _np is None:
            raise TensordError("use_numpy=True but numpy cannot be imported", "bad_request")
        self._lock = threading.Lock()
        self._regions: list[Region] = []
        err = ctypes.create_string_buffer(512)
        self._c: int | None = self._lib.tsd_client_open(self.url.encode(), int(timeout_ms), err, len(err))
        if not self._c:
            raise TensordError(err.value.decode(errors="replace") or f"cannot connect to {self.url}")

    # ---- life cycle ----
    def close(self) -> None:
        """Closes the connection and its regions (idempotent)."""
        for region in self._regions:
            region.close()
        self._regions.clear()
        with self._lock:
            c, self._c = self._c, None
            if c:
                self._lib.tsd_client_close(c)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_c", None):
            self._lib.tsd_client_close(self._c)
            self._c = None

    # ---- the one call ----
    def call(self, verb: str, fields: Mapping[str, Any] | None = None, tensors: Tensors | None = None) -> Reply:
        """Sends {"verb": verb, **fields} with tensors and returns the reply; raises the
        TensordError subclass of its status when it is not ok (or no reply came)."""
        header = {k: v for k, v in (fields or {}).items() if v is not None}
        header["verb"] = verb
        text = json.dumps(header, allow_nan=False).encode()
        wires = [to_wire(name, value) for name, value in (tensors or {}).items()]
        array = (_lib.TsdTensor * len(wires))(*[w.struct for w in wires]) if wires else None
        lib, out = self._lib, ctypes.c_void_p()
        with self._lock:
            if not self._c:
                raise TensordError("the client is closed")
            status = lib.tsd_client_call_text(self._c, text, array, len(wires), ctypes.byref(out))
            if not out:
                msg = lib.tsd_client_error(self._c).decode(errors="replace")
                raise error_for(_lib.status_name(status), msg)
        try:
            return self._reply(out, status)
        finally:
            lib.tsd_reply_free(out)

    def _reply(self, r: ctypes.c_void_p, status: int) -> Reply:
        lib = self._lib
        raw = lib.tsd_reply_text(r)
        if not raw:
            raise TensordError("out of memory reading the reply", "out_of_memory")
        try:
            header = json.loads(ctypes.string_at(raw).decode())
        finally:
            lib.tsd_free(raw)
        if status != 0:
            msg = lib.tsd_reply_error(r)
            raise error_for(header.get("status") or _lib.status_name(status),
                            header.get("error") or (msg.decode(errors="replace") if msg else ""), header)
        header.pop("tensors", None)
        tensors = {}
        for i in range(lib.tsd_reply_ntensors(r)):
            t = lib.tsd_reply_tensor(r, i).contents
            tensors[t.name.decode()] = from_wire(t, self.use_numpy)
        return Reply(header, tensors)

    # ---- the verbs ----
    def hello(self, client: str = "tensord-python") -> dict[str, Any]:
        """hello: the daemon's protocol, version, devices and limits."""
        return self.call("hello", {"version": PROTOCOL_VERSION, "client": client}).header

    def health(self) -> dict[str, Any]:
        """health: ready, draining, models {ready, loading}, uptime_s."""
        return self.call("health").header

    def stats(self) -> dict[str, Any]:
        """stats: request counts, histograms, engine and per-model counters."""
        return self.call("stats").header

    def models(self) -> list[dict[str, Any]]:
        """model.list: one entry per loaded model."""
        return self.call("model.list").header["models"]

    def load(self, name: str | None = None, graph: Graph | Mapping[str, Any] | None = None,
             weights: str | Tensors | None = None, *, spec: Mapping[str, Any] | None = None,
             inputs: list[str] | None = None, outputs: list[str] | None = None,
             device: str | None = None, batching: Mapping[str, Any] | None = None,
             batch_max: int | None = None, delay_us: int | None = None,
             buckets: list[int] | None = None, queue_max: int | None = None,
             train: Mapping[str, Any] | None = None, loss: str | None = None,
             optimizer: str | Mapping[str, Any] | None = None, lr: float | None = None,
             target: str | None = None, train_output: str | None = None,
             sequence: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """model.load: builds, compiles and swaps in a model; returns its model.list entry.

        spec: a model.load object (e.g. examples/models/mlp.json loaded with json.load), which
        the other arguments override. graph: a Graph (its param values are sent as weights) or
        the graph JSON object. weights: a safetensors path relative to the daemon's models_dir,
        or {param id: tensor} sent in the message (these win over the file's). batching: the
        object, or its fields as batch_max, delay_us, buckets, queue_max. train: the object, or
        loss ("mse", "cross_entropy", "sparse_cross_entropy"), optimizer (kind or object), lr,
        target, train_output. sequence: the "sequence" object, passed as it is (state pairs
        {"input", "output", "init"}, max_sequences, max_sequence_idle_us, outlive_connection:
        docs/PROTOCOL.md, "Sequences"); the model then serves stateful sequences (infer's
        sequence_id)."""
        fields: dict[str, Any] = dict(spec or {})
        fields.pop("verb", None)
        tensors: dict[str, Any] = {}
        if isinstance(graph, Graph):
            tensors.update(graph.values)
        if graph is not None:
            fields["graph"] = _graph_dict(graph)
        if isinstance(weights, str):
            fields["weights"] = weights
        elif weights is not None:
            tensors.update(weights)
        if name is not None:
            fields["name"] = name
        fields.update({k: v for k, v in (("inputs", inputs), ("outputs", outputs), ("device", device)) if v is not None})
        fields["batching"] = _merge(batching or fields.get("batching"), max=batch_max, delay_us=delay_us,
                                    buckets=buckets, queue_max=queue_max)
        base_train = dict(train or fields.get("train") or {})
        opt = {"kind": optimizer} if isinstance(optimizer, str) else optimizer
        if lr is not None:  # the rate alone keeps the given optimizer (default: sgd)
            opt = _merge(opt or base_train.get("optimizer") or {"kind": "sgd"}, lr=lr)
        fields["train"] = _merge(base_train, loss=loss, optimizer=opt, target=target, output=train_output)
        if sequence is not None:
            fields["sequence"] = _sequence_spec(sequence)
        if "name" not in fields or "graph" not in fields:
            raise ValueError("load needs a name and a graph (or a spec with both)")
        return self.call("model.load", fields, tensors).header["model"]

    def load_onnx(self, name: str, model: str | bytes | os.PathLike[str] | None = None, *,
                  file: str | None = None, shapes: Mapping[str, list[int]] | None = None,
                  constants: Mapping[str, Any] | None = None, f64_as_f32: bool = False,
                  device: str | None = None, batch_max: int | None = None, delay_us: int | None = None,
                  buckets: list[int] | None = None, queue_max: int | None = None,
                  sequence: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """model.load of an ONNX file; returns its model.list entry.

        model: the .onnx file's path here, or its bytes: sent in the message. file instead: a
        path relative to the daemon's models_dir (external data beside it allowed). shapes:
        {input: dims} with -1 for the batch axis (over the file's dims); constants: {input: a
        number or a flat list} fixed at load; f64_as_f32: run float64 parts in float32. The
        batching fields and sequence as for load()."""
        if (model is None) == (file is None):
            raise ValueError("load_onnx needs the model (a path or bytes) or file, not both")
        fields: dict[str, Any] = {"name": name, "format": "onnx", "file": file, "shapes": shapes,
                                  "constants": constants, "device": device,
                                  "sequence": _sequence_spec(sequence)}
        if f64_as_f32:
            fields["f64_as_f32"] = True
        fields["batching"] = _merge(None, max=batch_max, delay_us=delay_us, buckets=buckets, queue_max=queue_max)
        tensors: dict[str, Any] = {}
        if model is not None:
            if isinstance(model, (bytes, bytearray)):
                data = bytes(model)
            else:
                with open(model, "rb") as f:
                    data = f.read()
            tensors["onnx"] = Tensor(data, "uint8", [len(data)])
        return self.call("model.load", {k: v for k, v in fields.items() if v is not None},
                         tensors).header["model"]

    def unload(self, name: str) -> None:
        """model.unload: requests still queued for it are answered cancelled."""
        self.call("model.unload", {"name": name})

    def save(self, name: str, path: str | None = None) -> str | dict[str, Any]:
        """model.save: with path (relative to models_dir, ending .safetensors) writes the weights
        there and returns the path; without, returns the weights {param id: tensor}."""
        reply = self.call("model.save", {"name": name, "path": path})
        return reply.header["path"] if path is not None else reply.tensors

    def infer(self, model: str, inputs: Tensors | None = None, *, priority: str | None = None,
              timeout_ms: int | None = None, latest_only: bool | None = None,
              shm_inputs: Mapping[str, Any] | None = None,
              shm_outputs: Mapping[str, tuple[Region, int]] | None = None,
              sequence_id: int | str | None = None, sequence_start: bool = False,
              sequence_end: bool = False, sequence_state: bool = False) -> dict[str, Any]:
        """infer: runs the model on inputs {input name: tensor}; returns {output name: tensor}.
        priority: "realtime", "normal" or "bulk"; timeout_ms: the request's deadline in the
        daemon (0: none); latest_only: a newer latest-only request supersedes this one.
        A step of a sequence (a model loaded with sequence=, docs/PROTOCOL.md "Sequences"):
        sequence_id (an int in [1, 2^53] or a str of 1 to 128 bytes; 5 and "5" are two
        sequences) names it, and the daemon feeds the state the previous step left, so the
        state inputs are not sent; sequence_start starts it (again: the state is reset),
        sequence_end ends it after this step, sequence_state returns the state outputs too.
        A step of a sequence that is not live raises SequenceEnded. Bad types: TypeError;
        bad values, or a flag without sequence_id: ValueError.
        Shared memory (unix:// only, Client.region): shm_inputs {name: a numpy array over a
        region, or (region, offset, dtype, shape)} are read where they are; shm_outputs {name:
        (writable region, offset)} are written there and returned as arrays over the region."""
        fields: dict[str, Any] = {"model": model, "priority": priority, "timeout_ms": timeout_ms,
                                  "latest_only": latest_only}
        fields.update(_sequence_fields(sequence_id, sequence_start, sequence_end, sequence_state))
        if shm_inputs or shm_outputs:
            fields["shm"] = {
                "inputs": [input_ref(k, v, self._regions) for k, v in (shm_inputs or {}).items()],
                "outputs": [{"name": k, "region": r.name, "offset": off} for k, (r, off) in (shm_outputs or {}).items()],
            }
        reply = self.call("infer", fields, inputs)
        out = dict(reply.tensors)
        if shm_outputs:
            out.update(outputs_from(reply.header, self._regions))
        return out

    def region(self, name: str, size: int, writable: bool = False) -> Region:
        """A shared-memory region of size bytes registered as name on this connection (unix://
        only; writable: the daemon may write outputs into it). Close it (or the client) when done."""
        with self._lock:
            if not self._c:
                raise TensordError("the client is closed")
            g = self._lib.tsd_region_create(self._c, name.encode(), int(size), bool(writable))
            if not g:
                raise error_for("bad_request", self._lib.tsd_client_error(self._c).decode(errors="replace"))
        region = Region(self, g, name, int(size), bool(writable))
        self._regions.append(region)
        return region

    def realize(self, graph: Graph | Mapping[str, Any], inputs: Tensors | None = None, *,
                timeout_ms: int | None = None) -> dict[str, Any]:
        """realize: runs a graph once; inputs feed its input and param nodes (a Graph's param
        values are sent too, inputs win). Returns {output id: tensor}."""
        tensors: dict[str, Any] = dict(graph.values) if isinstance(graph, Graph) else {}
        tensors.update(inputs or {})
        return self.call("realize", {"graph": _graph_dict(graph), "timeout_ms": timeout_ms}, tensors).tensors

    def train_step(self, model: str, batch: Tensors, *, lr: float | None = None,
                   timeout_ms: int | None = None) -> dict[str, Any]:
        """train.step: one optimiser step on batch {input name or train target: tensor};
        lr (> 0) sets the rate from this step on. Returns {"loss": float, "step": int, ...}."""
        header = self.call("train.step", {"model": model, "lr": lr, "timeout_ms": timeout_ms}, batch).header
        return {k: v for k, v in header.items() if k not in ("id", "status")}

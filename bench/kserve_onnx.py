# kserve_onnx.py: the peer of bench/compare_oip.sh: KServe's Python ModelServer (PyPI kserve, in
# bench/.venv-kserve) serving the ONNX files tensord serves through onnxruntime, with the small
# custom kserve.Model a user would write: predict takes a v2 InferRequest (JSON or binary tensors,
# REST or gRPC), runs the session (bench/ort_models.py's options: the same as every onnxruntime
# figure) and answers a v2 InferResponse, binary when the request asks. Inputs the model.load
# fixes as constants for tensord (silero's sr) are fixed here too, so both servers get the same
# requests. KServe's own arguments pass through (--http_port, --grpc_port, --enable_grpc, ...).
# Usage: bench/.venv-kserve/bin/python bench/kserve_onnx.py SITE_PACKAGES DIR [KSERVE ARGS]
#   DIR: what bench_onnx_models -o wrote (models.txt, MODEL.load.json)
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
SITE, DIR = sys.argv[1], sys.argv[2]
del sys.argv[1:3]  # the rest is KServe's (its module parses sys.argv at import)

import kserve  # noqa: E402
from kserve import InferOutput, InferRequest, InferResponse  # noqa: E402
from kserve.utils.utils import from_np_dtype, generate_uuid  # noqa: E402

import ort_models  # noqa: E402


class OnnxModel(kserve.Model):
    def __init__(self, name: str, path: str, constants: dict):
        super().__init__(name)
        self.path = path
        self.constants = constants
        self.sess = None

    def load(self) -> bool:
        self.sess = ort_models.session(self.path)
        types = {i.name: i.type for i in self.sess.get_inputs()}
        # constants as the model.load gives them (a number), in the input's dtype, 0-d
        self.const_feed = {k: np.array(v, dtype=np.int64 if "int64" in types[k] else np.float32)
                           for k, v in self.constants.items()}
        self.ready = True
        return self.ready

    def predict(self, payload: InferRequest, headers=None, response_headers=None) -> InferResponse:
        feed = {i.name: i.as_numpy() for i in payload.inputs}
        feed.update(self.const_feed)
        outs = self.sess.run(None, feed)
        infer_outputs = []
        for meta, value in zip(self.sess.get_outputs(), outs):
            o = InferOutput(name=meta.name, shape=list(value.shape), datatype=from_np_dtype(value.dtype))
            o.set_data_from_numpy(value, binary_data=payload.use_binary_outputs)
            infer_outputs.append(o)
        return InferResponse(response_id=payload.id or generate_uuid(), model_name=self.name, infer_outputs=infer_outputs,
                             use_binary_outputs=payload.use_binary_outputs,
                             requested_outputs=payload.request_outputs)


def main():
    served = []
    for name, rel in ort_models.models(DIR):
        m = OnnxModel(name, os.path.join(SITE, rel), ort_models.load_spec(DIR, name).get("constants", {}))
        m.load()
        served.append(m)
    kserve.ModelServer().start(served)


if __name__ == "__main__":
    main()

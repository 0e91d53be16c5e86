"""Quantized variants of the benchmark's real-world ONNX models, made with onnxruntime's own
quantization tools (bench/.venv-onnx): PaddleOCR's direction classifier as a static QDQ model
(QuantizeLinear/DequantizeLinear around each Conv and MatMul: uint8 activations, int8 weights per
channel; calibrated on seeded noise crops, the benchmark's inputs) and as a dynamic model
(DynamicQuantizeLinear of the activations, ConvInteger/MatMulInteger with int8 weights).
Usage: quantize_models.py SITE OUTDIR   (writes ppocr-cls-qdq.onnx and ppocr-cls-dyn.onnx)."""
import os
import sys

import numpy as np
import onnx
from onnx import version_converter
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                      quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process

site, out = sys.argv[1], sys.argv[2]
src = os.path.join(site, "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx")
# the model imports opset 11; per-channel scales (DequantizeLinear's axis) need opset 13, which
# the quantizer writes without converting the model: converted first
up = os.path.join(out, "ppocr-cls-13.onnx")
onnx.save(version_converter.convert_version(onnx.load(src), 13), up)
pre = os.path.join(out, "ppocr-cls-pre.onnx")
quant_pre_process(up, pre, skip_symbolic_shape=True)
os.remove(up)


class Crops(CalibrationDataReader):
    def __init__(self, n=16):
        rng = np.random.default_rng(7)
        self.batches = iter([{"x": rng.uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32)} for _ in range(n)])

    def get_next(self):
        return next(self.batches, None)


quantize_static(pre, os.path.join(out, "ppocr-cls-qdq.onnx"), Crops(), quant_format=QuantFormat.QDQ,
                activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True)
quantize_dynamic(pre, os.path.join(out, "ppocr-cls-dyn.onnx"), weight_type=QuantType.QInt8)
os.remove(pre)

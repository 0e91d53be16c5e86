/* optable.c: the importer's op table: op name, the opsets an entry covers, its function and the
 * attributes it understands. Adding an op (or an opset's new semantics) is one row here. */
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

#define ANY 1000 /* no upper opset bound */
#define LEGACY "consumed_inputs" /* opsets < 6: an optimisation hint, safe to ignore */

static const onx_op ops[] = {
	/* elementwise math (ops_elementwise.c) */
	{"Abs", 1, ANY, onx_op_unary, LEGACY, NULL},
	{"Acos", 7, ANY, onx_op_unary, "", NULL},
	{"Acosh", 9, ANY, onx_op_unary, "", NULL},
	{"Asin", 7, ANY, onx_op_unary, "", NULL},
	{"Asinh", 9, ANY, onx_op_unary, "", NULL},
	{"Atan", 7, ANY, onx_op_unary, "", NULL},
	{"Atanh", 9, ANY, onx_op_unary, "", NULL},
	{"Ceil", 1, ANY, onx_op_unary, LEGACY, NULL},
	{"Cos", 7, ANY, onx_op_unary, "", NULL},
	{"Cosh", 9, ANY, onx_op_unary, "", NULL},
	{"Erf", 9, ANY, onx_op_unary, "", NULL},
	{"Exp", 1, ANY, onx_op_unary, LEGACY, NULL},
	{"Floor", 1, ANY, onx_op_unary, LEGACY, NULL},
	{"IsInf", 10, ANY, onx_op_unary, "detect_negative,detect_positive", NULL},
	{"IsNaN", 9, ANY, onx_op_unary, "", NULL},
	{"Log", 1, ANY, onx_op_unary, LEGACY, NULL},
	{"Neg", 1, ANY, onx_op_unary, LEGACY, NULL},
	{"Not", 1, ANY, onx_op_unary, "", NULL},
	{"Reciprocal", 1, ANY, onx_op_unary, LEGACY, NULL},
	{"Round", 11, ANY, onx_op_unary, "", NULL},
	{"Sign", 9, ANY, onx_op_unary, "", NULL},
	{"Sin", 7, ANY, onx_op_unary, "", NULL},
	{"Sinh", 9, ANY, onx_op_unary, "", NULL},
	{"Sqrt", 1, ANY, onx_op_unary, LEGACY, NULL},
	{"Tan", 7, ANY, onx_op_unary, "", NULL},
	{"Tanh", 1, ANY, onx_op_unary, LEGACY, NULL},
	/* activations */
	{"Celu", 12, ANY, onx_op_unary, "alpha", NULL},
	{"Elu", 1, ANY, onx_op_unary, "alpha," LEGACY, NULL},
	{"Gelu", 20, ANY, onx_op_unary, "approximate", NULL},
	{"HardSigmoid", 1, ANY, onx_op_unary, "alpha,beta," LEGACY, NULL},
	{"HardSwish", 14, ANY, onx_op_unary, "", NULL},
	{"LeakyRelu", 1, ANY, onx_op_unary, "alpha," LEGACY, NULL},
	{"Mish", 18, ANY, onx_op_unary, "", NULL},
	{"PRelu", 1, ANY, onx_op_prelu, LEGACY, NULL},
	{"Relu", 1, ANY, onx_op_unary, LEGACY, NULL},
	{"Selu", 1, ANY, onx_op_unary, "alpha,gamma," LEGACY, NULL},
	{"Sigmoid", 1, ANY, onx_op_unary, LEGACY, NULL},
	{"Softplus", 1, ANY, onx_op_unary, "", NULL},
	{"Softsign", 1, ANY, onx_op_unary, "", NULL},
	{"ThresholdedRelu", 10, ANY, onx_op_unary, "alpha", NULL},
	/* binary, comparisons, logic (numpy broadcasting from opset 7) */
	{"Add", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY, NULL},
	{"Add", 7, ANY, onx_op_binary, "", NULL},
	{"And", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY, NULL},
	{"Div", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY, NULL},
	{"Equal", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY, NULL},
	{"Greater", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY, NULL},
	{"Less", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY, NULL},
	{"Mul", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY, NULL},
	{"Or", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY, NULL},
	{"Pow", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY, NULL},
	{"Sub", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY, NULL},
	{"Xor", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY, NULL},
	{"And", 7, ANY, onx_op_binary, "", NULL},
	{"BitShift", 11, ANY, onx_op_binary, "direction", NULL},
	{"Div", 7, ANY, onx_op_binary, "", NULL},
	{"Equal", 7, ANY, onx_op_binary, "", NULL},
	{"Greater", 7, ANY, onx_op_binary, "", NULL},
	{"GreaterOrEqual", 12, ANY, onx_op_binary, "", NULL},
	{"Less", 7, ANY, onx_op_binary, "", NULL},
	{"LessOrEqual", 12, ANY, onx_op_binary, "", NULL},
	{"Mod", 10, ANY, onx_op_binary, "fmod", NULL},
	{"Mul", 7, ANY, onx_op_binary, "", NULL},
	{"Or", 7, ANY, onx_op_binary, "", NULL},
	{"Pow", 7, ANY, onx_op_binary, "", NULL},
	{"Sub", 7, ANY, onx_op_binary, "", NULL},
	{"Xor", 7, ANY, onx_op_binary, "", NULL},
	{"Max", 6, ANY, onx_op_variadic, "", NULL},
	{"Mean", 6, ANY, onx_op_variadic, "", NULL},
	{"Min", 6, ANY, onx_op_variadic, "", NULL},
	{"Sum", 6, ANY, onx_op_variadic, "", NULL},
	{"Clip", 6, ANY, onx_op_clip, "min,max", NULL},
	{"Where", 9, ANY, onx_op_where, "", NULL},
	{"Cast", 6, ANY, onx_op_cast, "to", NULL},
	{"CastLike", 15, ANY, onx_op_cast, "", NULL},
	{"Identity", 1, ANY, onx_op_identity, "", NULL},
	{"If", 1, ANY, onx_op_if, "then_branch,else_branch", NULL},
	{"Det", 11, ANY, onx_op_det, "", NULL},
	/* reductions (ops_reduce.c) */
#define RED "axes,keepdims,noop_with_empty_axes"
	{"ReduceL1", 1, ANY, onx_op_reduce, RED, NULL},
	{"ReduceL2", 1, ANY, onx_op_reduce, RED, NULL},
	{"ReduceLogSum", 1, ANY, onx_op_reduce, RED, NULL},
	{"ReduceLogSumExp", 1, ANY, onx_op_reduce, RED, NULL},
	{"ReduceMax", 1, ANY, onx_op_reduce, RED, NULL},
	{"ReduceMean", 1, ANY, onx_op_reduce, RED, NULL},
	{"ReduceMin", 1, ANY, onx_op_reduce, RED, NULL},
	{"ReduceProd", 1, ANY, onx_op_reduce, RED, NULL},
	{"ReduceSum", 1, ANY, onx_op_reduce, RED, NULL},
	{"ReduceSumSquare", 1, ANY, onx_op_reduce, RED, NULL},
	{"ArgMax", 1, ANY, onx_op_argminmax, "axis,keepdims,select_last_index", NULL},
	{"ArgMin", 1, ANY, onx_op_argminmax, "axis,keepdims,select_last_index", NULL},
	{"Hardmax", 1, ANY, onx_op_softmax, "axis", NULL},
	{"LogSoftmax", 1, ANY, onx_op_softmax, "axis", NULL},
	{"Softmax", 1, ANY, onx_op_softmax, "axis", NULL},
	{"TopK", 1, ANY, onx_op_topk, "axis,k,largest,sorted", NULL},
	/* shape and movement (ops_shape.c, ops_index.c, ops_const.c) */
	{"Concat", 4, ANY, onx_op_concat, "axis", NULL},
	{"Constant", 1, ANY, onx_op_constant, "value,value_float,value_floats,value_int,value_ints,sparse_value,value_string,value_strings", NULL},
	{"ConstantOfShape", 9, ANY, onx_op_constant_of_shape, "value", NULL},
	{"Dropout", 1, ANY, onx_op_dropout, "ratio,is_test,seed," LEGACY, NULL},
	{"Expand", 8, ANY, onx_op_expand, "", NULL},
	{"Flatten", 1, ANY, onx_op_flatten, "axis", NULL},
	{"Gather", 1, ANY, onx_op_gather, "axis", NULL},
	{"GatherND", 11, ANY, onx_op_gather_nd, "batch_dims", NULL},
	{"Scatter", 9, 10, onx_op_scatter_elements, "axis", NULL},
	{"ScatterElements", 11, ANY, onx_op_scatter_elements, "axis,reduction", NULL},
	{"ScatterND", 11, ANY, onx_op_scatter_nd, "reduction", NULL},
	{"GatherElements", 11, ANY, onx_op_gather_elements, "axis", NULL},
	{"Pad", 1, ANY, onx_op_pad, "mode,pads,paddings,value", NULL},
	{"Range", 11, ANY, onx_op_range, "", NULL},
	{"DFT", 17, ANY, onx_op_dft, "axis,inverse,onesided", NULL},
	{"STFT", 17, ANY, onx_op_stft, "onesided", NULL},
	{"GridSample", 16, ANY, onx_op_grid_sample, "align_corners,mode,padding_mode", NULL},
	{"Resize", 10, ANY, onx_op_resize, "mode,coordinate_transformation_mode,nearest_mode,cubic_coeff_a,exclude_outside,extrapolation_value,antialias,axes,keep_aspect_ratio_policy", NULL},
	{"Upsample", 7, 9, onx_op_resize, "mode,scales", NULL},
	{"Reshape", 1, ANY, onx_op_reshape, "shape,allowzero," LEGACY, NULL},
	{"Shape", 1, ANY, onx_op_shape, "start,end", NULL},
	{"Size", 1, ANY, onx_op_size, "", NULL},
	{"Slice", 1, ANY, onx_op_slice, "starts,ends,axes", NULL},
	{"Split", 2, ANY, onx_op_split, "axis,split,num_outputs", NULL},
	{"Squeeze", 1, ANY, onx_op_squeeze, "axes", NULL},
	{"Tile", 6, ANY, onx_op_tile, "", NULL},
	{"Transpose", 1, ANY, onx_op_transpose, "perm", NULL},
	{"Unsqueeze", 1, ANY, onx_op_unsqueeze, "axes", NULL},
	{"DepthToSpace", 1, ANY, onx_op_depth_space, "blocksize,mode", NULL},
	{"EyeLike", 9, ANY, onx_op_eyelike, "dtype,k", NULL},
	{"OneHot", 9, ANY, onx_op_onehot, "axis", NULL},
	{"Shrink", 9, ANY, onx_op_shrink, "bias,lambd", NULL},
	{"SpaceToDepth", 1, ANY, onx_op_depth_space, "blocksize", NULL},
	{"Trilu", 14, ANY, onx_op_trilu, "upper", NULL},
	{"BlackmanWindow", 17, ANY, onx_op_window, "output_datatype,periodic", NULL},
	{"Compress", 9, ANY, onx_op_compress, "axis", NULL},
	{"CumSum", 11, ANY, onx_op_cumsum, "exclusive,reverse", NULL},
	{"HammingWindow", 17, ANY, onx_op_window, "output_datatype,periodic", NULL},
	{"HannWindow", 17, ANY, onx_op_window, "output_datatype,periodic", NULL},
	{"NonMaxSuppression", 10, ANY, onx_op_nms, "center_point_box", NULL},
	{"NonZero", 9, ANY, onx_op_nonzero, "", NULL},
	{"Unique", 11, ANY, onx_op_unique, "axis,sorted", NULL},
	{"ReverseSequence", 10, ANY, onx_op_reverse_sequence, "batch_axis,time_axis", NULL},
	/* losses (ops_loss.c) */
	{"NegativeLogLikelihoodLoss", 12, ANY, onx_op_nll_loss, "ignore_index,reduction", NULL},
	{"SoftmaxCrossEntropyLoss", 12, ANY, onx_op_sce_loss, "ignore_index,reduction", NULL},
	/* dense, convolution, pooling, normalisation (ops_nn.c, ops_conv.c) */
	{"AveragePool", 1, ANY, onx_op_pool, "auto_pad,ceil_mode,count_include_pad,kernel_shape,pads,strides,dilations", NULL},
	{"BatchNormalization", 1, ANY, onx_op_batchnorm, "epsilon,momentum,spatial,is_test,training_mode," LEGACY, NULL},
	{"Conv", 1, ANY, onx_op_conv, "auto_pad,dilations,group,kernel_shape,pads,strides", NULL},
	{"ConvTranspose", 1, ANY, onx_op_conv_transpose, "auto_pad,dilations,group,kernel_shape,output_padding,output_shape,pads,strides", NULL},
	{"Gemm", 1, ANY, onx_op_gemm, "alpha,beta,transA,transB,broadcast", NULL},
	{"GlobalAveragePool", 1, ANY, onx_op_global_pool, "", NULL},
	{"GlobalMaxPool", 1, ANY, onx_op_global_pool, "", NULL},
	{"InstanceNormalization", 1, ANY, onx_op_instancenorm, "epsilon," LEGACY, NULL},
	{"LayerNormalization", 17, ANY, onx_op_layernorm, "axis,epsilon,stash_type", NULL},
	{"LRN", 1, ANY, onx_op_lrn, "alpha,beta,bias,size", NULL},
	{"MatMul", 1, ANY, onx_op_matmul, "", NULL},
#define RNN_ATTRS "activation_alpha,activation_beta,activations,clip,direction,hidden_size,layout"
	{"GRU", 7, ANY, onx_op_rnn, RNN_ATTRS ",linear_before_reset", NULL},
	{"LSTM", 7, ANY, onx_op_rnn, RNN_ATTRS ",input_forget", NULL},
	{"RNN", 7, ANY, onx_op_rnn, RNN_ATTRS, NULL},
	{"Einsum", 12, ANY, onx_op_einsum, "equation", NULL},
	{"QuantizeLinear", 10, ANY, onx_op_quantize, "axis", NULL},
	{"DequantizeLinear", 10, ANY, onx_op_dequantize, "axis", NULL},
	{"DynamicQuantizeLinear", 11, ANY, onx_op_dynamic_quantize, "", NULL},
	{"MeanVarianceNormalization", 9, ANY, onx_op_mvn, "axes", NULL},
	/* training (ops_train.c), domain ai.onnx.preview.training */
#define TRAINING "ai.onnx.preview.training"
	{"Adagrad", 1, ANY, onx_op_optimizer, "decay_factor,epsilon,norm_coefficient", TRAINING},
	{"Adam", 1, ANY, onx_op_optimizer, "alpha,beta,epsilon,norm_coefficient,norm_coefficient_post", TRAINING},
	{"Momentum", 1, ANY, onx_op_optimizer, "alpha,beta,mode,norm_coefficient", TRAINING},
	{"MaxPool", 1, ANY, onx_op_pool, "auto_pad,ceil_mode,dilations,kernel_shape,pads,storage_order,strides", NULL},
};

static bool default_domain(const char *d) { return !d || !*d || !strcmp(d, "ai.onnx"); }

const onx_op *onx_op_find(const char *domain, const char *name, int64_t opset, bool *name_known)
{
	*name_known = false;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		if (strcmp(ops[i].name, name))
			continue;
		if (default_domain(domain) ? !default_domain(ops[i].domain) : default_domain(ops[i].domain) || strcmp(domain, ops[i].domain))
			continue;
		*name_known = true;
		if (opset >= ops[i].since && opset <= ops[i].until)
			return &ops[i];
	}
	return NULL;
}

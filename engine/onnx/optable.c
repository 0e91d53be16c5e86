/* optable.c: the importer's op table: op name, the opsets an entry covers, its function and the
 * attributes it understands. Adding an op (or an opset's new semantics) is one row here. */
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

#define ANY 1000 /* no upper opset bound */
#define LEGACY "consumed_inputs" /* opsets < 6: an optimisation hint, safe to ignore */

static const onx_op ops[] = {
	/* elementwise math (ops_elementwise.c) */
	{"Abs", 1, ANY, onx_op_unary, LEGACY},
	{"Acos", 7, ANY, onx_op_unary, ""},
	{"Acosh", 9, ANY, onx_op_unary, ""},
	{"Asin", 7, ANY, onx_op_unary, ""},
	{"Asinh", 9, ANY, onx_op_unary, ""},
	{"Atan", 7, ANY, onx_op_unary, ""},
	{"Atanh", 9, ANY, onx_op_unary, ""},
	{"Ceil", 1, ANY, onx_op_unary, LEGACY},
	{"Cos", 7, ANY, onx_op_unary, ""},
	{"Cosh", 9, ANY, onx_op_unary, ""},
	{"Erf", 9, ANY, onx_op_unary, ""},
	{"Exp", 1, ANY, onx_op_unary, LEGACY},
	{"Floor", 1, ANY, onx_op_unary, LEGACY},
	{"IsInf", 10, ANY, onx_op_unary, "detect_negative,detect_positive"},
	{"IsNaN", 9, ANY, onx_op_unary, ""},
	{"Log", 1, ANY, onx_op_unary, LEGACY},
	{"Neg", 1, ANY, onx_op_unary, LEGACY},
	{"Not", 1, ANY, onx_op_unary, ""},
	{"Reciprocal", 1, ANY, onx_op_unary, LEGACY},
	{"Round", 11, ANY, onx_op_unary, ""},
	{"Sign", 9, ANY, onx_op_unary, ""},
	{"Sin", 7, ANY, onx_op_unary, ""},
	{"Sinh", 9, ANY, onx_op_unary, ""},
	{"Sqrt", 1, ANY, onx_op_unary, LEGACY},
	{"Tan", 7, ANY, onx_op_unary, ""},
	{"Tanh", 1, ANY, onx_op_unary, LEGACY},
	/* activations */
	{"Celu", 12, ANY, onx_op_unary, "alpha"},
	{"Elu", 1, ANY, onx_op_unary, "alpha," LEGACY},
	{"Gelu", 20, ANY, onx_op_unary, "approximate"},
	{"HardSigmoid", 1, ANY, onx_op_unary, "alpha,beta," LEGACY},
	{"HardSwish", 14, ANY, onx_op_unary, ""},
	{"LeakyRelu", 1, ANY, onx_op_unary, "alpha," LEGACY},
	{"Mish", 18, ANY, onx_op_unary, ""},
	{"PRelu", 1, ANY, onx_op_prelu, LEGACY},
	{"Relu", 1, ANY, onx_op_unary, LEGACY},
	{"Selu", 1, ANY, onx_op_unary, "alpha,gamma," LEGACY},
	{"Sigmoid", 1, ANY, onx_op_unary, LEGACY},
	{"Softplus", 1, ANY, onx_op_unary, ""},
	{"Softsign", 1, ANY, onx_op_unary, ""},
	{"ThresholdedRelu", 10, ANY, onx_op_unary, "alpha"},
	/* binary, comparisons, logic (numpy broadcasting from opset 7) */
	{"Add", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY},
	{"Add", 7, ANY, onx_op_binary, ""},
	{"And", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY},
	{"Div", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY},
	{"Equal", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY},
	{"Greater", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY},
	{"Less", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY},
	{"Mul", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY},
	{"Or", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY},
	{"Pow", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY},
	{"Sub", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY},
	{"Xor", 1, 6, onx_op_binary_legacy, "broadcast,axis," LEGACY},
	{"And", 7, ANY, onx_op_binary, ""},
	{"BitShift", 11, ANY, onx_op_binary, "direction"},
	{"Div", 7, ANY, onx_op_binary, ""},
	{"Equal", 7, ANY, onx_op_binary, ""},
	{"Greater", 7, ANY, onx_op_binary, ""},
	{"GreaterOrEqual", 12, ANY, onx_op_binary, ""},
	{"Less", 7, ANY, onx_op_binary, ""},
	{"LessOrEqual", 12, ANY, onx_op_binary, ""},
	{"Mod", 10, ANY, onx_op_binary, "fmod"},
	{"Mul", 7, ANY, onx_op_binary, ""},
	{"Or", 7, ANY, onx_op_binary, ""},
	{"Pow", 7, ANY, onx_op_binary, ""},
	{"Sub", 7, ANY, onx_op_binary, ""},
	{"Xor", 7, ANY, onx_op_binary, ""},
	{"Max", 6, ANY, onx_op_variadic, ""},
	{"Mean", 6, ANY, onx_op_variadic, ""},
	{"Min", 6, ANY, onx_op_variadic, ""},
	{"Sum", 6, ANY, onx_op_variadic, ""},
	{"Clip", 6, ANY, onx_op_clip, "min,max"},
	{"Where", 9, ANY, onx_op_where, ""},
	{"Cast", 6, ANY, onx_op_cast, "to"},
	{"CastLike", 15, ANY, onx_op_cast, ""},
	{"Identity", 1, ANY, onx_op_identity, ""},
	/* reductions (ops_reduce.c) */
#define RED "axes,keepdims,noop_with_empty_axes"
	{"ReduceL1", 1, ANY, onx_op_reduce, RED},
	{"ReduceL2", 1, ANY, onx_op_reduce, RED},
	{"ReduceLogSum", 1, ANY, onx_op_reduce, RED},
	{"ReduceLogSumExp", 1, ANY, onx_op_reduce, RED},
	{"ReduceMax", 1, ANY, onx_op_reduce, RED},
	{"ReduceMean", 1, ANY, onx_op_reduce, RED},
	{"ReduceMin", 1, ANY, onx_op_reduce, RED},
	{"ReduceProd", 1, ANY, onx_op_reduce, RED},
	{"ReduceSum", 1, ANY, onx_op_reduce, RED},
	{"ReduceSumSquare", 1, ANY, onx_op_reduce, RED},
	{"ArgMax", 1, ANY, onx_op_argminmax, "axis,keepdims,select_last_index"},
	{"ArgMin", 1, ANY, onx_op_argminmax, "axis,keepdims,select_last_index"},
	{"Hardmax", 1, ANY, onx_op_softmax, "axis"},
	{"LogSoftmax", 1, ANY, onx_op_softmax, "axis"},
	{"Softmax", 1, ANY, onx_op_softmax, "axis"},
	/* shape and movement (ops_shape.c, ops_index.c, ops_const.c) */
	{"Concat", 4, ANY, onx_op_concat, "axis"},
	{"Constant", 1, ANY, onx_op_constant, "value,value_float,value_floats,value_int,value_ints,sparse_value,value_string,value_strings"},
	{"ConstantOfShape", 9, ANY, onx_op_constant_of_shape, "value"},
	{"Dropout", 1, ANY, onx_op_dropout, "ratio,is_test,seed," LEGACY},
	{"Expand", 8, ANY, onx_op_expand, ""},
	{"Flatten", 1, ANY, onx_op_flatten, "axis"},
	{"Gather", 1, ANY, onx_op_gather, "axis"},
	{"GatherND", 11, ANY, onx_op_gather_nd, "batch_dims"},
	{"Scatter", 9, 10, onx_op_scatter_elements, "axis"},
	{"ScatterElements", 11, ANY, onx_op_scatter_elements, "axis,reduction"},
	{"ScatterND", 11, ANY, onx_op_scatter_nd, "reduction"},
	{"GatherElements", 11, ANY, onx_op_gather_elements, "axis"},
	{"Pad", 1, ANY, onx_op_pad, "mode,pads,paddings,value"},
	{"Range", 11, ANY, onx_op_range, ""},
	{"Resize", 10, ANY, onx_op_resize, "mode,coordinate_transformation_mode,nearest_mode,cubic_coeff_a,exclude_outside,extrapolation_value,antialias,axes,keep_aspect_ratio_policy"},
	{"Upsample", 7, 9, onx_op_resize, "mode,scales"},
	{"Reshape", 1, ANY, onx_op_reshape, "shape,allowzero," LEGACY},
	{"Shape", 1, ANY, onx_op_shape, "start,end"},
	{"Size", 1, ANY, onx_op_size, ""},
	{"Slice", 1, ANY, onx_op_slice, "starts,ends,axes"},
	{"Split", 2, ANY, onx_op_split, "axis,split,num_outputs"},
	{"Squeeze", 1, ANY, onx_op_squeeze, "axes"},
	{"Tile", 6, ANY, onx_op_tile, ""},
	{"Transpose", 1, ANY, onx_op_transpose, "perm"},
	{"Unsqueeze", 1, ANY, onx_op_unsqueeze, "axes"},
	{"DepthToSpace", 1, ANY, onx_op_depth_space, "blocksize,mode"},
	{"EyeLike", 9, ANY, onx_op_eyelike, "dtype,k"},
	{"OneHot", 9, ANY, onx_op_onehot, "axis"},
	{"Shrink", 9, ANY, onx_op_shrink, "bias,lambd"},
	{"SpaceToDepth", 1, ANY, onx_op_depth_space, "blocksize"},
	{"Trilu", 14, ANY, onx_op_trilu, "upper"},
	/* losses (ops_loss.c) */
	{"NegativeLogLikelihoodLoss", 12, ANY, onx_op_nll_loss, "ignore_index,reduction"},
	{"SoftmaxCrossEntropyLoss", 12, ANY, onx_op_sce_loss, "ignore_index,reduction"},
	/* dense, convolution, pooling, normalisation (ops_nn.c, ops_conv.c) */
	{"AveragePool", 1, ANY, onx_op_pool, "auto_pad,ceil_mode,count_include_pad,kernel_shape,pads,strides,dilations"},
	{"BatchNormalization", 1, ANY, onx_op_batchnorm, "epsilon,momentum,spatial,is_test,training_mode," LEGACY},
	{"Conv", 1, ANY, onx_op_conv, "auto_pad,dilations,group,kernel_shape,pads,strides"},
	{"ConvTranspose", 1, ANY, onx_op_conv_transpose, "auto_pad,dilations,group,kernel_shape,output_padding,output_shape,pads,strides"},
	{"Gemm", 1, ANY, onx_op_gemm, "alpha,beta,transA,transB,broadcast"},
	{"GlobalAveragePool", 1, ANY, onx_op_global_pool, ""},
	{"GlobalMaxPool", 1, ANY, onx_op_global_pool, ""},
	{"InstanceNormalization", 1, ANY, onx_op_instancenorm, "epsilon," LEGACY},
	{"LayerNormalization", 17, ANY, onx_op_layernorm, "axis,epsilon,stash_type"},
	{"LRN", 1, ANY, onx_op_lrn, "alpha,beta,bias,size"},
	{"MatMul", 1, ANY, onx_op_matmul, ""},
	{"MeanVarianceNormalization", 9, ANY, onx_op_mvn, "axes"},
	{"MaxPool", 1, ANY, onx_op_pool, "auto_pad,ceil_mode,dilations,kernel_shape,pads,storage_order,strides"},
};

const onx_op *onx_op_find(const char *name, int64_t opset, bool *name_known)
{
	*name_known = false;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		if (strcmp(ops[i].name, name))
			continue;
		*name_known = true;
		if (opset >= ops[i].since && opset <= ops[i].until)
			return &ops[i];
	}
	return NULL;
}

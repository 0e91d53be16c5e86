/* ops.h: the op functions the table (optable.c) points at, one group per ops_*.c file, and
 * helpers they share. */
#ifndef ONX_OPS_H
#define ONX_OPS_H

#include "onnx_int.h"

/* ops_elementwise.c */
eng_status onx_op_unary(onx_node *n);
eng_status onx_op_identity(onx_node *n);
eng_status onx_op_binary(onx_node *n);
/* a / b for floats, corrected towards IEEE division (the engine's is a * recip(b)). */
eng_tensor *onx_div_exact(const eng_tensor *a, const eng_tensor *b);
eng_status onx_op_binary_legacy(onx_node *n);
eng_status onx_op_variadic(onx_node *n);
eng_status onx_op_clip(onx_node *n);
eng_status onx_op_where(onx_node *n);
eng_status onx_op_prelu(onx_node *n);
eng_status onx_op_cast(onx_node *n);
eng_status onx_op_bitcast(onx_node *n);
eng_status onx_op_rotary(onx_node *n);
eng_status onx_op_swiglu(onx_node *n);
/* ops_fold.c, ops_grid.c (AffineGrid), ops_scatter.c (TensorScatter) */
eng_status onx_op_col2im(onx_node *n);
eng_status onx_op_affine_grid(onx_node *n);
eng_status onx_op_roi_align(onx_node *n);
eng_status onx_op_tensor_scatter(onx_node *n);
/* ops_state.c */
eng_status onx_op_causal_conv_state(onx_node *n);
eng_status onx_op_linear_attention(onx_node *n);
eng_status onx_op_lpnorm(onx_node *n);
eng_status onx_op_center_crop_pad(onx_node *n);

/* ops_reduce.c */
eng_status onx_op_reduce(onx_node *n);
eng_status onx_op_argminmax(onx_node *n);
eng_status onx_op_softmax(onx_node *n);
eng_status onx_op_topk(onx_node *n);

/* ops_shape.c */
eng_status onx_op_reshape(onx_node *n);
eng_status onx_op_flatten(onx_node *n);
eng_status onx_op_squeeze(onx_node *n);
eng_status onx_op_unsqueeze(onx_node *n);
eng_status onx_op_transpose(onx_node *n);
eng_status onx_op_concat(onx_node *n);
eng_status onx_op_split(onx_node *n);
eng_status onx_op_slice(onx_node *n);
eng_status onx_op_expand(onx_node *n);
eng_status onx_op_tile(onx_node *n);
eng_status onx_op_shape(onx_node *n);
eng_status onx_op_size(onx_node *n);
eng_status onx_op_dropout(onx_node *n);

/* ops_const.c */
eng_status onx_op_constant(onx_node *n);
eng_status onx_op_constant_of_shape(onx_node *n);
eng_status onx_op_range(onx_node *n);

/* ops_index.c */
eng_status onx_op_gather(onx_node *n);
eng_status onx_op_gather_elements(onx_node *n);
eng_status onx_op_pad(onx_node *n);

/* ops_nn.c */
eng_status onx_op_matmul(onx_node *n);
eng_status onx_op_gemm(onx_node *n);
eng_status onx_op_batchnorm(onx_node *n);
eng_status onx_op_layernorm(onx_node *n);
eng_status onx_op_instancenorm(onx_node *n);
eng_status onx_op_groupnorm(onx_node *n);
eng_status onx_op_rmsnorm(onx_node *n);

/* ops_attention.c */
eng_status onx_op_attention(onx_node *n);

/* ops_conv.c */
eng_status onx_op_conv(onx_node *n);
eng_status onx_op_conv_transpose(onx_node *n);
eng_status onx_op_pool(onx_node *n);
eng_status onx_op_global_pool(onx_node *n);

/* ops_loss.c */
eng_status onx_op_nll_loss(onx_node *n);
eng_status onx_op_sce_loss(onx_node *n);

/* ops_scatter.c */
eng_status onx_op_gather_nd(onx_node *n);
eng_status onx_op_scatter_elements(onx_node *n);
eng_status onx_op_scatter_nd(onx_node *n);
eng_status onx_op_max_unpool(onx_node *n);

/* ops_seq.c */
eng_status onx_op_cumsum(onx_node *n);
eng_status onx_op_reverse_sequence(onx_node *n);
eng_status onx_op_window(onx_node *n);
eng_status onx_op_mel_weights(onx_node *n);
eng_status onx_op_compress(onx_node *n);
eng_status onx_op_nonzero(onx_node *n);
eng_status onx_op_unique(onx_node *n);

/* ops_quant.c */
eng_status onx_op_quantize(onx_node *n);
eng_status onx_op_dequantize(onx_node *n);
eng_status onx_op_dynamic_quantize(onx_node *n);
eng_status onx_op_matmul_integer(onx_node *n);
eng_status onx_op_conv_integer(onx_node *n);
eng_status onx_op_qlinear_matmul(onx_node *n);
eng_status onx_op_qlinear_conv(onx_node *n);

/* ops_einsum.c */
eng_status onx_op_einsum(onx_node *n);

/* graph.c */
eng_status onx_op_if(onx_node *n);
eng_status onx_op_loop(onx_node *n);
eng_status onx_op_scan(onx_node *n);
/* ops_misc.c */
eng_status onx_op_det(onx_node *n);

/* ops_grid.c */
eng_status onx_op_grid_sample(onx_node *n);

/* ops_dft.c */
eng_status onx_op_dft(onx_node *n);
eng_status onx_op_stft(onx_node *n);

/* ops_nms.c */
eng_status onx_op_nms(onx_node *n);

/* ops_train.c */
eng_status onx_op_optimizer(onx_node *n);

/* ops_rnn.c */
eng_status onx_op_rnn(onx_node *n);

/* ops_resize.c */
eng_status onx_op_resize(onx_node *n);

/* ops_misc.c */
eng_status onx_op_trilu(onx_node *n);
eng_status onx_op_eyelike(onx_node *n);
eng_status onx_op_onehot(onx_node *n);
eng_status onx_op_shrink(onx_node *n);
eng_status onx_op_depth_space(onx_node *n);
eng_status onx_op_lrn(onx_node *n);
eng_status onx_op_mvn(onx_node *n);

#endif

"""`tf.nn` ops, one module per family; each op is one registry entry (shape rule, NumPy
reference, gradient, lowering into the kernel IR, examples).

- `activations.py`     Relu, Relu6, LeakyRelu, Elu, Selu, Softsign; `swish`, `crelu`;
- `softmax_xent.py`    Softmax, LogSoftmax, their lowering into `ir.RowOp`s, and the
                       cross-entropies (softmax, sparse softmax, sigmoid, weighted);
- `basic.py`           the small ops: L2Loss, BiasAdd (`bias_add`, `xw_plus_b`,
                       `relu_layer`), `moments` and its helpers, `l2_normalize`,
                       `batch_normalization`, `fused_batch_norm`, `dropout`, `zero_fraction`,
                       the small losses (`log_poisson_loss` ...);
- `topk.py`            TopKV2 (`top_k`), its gradient TopKGrad, InTopKV2 (`in_top_k`);
- `embedding.py`       `embedding_lookup` (sharded tables too), `embedding_lookup_sparse`;
- `conv.py`            Conv2D and its gradients Conv2DBackpropInput/Filter (`conv2d`), and
                       `atrous_conv2d`, `conv1d`, `convolution`, `conv2d_backprop_filter`;
- `conv_transpose.py`  Conv2DBackpropInputSizes (`conv2d_transpose`, `conv2d_backprop_input`);
- `pool.py`            MaxPool, AvgPool and their gradients (`max_pool`, `avg_pool`), their
                       aliases and 1-D pooling;
- `depthwise.py`       DepthwiseConv2dNative and its gradients (`depthwise_conv2d`,
                       `separable_conv2d`);
- `window.py`          what the window ops (convolutions, pooling) share: their arguments
                       (strides, padding, NCHW), output geometry and NumPy reference helpers;
- `window_lowering.py` the lowering of every window op into one `ir.LibCall` of the backends'
                       window library (and the choice of the Winograd routines).

The package itself exports nothing: code imports each name from the module that defines it,
and op discovery (jitflow/ops/__init__.py) reads each module's `__all__` and `NAMESPACES`.
"""

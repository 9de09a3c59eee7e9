"""`tf.nn` ops, one module per family; each op is one registry entry (shape rule, NumPy
reference, gradient, lowering into the kernel IR, examples).

- `activations.py`     Relu, Relu6, LeakyRelu, Elu, Selu, Softsign;
- `softmax_xent.py`    Softmax, LogSoftmax, their lowering into `ir.RowOp`s, and the
                       cross-entropies (softmax, sparse softmax, sigmoid, weighted);
- `basic.py`           the small ops: L2Loss, BiasAdd (`bias_add`, `xw_plus_b`), `moments`,
                       `l2_normalize`, `batch_normalization`, `dropout`, `zero_fraction`;
- `topk.py`            TopKV2 (`top_k`), its gradient TopKGrad, InTopKV2 (`in_top_k`);
- `embedding.py`       `embedding_lookup` (sharded tables too);
- `conv.py`            Conv2D and its gradients Conv2DBackpropInput/Filter (`conv2d`);
- `pool.py`            MaxPool, AvgPool and their gradients (`max_pool`, `avg_pool`);
- `depthwise.py`       DepthwiseConv2dNative and its gradients (`depthwise_conv2d`,
                       `separable_conv2d`);
- `window.py`          what the window ops (convolutions, pooling) share: their arguments
                       (strides, padding, NCHW), output geometry and NumPy reference helpers;
- `window_lowering.py` the lowering of every window op into one `ir.LibCall` of the backends'
                       window library (and the choice of the Winograd routines).

The package itself exports nothing: code imports each name from the module that defines it,
and op discovery (jitflow/ops/__init__.py) reads each module's `__all__` and `NAMESPACES`.
"""

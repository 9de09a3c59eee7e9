"""Libraries built from ops, as TF1 ships them: `layers.py` (`tf.layers`), `rnn_cell.py` and
`rnn.py` (`tf.nn.rnn_cell`, `static_rnn`, `dynamic_rnn`), `metrics.py` (`tf.metrics`),
`summary.py` (`tf.summary`). The input pipeline (`jitflow/data/`), training
(`jitflow/train/`) and SavedModels (`jitflow/saved_model/`) have folders of their own."""

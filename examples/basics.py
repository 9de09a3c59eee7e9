"""TF1 basics with jitflow: placeholders, variables, scopes, shape ops and fetch structures."""
import collections

import numpy as np

import jitflow as tf

# A graph with a fed input, shared variables and a few shape ops.
x = tf.placeholder(tf.float32, [None, 3], name="x")


def dense(inputs, units, name):
    """One layer whose variables live in (and are shared through) a variable scope."""
    with tf.variable_scope(name, reuse=tf.AUTO_REUSE):
        w = tf.get_variable("w", [inputs.shape[1].value, units],
                            initializer=tf.constant_initializer(0.5))
        b = tf.get_variable("b", [units], initializer=tf.zeros_initializer())
        return tf.matmul(inputs, w) + b


hidden = dense(x, 4, "layer")
again = dense(x, 4, "layer")             # same variables: layer/w, layer/b
rows = tf.unstack(tf.transpose(hidden[:, ::2]))
total = tf.Variable(0.0, name="total")
accumulate = total.assign_add(tf.reduce_sum(hidden))

print("variables:", [v.name for v in tf.global_variables()])
print("ops reuse the scope as layer_1/:", again.op.name)
print("static shapes:", hidden.shape, rows[0].shape)

Result = collections.namedtuple("Result", ["hidden", "rows"])
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    feed = {x: np.arange(6, dtype=np.float32).reshape(2, 3)}
    out = sess.run({"result": Result(hidden, rows), "step": accumulate,
                    "init": tf.no_op()}, feed)
    print("hidden:\n", out["result"].hidden)
    print("rows of the strided slice:", out["result"].rows)
    print("accumulated:", out["step"], "fetching an op gives", out["init"])
    # Feeding an intermediate tensor skips the ops that compute it.
    print("hidden fed directly:", sess.run(tf.reduce_sum(hidden), {hidden: np.ones((1, 4))}))
    print("total is still", sess.run(total))

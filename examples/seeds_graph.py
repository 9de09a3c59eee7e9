"""The first seed's program: z = (a * b) / (a + b) with a = 15, b = 5. Prints 3.75."""
import jitflow as tf

with tf.Session() as sess:
    a = tf.constant(15, name="a")
    b = tf.constant(5, name="b")
    prod = tf.multiply(a, b, name="Multiply")
    total = tf.add(a, b, name="Add")
    res = tf.divide(prod, total, name="Divide")
    print(sess.run(res))

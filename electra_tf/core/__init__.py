"""The ground floor: errors every layer raises, the configuration, file helpers, and the
framework error texts electra_tf reads (framework_messages).

Nothing here imports another part of electra_tf.
"""

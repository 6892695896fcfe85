"""The ground floor: errors every layer raises, the configuration, and file helpers.

Nothing here imports another part of electra_tf.
"""

"""`python -m export.client` from a clone: the same command as `python -m electra_tf.query`."""

from electra_tf.query import run

if __name__ == "__main__":
    run()

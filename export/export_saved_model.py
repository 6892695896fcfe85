"""`python -m export.export_saved_model` from a clone: the same command as `python -m electra_tf.export_saved_model`."""

from electra_tf.export_saved_model import run

if __name__ == "__main__":
    run()

"""core/framework_messages.py: each framework error text electra_tf reads, provoked from the
framework itself, so that a change of its wording fails here (not as a traceback where
a user expected one line).

The multi-worker and multi-host texts need a peer gone mid-run: the slow tests
tests/training/test_training_faults.py::test_multi_worker_peer_that_fails_at_start_up_stops_the_other
and tests/training/test_jax_multihost.py::test_a_second_sigterm_stops_its_process_alone_and_the_other_with_one_line
provoke them; here only their parsing is pinned.
"""

from __future__ import annotations

import errno
import os

import pytest

from electra_tf.core import framework_messages

L = 8


def _example(ids, length=L, keys=("input_ids", "input_mask", "segment_ids")):
    """A serialized pre-training example (data/features.py's keys; `keys`: those it holds)."""
    import tensorflow as tf

    ids = list(ids) + [0] * (length - len(ids))
    feature = {k: tf.train.Feature(int64_list=tf.train.Int64List(
        value=ids if k == "input_ids" else [1] * length)) for k in keys}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _parse_in_tf_data(records):
    """The pipeline's parse (data/features.parse_examples), as tf.data runs it."""
    import tensorflow as tf

    from electra_tf.data.features import parse_examples

    ds = tf.data.Dataset.from_tensor_slices(records).batch(2)
    return [batch for batch in ds.map(lambda s: parse_examples(s, L))]


def test_a_corrupt_tfrecord_gives_its_offset_and_the_file_is_found(tmp_path):
    import tensorflow as tf

    from electra_tf.data.tfrecord_reader import locate_corrupt_record

    good, bad = str(tmp_path / "good.tfrecord"), str(tmp_path / "bad.tfrecord")
    for path in (good, bad):
        with tf.io.TFRecordWriter(path) as writer:
            for i in range(6):
                writer.write(_example([2, 5 + i, 3]))
    raw = bytearray(open(bad, "rb").read())
    raw[len(raw) // 2] ^= 0x10  # a bit flip in a record far from the first
    open(bad, "wb").write(bytes(raw))
    with pytest.raises(tf.errors.DataLossError) as raised:
        list(tf.data.TFRecordDataset([bad]))
    found = framework_messages.corrupt_record(raised.value.message)
    assert found is not None, raised.value.message
    said, offset = found
    assert said == f"corrupted record at {offset}" and 0 < offset < len(raw)
    assert locate_corrupt_record([good, bad], raised.value.message) == bad


def test_a_record_of_another_length_or_without_a_feature_is_read(tmp_path):
    import tensorflow as tf

    assert len(_parse_in_tf_data([_example([2, 3])])) == 1  # one that fits
    for record, want in ((_example([2, 3], length=L + 4), "Number of int64 values != expected"),
                         (_example([2, 3], keys=("input_ids", "segment_ids")),
                          "Feature: input_mask (data type: int64) is required")):
        with pytest.raises(tf.errors.InvalidArgumentError) as raised:
            _parse_in_tf_data([record])
        said = framework_messages.misshaped_record(raised.value.message)
        assert said is not None and said.startswith(want), raised.value.message


@pytest.mark.parametrize("token_id", [30, 41])
def test_a_token_id_outside_the_embedding_table_is_read(token_id):
    """The model's lookup (keras Embedding, modeling/layers.py) in a compiled step on CPU.
    (A negative id never gets here: Keras' take reads it from the table's end, as NumPy
    does; the check before the run refuses one in a file's first record.)"""
    import keras
    import tensorflow as tf

    table = keras.layers.Embedding(30, 4)
    lookup = tf.function(lambda ids: table(ids))
    assert lookup(tf.constant([[1, 29]])).shape == (1, 2, 4)
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        lookup(tf.constant([[1, token_id, 2]]))
    assert framework_messages.id_out_of_range(raised.value.message) == (token_id, 30), \
        raised.value.message


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_full_disk_is_read_from_tensorflows_resource_exhausted_error():
    """ENOSPC through TensorFlow's file system (a checkpoint, a summary): its
    ResourceExhaustedError, whose text tells it from running out of memory."""
    import tensorflow as tf

    with pytest.raises(tf.errors.ResourceExhaustedError) as raised:
        with tf.io.gfile.GFile("/dev/full", "wb") as f:
            f.write(b"x" * 65536)
    line = framework_messages.disk_full_line(raised.value.message)
    assert line == "/dev/full: No space left on device", raised.value.message  # "; " before
    # an op's, and a SavedModel's temporary named as the file it was to become
    with pytest.raises(tf.errors.ResourceExhaustedError) as raised:
        tf.io.write_file("/dev/full", b"x" * 65536)
    assert framework_messages.disk_full_line(raised.value.message).endswith(
        "/dev/full: No space left on device"), raised.value.message
    assert framework_messages.disk_full_line(
        "/m/x/.tmp-1-a/saved_model.pb.tmpca91f0e3; No space left on device") == \
        "/m/x/.tmp-1-a/saved_model.pb: No space left on device"
    assert framework_messages.disk_full_line("OOM when allocating tensor with shape[4096]") \
        is None
    # what TensorFlow quotes: the C library's strerror
    assert framework_messages.DISK_FULL == (os.strerror(errno.ENOSPC),
                                            os.strerror(errno.EDQUOT),
                                            os.strerror(errno.EFBIG))


def test_the_peer_texts_are_parsed(capsys):
    message = ("{{function_node __inference_step_123}} The following tasks are unhealthy "
               "(stopped sending heartbeats):\n/job:worker/replica:0/task:1\n"
               "/job:worker/replica:0/task:1\nThe tasks have crashed.")
    assert framework_messages.unhealthy_tasks(message) == [("worker", "1")]
    assert framework_messages.unhealthy_tasks("Socket closed") == []
    assert framework_messages.without_function_node(message).startswith("The following")
    # a chief killed mid-collective, as a worker's all-reduce reports it (the reason had
    # been "(Graph execution error:)", the message's first line, naming no task)
    killed = ('Graph execution error:\n\nDetected at node CollectiveReduceV2 defined at '
              '(most recent call last):\n  File "<frozen runpy>", line 198, in x\n\n'
              '  File "/a/tensorflow.py", line 262, in total\n\nCollective ops is aborted '
              'by: failed to connect to all addresses; last error: UNKNOWN: '
              'ipv4:127.0.0.1:31182: Failed to connect to remote host: Connection refused\n'
              'Additional GRPC error information from remote target /job:worker/replica:0/'
              'task:0 while calling /tensorflow.WorkerService/CompleteInstance:\n:UNKNOWN:'
              'Error received from peer  {grpc_message:"failed to connect"}')
    assert framework_messages.unhealthy_tasks(killed) == []
    assert framework_messages.unreachable_tasks(killed) == [("worker", "0")]
    assert framework_messages.first_reason(killed).startswith("Collective ops is aborted by")
    assert framework_messages.first_reason("Graph execution error:\n\n") == ""
    from electra_tf.cli import _peer_down

    assert _peer_down(killed) == (
        "--strategy=multi_worker: worker 0 of TF_CONFIG's cluster cannot be reached "
        f"({framework_messages.first_reason(killed)}): it stopped (its own log says why) or "
        "its host is down, so this worker stops too; rerun every worker to resume")
    assert _peer_down("Graph execution error:\n") == (
        "--strategy=multi_worker: a worker of the cluster is down or cannot be reached "
        "(unavailable)")
    # workers of clusters of other sizes (a traceback at the first all-reduce)
    joining = ("Graph execution error:\n\nDevice /job:worker/replica:0/task:1/device:CPU:0 is "
               "joining a group with size3, but that group has size 2 (group_key=1)")
    assert framework_messages.group_sizes(joining) == (3, 2)
    assert framework_messages.group_sizes(killed) is None
    import tensorflow as tf

    from electra_tf import cli

    def collective():
        raise tf.errors.InternalError(None, None, joining)

    with pytest.raises(SystemExit) as stopped:
        cli.run_cli(collective)
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: --strategy=multi_worker: the workers' TF_CONFIG clusters differ (a worker's "
        "lists 3 tasks, another's 2); give every worker the same cluster")
    assert framework_messages.jax_peer_lost("Gloo AllReduce failed: Connection reset by peer")
    assert not framework_messages.jax_peer_lost("RESOURCE_EXHAUSTED: Out of memory")


def test_a_line_quoting_a_huge_value_is_cut_to_its_start_and_end():
    """The line a command prints: a word over 1,000 characters keeps its first 400 and
    last 100; a line over 8,000 its first 6,000 and last 1,000; spaces and paths as they
    are."""
    from electra_tf.core.errors import clipped

    path = "/data/" + "d" * 900 + "/train.tsv"  # a long path: as it is
    assert clipped(f"{path}:3: label 'x' is not one of a, b") == \
        f"{path}:3: label 'x' is not one of a, b"
    word = "a" * 400 + "b" * 5000 + "c" * 100
    assert clipped(f"label {word} here") == f"label {'a' * 400}...[5,000 characters]..." \
                                             f"{'c' * 100} here"
    many = " ".join(["word"] * 3000)  # 14,999 characters
    out = clipped(many)
    assert out == many[:6000] + "...[7,999 characters]..." + many[-1000:]

"""The TF Serving layout, the vocab asset, export_info.json, atomic versions and the CLI."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from export_helpers import FINETUNED
from helpers import error_line, patience, popen_python, run_module


def test_tf_serving_layout_with_vocab_asset(exports, tiny_vocab):
    for name, (_, path) in exports.items():
        assert os.path.basename(path) == "1" and os.path.basename(os.path.dirname(path)) == name
        files = set(os.listdir(path))
        assert {"saved_model.pb", "variables", "assets", "assets.extra"} <= files, files
        with open(os.path.join(path, "assets", "vocab.txt"), "rb") as f, \
                open(tiny_vocab, "rb") as g:
            assert f.read() == g.read()
        extra = set(os.listdir(os.path.join(path, "assets.extra")))
        assert extra == {"tf_serving_warmup_requests", "export_info.json"}
        assert not [n for n in os.listdir(os.path.dirname(path)) if n.startswith(".tmp")]


def test_the_export_follows_the_umask(exports):
    """Not mkdtemp's 0700: a TF Serving process of another user must read the export
    written under umask 022 (folders 0755, files 0644)."""
    from electra_tf.core.fileio import current_umask

    mask = current_umask()
    for _, path in exports.values():
        assert os.stat(path).st_mode & 0o777 == 0o777 & ~mask, path
        for folder, dirs, files in os.walk(path):
            for name in dirs:
                assert os.stat(os.path.join(folder, name)).st_mode & 0o777 == 0o777 & ~mask
            for name in files:
                mode = os.stat(os.path.join(folder, name)).st_mode & 0o777
                assert mode == 0o666 & ~mask, (os.path.join(folder, name), oct(mode))


def test_export_info_names_the_signatures(exports):
    with open(os.path.join(exports["squad"][1], "assets.extra", "export_info.json")) as f:
        info = json.load(f)
    assert info["task"] == "squad" and info["task_name"] == "squad_v2"
    assert info["signatures"] == {"serving_default": ["question", "context"],
                                  "serving_ids": ["input_word_ids", "input_mask",
                                                  "input_type_ids"]}
    from electra_tf.tasks.squad import question_limit

    spec = exports["squad"][0]  # the cut its graph makes, for a client packing ids
    assert info["question_limit"] == question_limit(spec.max_query_length,
                                                    spec.max_seq_length)
    with open(os.path.join(exports["ner_ids"][1], "assets.extra", "export_info.json")) as f:
        info = json.load(f)
    assert info["ids_only"] and list(info["signatures"]) == ["serving_default"]
    assert info["label_names"] == FINETUNED["ner"][2]


@pytest.fixture(scope="module")
def next_export(exports, finetuned_dirs, tmp_path_factory):
    """One export (no warmup) into MODEL_BASE/m, which already holds version 3 and the
    temporary dirs of other exports: {"path", "parent", "made", "elsewhere", "outside"}.
    `made` is {name: (a dir?, old?, removed by the export?)}."""
    from electra_tf.serving import export as export_saved_model

    tmp = tmp_path_factory.mktemp("next_export")
    host = export_saved_model._host()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead_pid = int(dead.stdout)
    base = str(tmp / "base")
    parent = os.path.join(base, "m")
    outside = str(tmp / "outside")
    os.makedirs(os.path.join(outside, "keep"))
    old = time.time() - 2 * export_saved_model.STALE_AFTER_S
    made = {
        f".tmp-4-{host}-{dead_pid}-abc_12": (True, False, True),  # this host, dead process
        f".tmp-4-{host}-{os.getpid()}-live1": (True, False, False),  # a running export
        ".tmp-4-other-host-7-xyz": (True, False, False),  # another host, recent
        ".tmp-4-other-host-8-xyz": (True, True, True),  # another host, old
        ".tmp-4-nohost12": (True, True, False),  # not an export's name (no host/pid), old
        "3": (True, True, False),  # a version, however old (even empty)
        ".tmp-file": (False, True, False),  # not a dir
        "tmp-4-x": (True, True, False),  # not .tmp-
    }
    for name, (is_dir, is_old, _) in made.items():
        path = os.path.join(parent, name)
        if is_dir:
            os.makedirs(os.path.join(path, "variables"))
        else:
            os.makedirs(parent, exist_ok=True)
            open(path, "w").close()
        if is_old:
            os.utime(path, (old, old))
    os.symlink(outside, os.path.join(parent, ".tmp-4-link"))  # never followed nor removed
    os.utime(os.path.join(parent, ".tmp-4-link"), (old, old), follow_symlinks=False)
    elsewhere = [os.path.join(base, f".tmp-4-{host}-{dead_pid}-base"),
                 os.path.join(base, "other", f".tmp-4-{host}-{dead_pid}-name")]
    for path in elsewhere:
        os.makedirs(path)
    # --vocab_file given as a file named otherwise, on a file system of TensorFlow's (a
    # copy by shutil had been a traceback there): the asset is still vocab.txt
    import tensorflow as tf

    words = "ram://next_export/words.txt"
    tf.io.gfile.copy(exports["stsb"][0].tokenizer.vocab_file, words, overwrite=True)
    spec = dataclasses.replace(
        export_saved_model.load_spec("sequence_classification", finetuned_dirs["stsb"],
                                     vocab_file=words),
        length_buckets=exports["stsb"][0].length_buckets)
    path = export_saved_model.export(spec, base, "m", warmup=False)  # --nowarmup
    return {"path": path, "base": base, "parent": parent, "made": made,
            "elsewhere": elsewhere, "outside": outside}


def test_exports_the_next_version(next_export):
    assert next_export["path"] == os.path.join(next_export["parent"], "4")
    assert os.listdir(os.path.join(next_export["path"], "assets.extra")) == ["export_info.json"]
    assert os.listdir(os.path.join(next_export["path"], "assets")) == ["vocab.txt"]
    assert ".staging" not in os.listdir(next_export["path"])  # (the copy's staging folder)


def test_only_stale_temp_dirs_of_model_base_name_are_removed(next_export):
    want = sorted([n for n, (_, _, removed) in next_export["made"].items() if not removed]
                  + [".tmp-4-link", "4"])
    assert sorted(os.listdir(next_export["parent"])) == want
    assert os.path.isdir(os.path.join(next_export["outside"], "keep"))
    assert all(os.path.isdir(p) for p in next_export["elsewhere"])


def test_versions_are_never_overwritten(exports, next_export):
    from electra_tf.core.errors import InputError
    from electra_tf.serving import export as export_saved_model

    pb = os.path.join(next_export["path"], "saved_model.pb")
    stamp = os.stat(pb).st_mtime_ns
    with pytest.raises(InputError, match="never overwritten"):
        export_saved_model.export(exports["stsb"][0], next_export["base"], "m", version=4)
    assert os.stat(pb).st_mtime_ns == stamp


def test_a_failed_export_leaves_nothing(exports, tmp_path, monkeypatch):
    from electra_tf.core import fileio
    from electra_tf.serving import export as export_saved_model

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(fileio, "honour_umask", broken)  # after its temporary dir exists
    with pytest.raises(OSError, match="disk full"):
        export_saved_model.export(exports["stsb"][0], str(tmp_path), "m", version=2)
    # no 2, no temporary dir, and no model folder the export made (an empty one had
    # been left); one that was there before stays
    assert os.listdir(tmp_path) == []
    (tmp_path / "m").mkdir()
    with pytest.raises(OSError, match="disk full"):
        export_saved_model.export(exports["stsb"][0], str(tmp_path), "m", version=2)
    assert os.listdir(tmp_path / "m") == []


def test_a_write_the_disk_refuses_names_the_version_not_its_removed_temporary(
        exports, tmp_path, monkeypatch, capsys):
    """A full disk or a file size limit inside the export's temporary folder (Python's
    OSError or TensorFlow's error) had been said of a file in that folder, gone by then,
    with the hint that the files written before are whole: the version is named, and
    that nothing of it was published."""
    import errno

    import tensorflow as tf

    from electra_tf import cli
    from electra_tf.core import fileio
    from electra_tf.serving import export as export_saved_model

    def python_write(path, **kwargs):
        raise OSError(errno.EFBIG, "File too large", os.path.join(path, "saved_model.pb"))

    def tensorflow_write(path, **kwargs):
        raise tf.errors.ResourceExhaustedError(
            None, None, f"{path}/variables/variables_temp/part-0.data; No space left on device "
                        "[Op:SaveV2]")

    final = str(tmp_path / "m" / "2")
    monkeypatch.setattr(cli, "_command", "electra_tf.export_saved_model")
    for write, code in ((python_write, errno.EFBIG), (tensorflow_write, errno.ENOSPC)):
        monkeypatch.setattr(fileio, "honour_umask", write)
        with pytest.raises(OSError) as raised:
            export_saved_model.export(exports["stsb"][0], str(tmp_path), "m", version=2)
        assert (raised.value.errno, raised.value.filename) == (code, final)
        assert not os.path.exists(tmp_path / "m")

        def main(error=raised.value):
            raise error

        with pytest.raises(SystemExit):
            cli.run_cli(main)
        assert capsys.readouterr().err == (
            f"error: {final}: {os.strerror(code)} (an export is written into a temporary "
            "folder, renamed into place whole: that version was not published, and the "
            "versions there before are untouched; free space or lift the file size limit, "
            "then rerun)\n")


@pytest.mark.parametrize("taken", ["2", "002"])
def test_a_version_another_export_takes_meanwhile_is_left_alone(exports, tmp_path,
                                                                monkeypatch, taken):
    """Another export (or a folder "002", version 2 to TF Serving) landing while this one
    writes: one line, its files untouched, no temporary dir left."""
    from electra_tf.core.errors import InputError
    from electra_tf.serving import export as export_saved_model
    from electra_tf.serving import signatures

    declare = signatures.declare_input_shapes

    def and_another_export_lands(path):
        declare(path)
        os.makedirs(tmp_path / "m" / taken)
        (tmp_path / "m" / taken / "saved_model.pb").write_bytes(b"theirs")

    monkeypatch.setattr(signatures, "declare_input_shapes", and_another_export_lands)
    with pytest.raises(InputError, match=r"m/2 appeared during the export \(another export "
                                         r"took version 2\); not overwriting it"):
        export_saved_model.export(exports["stsb"][0], str(tmp_path), "m", version=2,
                                  warmup=False)
    assert sorted(os.listdir(tmp_path / "m")) == [taken]
    assert (tmp_path / "m" / taken / "saved_model.pb").read_bytes() == b"theirs"


def test_each_signature_is_traced_once(exports, tmp_path, monkeypatch):
    """write_out lists the endpoints' variables and tf.saved_model.save writes them: a
    tf.function endpoint would be traced by both (the save's own context is another
    cache key), which was a third of an export's time. The ids-only export's one
    signature builds its outputs once."""
    from electra_tf.serving import export as export_saved_model
    from electra_tf.serving import signatures

    calls = []
    ids_outputs = signatures.ids_outputs

    def counted(*args, **kwargs):
        calls.append(1)
        return ids_outputs(*args, **kwargs)

    monkeypatch.setattr(signatures, "ids_outputs", counted)
    export_saved_model.export(exports["stsb"][0], str(tmp_path), "m", ids_only=True,
                              warmup=False)
    assert len(calls) == 1


def _tmp_dirs(path):
    return sorted(n for n in os.listdir(path) if n.startswith(".tmp-"))


def test_a_killed_export_leaves_a_temp_dir_that_the_next_export_removes(
        finetuned_dirs, tmp_path):
    """Killed mid-export: its temporary dir stays, no version appears, and the next
    export's first step (clean_stale_tmp: this host, a dead process) removes it."""
    from electra_tf.serving import export as export_saved_model

    base, parent = str(tmp_path), os.path.join(str(tmp_path), "mrpc")
    proc = popen_python(
        ["-m", "export.export_saved_model", "--task=sequence_classification",
         f"--checkpoint={finetuned_dirs['mrpc']}", f"--model_base={base}", "--model_name=mrpc"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + patience(240)
        while not (os.path.isdir(parent) and _tmp_dirs(parent)):
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "no temporary dir appeared"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)  # mid-export: no chance to clean up
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()
    left = _tmp_dirs(parent)
    assert left and not [n for n in os.listdir(parent) if n.isdigit()], os.listdir(parent)
    removed = export_saved_model.clean_stale_tmp(parent)
    assert sorted(os.path.basename(p) for p in removed) == left
    assert os.listdir(parent) == []


def test_cli_refuses_an_existing_version_in_one_line(finetuned_dirs, tmp_path):
    """The one command-line test of export_saved_model: `error: ...`, status 2, before
    the model is built."""
    base = str(tmp_path)
    os.makedirs(os.path.join(base, "mrpc", "7"))  # an existing version (even empty)
    proc = run_module("export.export_saved_model", "--task=sequence_classification",
                      f"--checkpoint={finetuned_dirs['mrpc']}", f"--model_base={base}",
                      "--model_name=mrpc", "--version=7")
    error_line(proc, os.path.join(base, "mrpc", "7"), "already exists")
    assert sorted(os.listdir(os.path.join(base, "mrpc"))) == ["7"]


@pytest.mark.parametrize("task", ["sequence_classification", "rtd"])
def test_cli_refuses_a_missing_checkpoint_before_tensorflow_is_imported(task, tmp_path):
    """A wrong --checkpoint is one line in a fraction of a second: the files are checked
    before Keras and TensorFlow are imported (seconds), and nothing is written."""
    from helpers import run_module_reporting_tf

    proc, tf_imported = run_module_reporting_tf(
        "export.export_saved_model", f"--task={task}", f"--checkpoint={tmp_path / 'none'}",
        f"--model_base={tmp_path / 'models'}", "--model_name=m")
    error_line(proc, "--checkpoint: ", str(tmp_path / "none"), "not found")
    assert not tf_imported
    assert not (tmp_path / "models").exists()


def test_cli_rejects_a_checkpoint_of_another_task(finetuned_dirs, tmp_path):
    from electra_tf.core.errors import InputError
    from electra_tf.serving.export import load_spec

    with pytest.raises(InputError, match="a token_classification model, which --task=squad "
                                         r"cannot serve \(give --task=token_classification\)"):
        load_spec("squad", finetuned_dirs["ner"])
    with pytest.raises(InputError, match="finetuning_config.json not found"):
        load_spec("token_classification", str(tmp_path))


def _graph_def(path):
    from tensorflow.core.protobuf import saved_model_pb2

    sm = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        sm.ParseFromString(f.read())
    return sm.meta_graphs[0].graph_def


def _op_types(path):
    graph = _graph_def(path)
    ops = {n.op for n in graph.node}
    for fn in graph.library.function:
        ops |= {n.op for n in fn.node_def}
    return ops - {fn.signature.name for fn in graph.library.function}


def test_only_tf_serving_2_12_text_ops_and_none_in_the_ids_export(exports):
    import tensorflow as tf

    core = set(dir(tf.raw_ops))
    allowed = {"FastBertNormalize", "FastWordpieceTokenizeWithOffsets", "CaseFoldUTF8",
               "NormalizeUTF8"}  # in TF-Text 2.12.1, which TF Serving 2.12-2.19 link
    for name, (_, path) in exports.items():
        ops = _op_types(path)
        custom = ops - core
        assert not any("RoundRobin" in op for op in ops), name
        if name == "ner_ids":
            assert custom == set(), custom
        else:
            assert "FastWordpieceTokenizeWithOffsets" in custom and custom <= allowed, custom


def test_the_text_graph_stays_small(exports):
    """A server's graph optimizer spends an export's first request to each signature
    on every node of its graph (docs/serving.md): with RaggedTensor ops in the
    tokenization, packing and word grouping the tiny exports held 5,500-8,100
    function nodes (the NER one the most); as flat values and row splits, 2,600-3,800."""
    for name, (_, path) in exports.items():
        nodes = sum(len(fn.node_def) for fn in _graph_def(path).library.function)
        assert nodes < 4500, (name, nodes)


_SHOW = """
import contextlib, io, json, sys
from tensorflow.python.tools import saved_model_cli
out = {}
for path, signature in json.loads(sys.argv[1]):
    text = io.StringIO()
    with contextlib.redirect_stdout(text):  # what `saved_model_cli show --dir PATH
        saved_model_cli._show_inputs_outputs(path, "serve", signature)  # --tag_set serve
    out[path + "|" + signature] = text.getvalue()         # --signature_def SIG` prints
print("SHOW" + json.dumps(out))
"""


def _declared_inputs(shown: str) -> dict:
    """{input: (dtype, shape)} from saved_model_cli's listing of one signature."""
    import re

    inputs = shown.split("contains the following output(s)")[0]
    return {name: (dtype, shape) for name, dtype, shape in re.findall(
        r"inputs\['(\w+)'\] tensor_info:\s+dtype: (\w+)\s+shape: ([^\n]+)", inputs)}


def test_signatures_declare_input_shapes_and_dtypes(exports):
    """saved_model_cli show (the tool's own function, in a fresh process, which reads the
    signature def as the server's metadata does) lists each input with its rank: texts
    [batch] strings, ids [batch, seq] int32; before, every input had unknown rank."""
    jobs = [(exports[name][1], signature) for name in ("ner", "mrpc", "squad", "rtd")
            for signature in ("serving_default", "serving_ids")]
    jobs.append((exports["ner_ids"][1], "serving_default"))
    proc = subprocess.run([sys.executable, "-c", _SHOW, json.dumps(jobs)], capture_output=True,
                          text=True, timeout=patience(60),
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = json.loads(proc.stdout.split("SHOW", 1)[1])
    ids = {n: ("DT_INT32", "(-1, -1)") for n in ("input_word_ids", "input_mask",
                                                 "input_type_ids")}
    text = {"ner": ["text"], "mrpc": ["text", "text_pair"], "squad": ["question", "context"],
            "rtd": ["text"]}
    for name, names in text.items():
        assert _declared_inputs(shown[exports[name][1] + "|serving_default"]) == {
            n: ("DT_STRING", "(-1)") for n in names}, name
        assert _declared_inputs(shown[exports[name][1] + "|serving_ids"]) == ids, name
    assert _declared_inputs(shown[exports["ner_ids"][1] + "|serving_default"]) == ids


def test_only_names_tf_serving_reads_as_versions_count(tmp_path):
    from electra_tf.core.errors import InputError
    from electra_tf.serving.export import check_version, next_version

    for name in ("3", "²", "١٢", str(2**63), "07x", "+9", "-12"):
        os.makedirs(tmp_path / name)
    assert next_version(str(tmp_path)) == 4
    os.makedirs(tmp_path / " 007\t")  # safe_strto64: C spaces around digits, leading 0s
    assert next_version(str(tmp_path)) == 8
    with pytest.raises(InputError, match=r"/ 007\t is already version 7 to TF Serving"):
        check_version(str(tmp_path), 7)  # the export had written 7 beside it
    assert check_version(str(tmp_path), 9) == str(tmp_path / "9")  # "+9" is no version
    os.makedirs(tmp_path / str(2**63 - 1))  # no next version: had blamed a --version=2^63
    with pytest.raises(InputError, match=r"holds version 2\^63 - 1, the highest TF Serving "
                                         r"reads: there is no next one; give a free --version"):
        next_version(str(tmp_path))


@pytest.mark.parametrize("flag,message", [
    ("--model_name=../escape", "--model_name='../escape' must be one folder name (no '/', "
                               "not '.' or '..')"),  # had written beside --model_base
    ("--model_name=.", "--model_name='.' must be one folder name"),
    ("--max_query_length=-3", "--max_query_length must be >= 1 (or 0: the fine-tuning "
                              "run's), got -3"),
    ("--max_answer_length=-1", "--max_answer_length must be >= 1 (or 0: the fine-tuning "
                               "run's), got -1"),
    ("--doc_stride=-2", "--doc_stride must be >= 1 (or 0: the fine-tuning run's), got -2"),
    (f"--version={2**63}", "--version must be in [1, 2^63 - 1]"),
    ("--precision=fp16", "flag --precision=fp16: value should be one of <fp32|bf16>"),
])
def test_cli_refuses_values_no_server_could_use(flag, message, tmp_path):
    """A question limit below 1 had exported a model that failed every request; a
    version beyond int64 is no version TF Serving reads."""
    proc = run_module("export.export_saved_model", "--task=squad",
                      f"--checkpoint={tmp_path / 'none'}", f"--model_base={tmp_path / 'm'}",
                      "--model_name=q", flag)
    error_line(proc, message)
    assert os.listdir(tmp_path) == []


def test_an_export_is_on_the_disk_before_its_version_appears(tmp_path, monkeypatch):
    """TF Serving loads a version as soon as its folder appears: every file of it is
    synced before the rename, and the rename after."""
    from helpers import sync_log

    from electra_tf.serving import export as export_saved_model

    tmp = tmp_path / "m" / ".tmp-1-x"
    (tmp / "variables").mkdir(parents=True)
    (tmp / "saved_model.pb").write_bytes(b"pb")
    (tmp / "variables" / "variables.index").write_bytes(b"ix")
    events = sync_log(monkeypatch)
    export_saved_model._publish(str(tmp), str(tmp_path / "m"), 1, str(tmp_path / "m" / "1"))
    rename = ("rename", str(tmp), str(tmp_path / "m" / "1"))
    assert events[-2:] == [rename, ("fsync", str(tmp_path / "m"))]
    assert {e[1] for e in events[:-2]} == {
        str(tmp / "saved_model.pb"), str(tmp / "variables" / "variables.index"),
        str(tmp / "variables"), str(tmp)}
    assert (tmp_path / "m" / "1" / "saved_model.pb").read_bytes() == b"pb"


def test_a_temp_dir_of_a_running_process_number_is_kept_only_if_that_process_made_it(
        tmp_path):
    """A killed export's dir whose PID a later process holds (a restarted container's
    PIDs repeat) had been kept on every run: a process started after the dir was last
    written cannot have made it. This process's own dir, written now, is kept."""
    from electra_tf.serving import export as export_saved_model

    name = f".tmp-1-{export_saved_model._host()}-{os.getpid()}-abcdefgh"
    (tmp_path / name).mkdir()
    assert export_saved_model.clean_stale_tmp(str(tmp_path)) == []
    before = export_saved_model._started_at(os.getpid()) - 60  # made before this process
    os.utime(tmp_path / name, (before, before))
    assert export_saved_model.clean_stale_tmp(str(tmp_path)) == [str(tmp_path / name)]
    assert os.listdir(tmp_path) == []

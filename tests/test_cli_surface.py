"""What run_pretraining and run_finetuning show a user before any training: --help,
flagfiles, start-up noise. Fresh processes, as a user runs them."""

import json
import os
import re
import sys

import pytest
from helpers import REPO, run_module

from electra_tf.core.config import PRETRAINING_ONLY_OPTIONS


def _flag_help(stdout: str, flag: str) -> str:
    """The help of one flag in absl's --help listing (its line and the indented ones)."""
    match = re.search(rf"^  --(?:\[no\])?{flag}:(.*?)(?=^  --|\Z)", stdout, re.M | re.S)
    assert match, f"--{flag} not listed:\n{stdout[-3000:]}"
    return " ".join(match.group(1).split())


@pytest.mark.parametrize("module", ["electra_tf.run_pretraining", "electra_tf.run_finetuning"])
def test_help_lists_the_commands_own_flags_with_defaults_and_choices(module):
    proc = run_module(module, "--help")
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    out = proc.stdout
    # absl's and TensorFlow's own flags stay behind --helpfull
    assert "--logtostderr" not in out and "--flagfile:" not in out, out[-3000:]
    for flag in ("model_dir", "learning_rate", "strategy", "mixed_precision",
                 "worker_startup_timeout_s", "jit_compile"):
        _flag_help(out, flag)
    assert "one of: default, mirrored, multi_worker, tpu" in _flag_help(out, "strategy")
    assert "(default: 'default')" in _flag_help(out, "strategy")
    assert "one of: fp32, bf16" in _flag_help(out, "mixed_precision")
    sizes = _flag_help(out, "model_size")
    assert all(size in sizes for size in ("tiny", "small", "base", "large")), sizes
    timeout = _flag_help(out, "worker_startup_timeout_s")
    assert "(default: '600')" in timeout and "JAX" in timeout, timeout


@pytest.mark.parametrize("module", ["electra_tf.build_vocab",
                                    "electra_tf.build_pretraining_data"])
def test_the_data_commands_help_lists_the_flag_they_share(module):
    """--strip_accents is defined in cli.py for both: it was listed by --helpfull alone."""
    listed = _flag_help(run_module(module, "--help").stdout, "strip_accents")
    assert "<auto|true|false>" in listed and "(default: 'auto')" in listed, listed


def test_pretraining_help_names_the_objectives_and_the_demo_flags():
    out = run_module("electra_tf.run_pretraining", "--help").stdout
    assert ("one of: electra, bert_mlm, electra_15, replace_mlm, all_tokens_mlm"
            in _flag_help(out, "objective"))
    assert "one of: joint, two_stage, adversarial" in _flag_help(out, "training_algorithm")
    assert "(default: 'small')" in _flag_help(out, "model_size")
    _flag_help(out, "demo_data_dir")
    assert "one of: tf.data, numpy, packed" in _flag_help(out, "jax_input_pipeline")
    for flag in PRETRAINING_ONLY_OPTIONS:
        _flag_help(out, flag)


def test_finetuning_help_names_the_head_choices_and_no_pretraining_option():
    out = run_module("electra_tf.run_finetuning", "--help").stdout
    assert "one of: dense, mlp" in _flag_help(out, "classifier_head")
    assert "one of: BIO, BIOES" in _flag_help(out, "tagging_scheme")
    assert "one of: answerable, combined" in _flag_help(out, "squad_null_rule")
    _flag_help(out, "task_name")
    # Each command lists only its own flags: none of pre-training's JAX options.
    listed = [flag for flag in PRETRAINING_ONLY_OPTIONS
              if re.search(rf"^  --(?:\[no\])?{flag}:", out, re.M)]
    assert not listed, listed


def test_the_demo_flagfile_with_ones_own_train_data_builds_no_demo_data(tmp_path):
    """--train_data on the command line wins over configs/demo.flags' --demo_data_dir:
    the run checks the user's data (here: none) and builds no demo corpus first."""
    from helpers import error_line

    proc = run_module("electra_tf.run_pretraining", "--flagfile=configs/demo.flags",
                      f"--demo_data_dir={tmp_path}/demo", f"--model_dir={tmp_path}/model",
                      f"--train_data={tmp_path}/mine*", f"--vocab_file={tmp_path}/vocab.txt",
                      timeout=600)
    error_line(proc, "vocab")  # the user's vocab is checked, not the demo's built
    assert "[demo]" not in proc.stderr, proc.stderr[-3000:]
    assert not (tmp_path / "demo").exists() and not (tmp_path / "model").exists()


@pytest.mark.parametrize("flagfile", [["--flagfile=configs/demo.flags"],
                                      ["--flagfile", "configs/demo.flags"]])
def test_a_flag_on_the_command_line_wins_over_a_flagfile_given_after_it(flagfile, tmp_path):
    """Also `--flagfile PATH` (a space, not `=`): it had been read in place, its flags
    winning over those given before it, silently."""
    from helpers import error_line

    proc = run_module("electra_tf.run_pretraining", "--num_train_steps=0",
                      *flagfile, f"--model_dir={tmp_path}/model",
                      f"--train_data={tmp_path}/mine*", timeout=600)
    error_line(proc, "num_train_steps must be >= 1, got 0")
    assert not (tmp_path / "model").exists()


def test_flag_mistakes_are_one_line_each_and_path_flags_take_the_home_folder(tmp_path):
    """Each had been a traceback, a Python tuple, silence or a misleading line; a path
    flag's ~ given quoted had made a folder named ~ (build_vocab wrote ./~/v.txt)."""
    from helpers import child_env, error_line, run_python

    (tmp_path / "c.txt").write_text("hello world\nthe model replaced a token\n")
    (tmp_path / "bom.flags").write_bytes(b"\xef\xbb\xbf--vocab_size=200\n")
    (tmp_path / "inner.flags").write_text("# a comment on its own line\n"
                                          "--output=v2.txt  # beside the value\n")
    (tmp_path / "outer.flags").write_text(f"--flagfile={tmp_path}/inner.flags\n")
    command = ["electra_tf.build_vocab", f"--corpus={tmp_path}/c.txt",
               f"--output={tmp_path}/v.txt"]
    for given, line in (
            ("--nodo_lower_case=true", "error: --nodo_lower_case=true does not take an "
                                       "argument (a boolean is --name, --noname or "
                                       "--name=false)"),
            ("--do_lower_case=maybe", "error: flag --do_lower_case=maybe: not a boolean: "
                                      "'maybe' (give --name, --noname, --name=true or "
                                      "--name=false)"),
            ("--flagfile=", "error: --flagfile= names no file; give --flagfile=PATH"),
            (f"--flagfile={tmp_path}/bom.flags",
             "(a --flagfile starts with a byte-order mark, as some editors save UTF-8: "
             "save it without one)"),
            # (the value had been `v2.txt  # beside the value`, written silently)
            (f"--flagfile {tmp_path}/outer.flags",
             f"error: --flagfile {tmp_path}/inner.flags line 2: absl reads the # and "
             "what follows as part of --output's value ('v2.txt  # beside the value'); a "
             "flagfile's comment takes a line of its own")):
        assert error_line(run_module(*command, *given.split(" ")), line).endswith(line)
    # NVIDIA's name of a flag the command has (absl had suggested
    # --use_cprofile_for_profiling)
    line = ("error: Unknown command line flag 'use_amp': here it is --mixed_precision=bf16 "
            "(float16 is not offered: docs/backends.md)")
    assert error_line(run_module("electra_tf.run_pretraining", "--use_amp"), line) == line
    # the original's loss switches (absl had suggested --untied_generator for the last)
    for given, ours in (("--electric_objective", "--objective=electric"),
                        ("--electra_objective=false", "--objective (the original's "
                         "electra_objective=false is --objective=bert_mlm)"),
                        ("--two_tower_generator", "--objective=electric, which takes that "
                         "generator (ELECTRA's own objective with it is not offered)")):
        name = given.removeprefix("--").split("=")[0]
        line = f"error: Unknown command line flag {name!r}: here it is {ours}"
        assert error_line(run_module("electra_tf.run_pretraining", given), line) == line
    assert not list(tmp_path.glob("v2*"))
    proc = run_module("electra_tf.build_vocab", "-h")
    assert proc.returncode == 0 and "--corpus" in proc.stdout, proc.stderr[-2000:]
    home = tmp_path / "home"
    home.mkdir()
    proc = run_python(["-m", "electra_tf.build_vocab", "--corpus=~/../c.txt",
                       "--output=~/v.txt", "--vocab_size=200"], env=child_env(HOME=str(home)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (home / "v.txt").is_file() and not (tmp_path / "~").exists()


@pytest.mark.parametrize("script,flag", [("electra-pretrain", "learning_rate"),
                                         ("electra-export", "model_base"),
                                         ("electra-query", "server")])
def test_console_scripts_list_their_commands_flags(script, flag):
    # A console script's main module is the script, not the command module:
    # --help must still list the command's flags (cli.run_command adopts them).
    import os
    import sys

    from helpers import run_python

    path = os.path.join(os.path.dirname(sys.executable), script)
    assert os.path.exists(path), f"{path} missing: reinstall with pip install -e ."
    proc = run_python([path, "--help"])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    _flag_help(proc.stdout, flag)
    assert "--logtostderr" not in proc.stdout
    # the command's summary first, as `python -m` shows it (it had begun "USAGE: ...")
    module = {"electra-pretrain": "run_pretraining", "electra-export": "export_saved_model",
              "electra-query": "query"}[script]
    summary = __import__(f"electra_tf.{module}", fromlist=["x"]).__doc__.strip().splitlines()[0]
    assert proc.stdout.lstrip().startswith(summary), proc.stdout[:300]


def test_the_clones_export_shims_run_the_same_commands():
    proc = run_module("export.client", "--help")
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    _flag_help(proc.stdout, "model_name")
    proc = run_module("export.export_saved_model", "--task=rtd")
    assert proc.returncode == 2 and "error: --checkpoint is required" in proc.stderr, proc.stderr


def test_help_exits_0_for_every_command():
    """absl's --help exits with status 1, a failure to a script (#54); every console script
    of setup.py answers --help (and --helpfull) with its help and status 0, while a flag
    that does not parse is one `error:` line and status 2, as other bad input (absl's
    own parsing printed two lines and exited 1)."""
    import os

    from helpers import REPO

    setup = open(os.path.join(REPO, "setup.py"), encoding="utf-8").read()
    modules = re.findall(r'"electra-[\w-]+=([\w.]+):run"', setup)
    assert len(modules) >= 10, modules
    for module in [*modules, "export.client", "export.export_saved_model"]:
        proc = run_module(module, "--help")
        assert proc.returncode == 0, (module, proc.returncode, proc.stderr[-2000:])
        assert "Try --helpfull" in proc.stdout and "Traceback" not in proc.stderr, module
    proc = run_module(modules[0], "--helpfull")
    assert proc.returncode == 0 and "--flagfile" in proc.stdout
    from helpers import error_line

    error_line(run_module(modules[0], "--no_such_flag"), "Unknown command line flag")
    error_line(run_module("electra_tf.run_pretraining", "--num_train_steps=abc"),
               "flag --num_train_steps=abc: invalid literal for int()")
    error_line(run_module("electra_tf.run_finetuning", "--flagfile=/no/such.flags"),
               "error: Unable to open flagfile")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:  # Latin-1: absl raised UnicodeDecodeError
        latin = os.path.join(tmp, "latin.flags")
        with open(latin, "wb") as f:
            f.write("--model_dir=caf\u00e9\n".encode("latin-1"))
        error_line(run_module("electra_tf.run_pretraining", f"--flagfile={latin}"),
                   f"error: --flagfile {latin} is not UTF-8 text (invalid continuation byte)")
    # A value apart from its flag is a positional argument: one line, not absl's whole help
    proc = run_module("electra_tf.eval_mrqa", "--data_file=x", "--predictions=y",
                      "--skip_no_answer", "true")
    error_line(proc, "error: unexpected arguments: ['true'] (every flag takes its value after "
               "an equals sign, --name=value;")
    assert proc.stdout == "", proc.stdout[-2000:]


def test_another_scripts_flag_name_is_told_as_given_on_or_off(monkeypatch):
    """`--use_xla=false` had been told "here it is --jit_compile=true", the opposite;
    --nouse_xla, --use_bf16, --precision (the export's) and fine-tuning's
    --gradient_accumulation_steps had no hint."""
    from absl import flags

    from electra_tf import cli
    from electra_tf import flags as flags_lib

    pretraining, finetuning = flags.FlagValues(), flags.FlagValues()
    flags_lib.define_pretraining_flags(pretraining)
    flags_lib.define_finetuning_flags(finetuning)
    monkeypatch.setattr(cli.flags, "FLAGS", pretraining)
    for given, hint in (("--use_xla", "--jit_compile=true"),
                        ("--use_xla=false", "--jit_compile=false, the default"),
                        ("--USE_XLA=0", "--jit_compile=false, the default"),
                        ("--nouse_xla", "--jit_compile=false, the default"),
                        ("--amp=false", "--mixed_precision=fp32, the default"),
                        ("--use_bf16", "--mixed_precision=bf16 (float16 is not offered: "
                                       "docs/backends.md)"),
                        ("--precision=bf16", "--mixed_precision=bf16 or fp32 (--precision "
                                             "is the export's flag)"),
                        ("--use_cprofile", None)):
        name = given.lstrip("-").split("=")[0]
        assert cli._other_name(name, ["run_pretraining", given]) == (
            hint and f"here it is {hint}"), given
    # given in a --flagfile, which argv does not show: both forms
    assert cli._other_name("use_xla", ["run_pretraining", "--flagfile=f"]) == (
        "here it is --jit_compile=true (or --jit_compile=false, the default)")
    assert cli._other_name("gradient_accumulation_steps", []) is None  # pre-training has it
    # NVIDIA's name (absl had suggested --num_train_steps)
    assert cli._other_name("num_accumulation_steps", ["x", "--num_accumulation_steps=4"]) == (
        "here it is --gradient_accumulation_steps")
    assert cli._other_name("iterations_per_loop", []) is None  # pre-training has it
    assert cli._other_name("init_checkpoint", ["x", "--init_checkpoint=conv"]).startswith(
        "no --init_checkpoint in pre-training: --model_dir=FOLDER")
    monkeypatch.setattr(cli.flags, "FLAGS", finetuning)
    assert cli._other_name("gradient_accumulation_steps", ["x", "--gradient_accumulation_steps"
                                                           "=2"]) == (
        "no gradient accumulation in fine-tuning: give a --train_batch_size that fits")
    assert cli._other_name("nogradient_accumulation_steps", []) is None  # (no switch)
    # the original's fine-tuning flag (a bare "Unknown command line flag")
    assert cli._other_name("iterations_per_loop", ["x", "--iterations_per_loop=100"]) == (
        "here it is --log_every_steps (the steps between console lines, summaries and "
        "signal checks)")


def test_a_stdout_that_cannot_take_the_output_is_one_line(capsys, monkeypatch):
    """score and results_table print through cli.write_stdout: a full (/dev/full) or
    closed (>&-) stdout had been told as a file write ("the files written before are
    whole: ...") or ended in an AttributeError traceback."""
    import io

    from electra_tf import cli

    class Full(io.StringIO):
        def flush(self):
            raise OSError(28, "No space left on device")

    for stdout, reason in ((Full(), "No space left on device"), (None, "it is closed")):
        monkeypatch.setattr("sys.stdout", stdout)
        with pytest.raises(SystemExit) as raised:
            cli.run_cli(lambda: cli.write_stdout("0.5\n"))
        monkeypatch.undo()
        assert raised.value.code == 1
        assert capsys.readouterr().err == (
            f"error: cannot write the output to the standard output ({reason})\n")

    class Closed(io.StringIO):  # | head: left to the pipe's handling
        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr("sys.stdout", Closed())
    with pytest.raises(BrokenPipeError):
        cli.write_stdout("x\n")
    # a stdout of another encoding (PYTHONIOENCODING=ascii): escaped, as the error lines
    # are (a folder named "nöeval" had ended results_table in a UnicodeEncodeError)
    ascii_out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr("sys.stdout", ascii_out)
    cli.write_stdout("| nöeval_é | 60.0 |\n")
    cli.write_stdout(json.dumps({"tokens": ["café", "😀"]}, ensure_ascii=False) + "\n")
    lines = ascii_out.buffer.getvalue().decode("ascii").splitlines()
    assert lines[0] == "| n\\u00f6eval_\\u00e9 | 60.0 |"  # JSON's escapes, which JSON reads:
    assert json.loads(lines[1]) == {"tokens": ["café", "😀"]}  # (backslashreplace's \\xe9 not)


def test_no_writable_temporary_folder_is_one_line(capsys):
    """tempfile's FileNotFoundError (a full disk under TMPDIR, /tmp and the working
    folder; met first in TensorFlow's import) had been a 60-line traceback."""
    from electra_tf import cli

    def main():
        raise FileNotFoundError(2, "No usable temporary directory found in ['/tmp', "
                                   "'/var/tmp', '/usr/tmp', '/work']")

    with pytest.raises(SystemExit) as raised:
        cli.run_cli(main)
    assert raised.value.code == 1
    assert capsys.readouterr().err == (
        "error: no temporary folder can be written (tempfile tried TMPDIR, /tmp, /var/tmp "
        "and the working folder: a full disk or a file size limit?); free space, or set "
        "TMPDIR to a folder with room\n")


def test_every_command_s_output_goes_through_write_stdout(tmp_path):
    """query and the three evaluators printed their answer with print(): a closed stdout
    (>&-) lost it silently, exit 0 (Python's sys.stdout is then None and print drops
    it), and /dev/full was told as a file write. Now no module prints to stdout but
    write_stdout (the demo corpus's progress line aside), and the closed stdout is one
    line, status 1."""
    import ast
    import glob
    import subprocess

    from helpers import REPO, child_env

    bare = []
    for path in sorted(glob.glob(os.path.join(REPO, "electra_tf", "**", "*.py"),
                                 recursive=True)):
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print"
                    and not any(k.arg == "file" for k in node.keywords)):
                bare.append(f"{os.path.relpath(path, REPO)}:{node.lineno}")
    assert bare == ["electra_tf/data/demo_corpus.py:221"], bare
    predictions = tmp_path / "predictions.json"
    predictions.write_text('{"q1": "a"}')
    data = tmp_path / "dev.jsonl"
    data.write_text('{"header": {"dataset": "x"}}\n' + json.dumps(
        {"context": "a b", "qas": [{"qid": "q1", "question": "what", "answers": ["a"]}]})
        + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "electra_tf.eval_mrqa", f"--data_file={data}",
         f"--predictions={predictions}"], cwd=REPO, env=child_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, timeout=120, preexec_fn=lambda: os.close(1))
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: cannot write the output to the standard output (it is closed)"), proc.stderr


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """`score ... | head -1`: score writes its lines a chunk at a time, and the second
    chunk met the closed pipe in a BrokenPipeError traceback (exit 1); now nothing
    more, and the status a shell reports for a tool SIGPIPE ended (141)."""
    import subprocess
    import sys

    from helpers import REPO, child_env

    code = ("from electra_tf import cli\n"
            "cli.run_cli(lambda: [cli.write_stdout('0.5\\n' * 8192) for _ in range(100)])\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline() == b"0.5\n"
    proc.stdout.close()  # as head -1 does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and err == "", err


_WARNING_FROM_A_TASK = r"""
import sys
from absl import app, logging
from electra_tf import cli
from electra_tf.core.config import FinetuningConfig
from electra_tf.tasks.registry import task_from_config

def main(argv):
    logging.warning("a library's own warning")  # not electra_tf's: quiet, as TensorFlow's
    task = task_from_config(FinetuningConfig(task_name="rte", skip_malformed_rows=True))
    print(len(task.read(sys.argv[1], "dev")), "examples")

app.run(lambda argv: cli.run_cli(lambda: main(argv)), argv=sys.argv[:1])
"""


def test_the_tasks_warnings_reach_the_console_and_tensorflows_stay_quiet(tmp_path):
    """A question the original skips, a row --skip_malformed_rows drops: the docs promise a
    warning, which the readers log through absl; the commands had set absl to errors only
    (for TensorFlow's own lines), so a run dropped data without a word."""
    from helpers import run_python

    (tmp_path / "RTE").mkdir()
    (tmp_path / "RTE" / "dev.tsv").write_text(
        "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tb\n"
        "2\tc\td\tnot_entailment\n", encoding="utf-8")
    proc = run_python(["-c", _WARNING_FROM_A_TASK, str(tmp_path / "RTE")])
    assert proc.returncode == 0 and proc.stdout == "2 examples\n", proc.stderr[-3000:]
    said = [line for line in proc.stderr.splitlines() if "warning" in line.lower()]
    assert said == [f"warning: skipping malformed row {tmp_path}/RTE/dev.tsv:3: expected at "
                    "least 4 tab-separated columns (index, sentence1, sentence2, label), "
                    "found 3"], proc.stderr[-3000:]


_FIRST_IMPORT = r"""
import sys
from electra_tf import cli

def main():
    import keras  # keras first (TensorFlow inside it), as the training commands
    import tensorflow as tf
    print(*sorted(m for m in ("sklearn", "pandas", "jax") if m in sys.modules))
    import pandas, sklearn  # a later import of them (seqeval's sklearn, a user's pandas)
    print(sklearn.__name__, pandas.__name__, keras.backend.backend(), tf.constant(2).numpy())
    print(not any(type(f).__name__ == "_LeanFrameworkFinder" for f in sys.meta_path))

cli.run_cli(main)
"""


def test_a_commands_tensorflow_comes_without_keras_and_tf_lites_optional_imports():
    """A command's first import of Keras and TensorFlow leaves out scikit-learn, pandas
    (Keras' wrappers and DataFrame inputs) and JAX (TF Lite's), about 2 s of CPU at every
    start on 2 cores; imported afterwards, they load whole; the finder is gone. (Under
    KERAS_BACKEND=jax Keras imports JAX as before: every JAX command run shows it.)"""
    from helpers import run_python

    proc = run_python(["-c", _FIRST_IMPORT])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["", "sklearn pandas tensorflow 2", "True"], proc.stdout


def test_the_first_import_leaves_jax_importable_where_keras_json_picks_it(tmp_path, monkeypatch):
    """JAX stays importable during that first import wherever Keras will take the JAX
    backend, set in KERAS_BACKEND or in keras.json (TensorFlow's import imports Keras,
    which then imports JAX), and where a keras.json cannot be read."""
    from electra_tf import cli

    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    assert cli._keras_backend() == "jax"
    monkeypatch.delenv("KERAS_BACKEND")
    for text, backend in (('{"backend": "jax"}', "jax"), ('{"backend": "tensorflow"}',
                                                          "tensorflow"), ("{not json", "jax")):
        (tmp_path / "keras.json").write_text(text, encoding="utf-8")
        assert cli._keras_backend() == backend, text


@pytest.mark.parametrize("missing", ["tensorflow", "tensorflow_text"])
def test_finetuning_without_tensorflow_is_one_line(missing, monkeypatch):
    """run_finetuning on a machine set up for JAX alone: it needs TensorFlow and
    tensorflow-text on either backend (tf.data input, their tokenizer), which had been
    a traceback from the tokenizer's import; now one line, checked before the backend
    starts."""
    from electra_tf.core.errors import ConfigError
    from electra_tf.run_finetuning import require_tensorflow

    require_tensorflow()  # both installed here
    monkeypatch.setitem(sys.modules, missing, None)  # an import of it fails
    with pytest.raises(ConfigError, match=r"^run_finetuning needs (TensorFlow|tensorflow-text), "
                       r"which is not installed here: on either Keras backend"):
        require_tensorflow()


@pytest.mark.parametrize("how", [pytest.param("env", marks=pytest.mark.slow), "keras.json"])
def test_the_tensorflow_commands_set_a_jax_backend_aside(how, tmp_path):
    # score under KERAS_BACKEND=jax (or keras.json's jax) had ended in a traceback
    # ("Cannot convert a symbolic tf.Tensor"); the export had set aside the variable only
    # (slow: the variable's case, which the slow JAX export test also runs)
    import json
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env["KERAS_HOME"] = str(tmp_path)
    if how == "env":
        env["KERAS_BACKEND"] = "jax"
    else:
        (tmp_path / "keras.json").write_text(json.dumps({"backend": "jax"}))
    proc = subprocess.run(
        [sys.executable, "-c", "import os; from electra_tf import cli; "
         "cli.tensorflow_backend('score', 'scores are computed with Keras on TensorFlow'); "
         "import keras; print(os.environ['KERAS_BACKEND'], keras.backend.backend())"],
        env=env, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["tensorflow", "tensorflow"]
    assert "[score] Keras' jax backend (KERAS_BACKEND or keras.json) set aside: scores are " \
           "computed with Keras on TensorFlow" in proc.stderr


def test_usage_examples_keep_their_line_continuations():
    """A `\\` that ends a line of a docstring's command is a line continuation in a
    plain string: --help had shown `--flagfile=configs/base.flags         --train_data=...`,
    two lines run into one. Every such string is raw (its backslashes as written)."""
    import glob
    import os
    import tokenize

    joined = []
    for path in sorted(glob.glob(os.path.join(REPO, "electra_tf", "**", "*.py"), recursive=True)
                       + glob.glob(os.path.join(REPO, "export", "*.py"))
                       + glob.glob(os.path.join(REPO, "benchmarks", "*.py"))):
        with open(path, "rb") as f:
            for token in tokenize.tokenize(f.readline):
                if token.type == tokenize.STRING and "\\\n" in token.string \
                        and not token.string.lower().startswith(("r", "br", "rb")):
                    joined.append(f"{os.path.relpath(path, REPO)}:{token.start[0]}")
    assert not joined, joined
    out = run_module("electra_tf.run_pretraining", "--help").stdout
    assert "--flagfile=configs/base.flags \\\n        --train_data=" in out


def test_every_text_file_the_package_opens_names_its_encoding():
    """A text-mode open() without `encoding` reads and writes in the locale's encoding:
    under LANG=C the export's export_info.json with a label "négatif" had been a
    traceback (UnicodeEncodeError), under a Latin-1 locale bytes no client reads as
    UTF-8. Every such call in the package and export/ names its encoding."""
    import ast
    import glob
    import os

    missing = []
    for path in sorted(glob.glob(os.path.join(REPO, "electra_tf", "**", "*.py"), recursive=True)
                       + glob.glob(os.path.join(REPO, "export", "*.py"))):
        tree = ast.parse(open(path, "rb").read())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else (
                func.attr if isinstance(func, ast.Attribute) else None)
            keywords = {k.arg for k in node.keywords}
            if name == "open" and isinstance(func, ast.Name):
                mode = node.args[1] if len(node.args) > 1 else next(
                    (k.value for k in node.keywords if k.arg == "mode"), None)
                binary = isinstance(mode, ast.Constant) and "b" in str(mode.value)
                if not binary and "encoding" not in keywords and len(node.args) < 4:
                    missing.append(f"{os.path.relpath(path, REPO)}:{node.lineno}")
            elif name in ("read_text", "write_text") and isinstance(func, ast.Attribute) \
                    and "encoding" not in keywords and not (
                        name == "write_text" and len(node.args) > 1) \
                    and not (name == "read_text" and node.args):
                missing.append(f"{os.path.relpath(path, REPO)}:{node.lineno} ({name})")
    assert not missing, missing


_FINISHED_THEN_SLOW_EXIT = """
import atexit, sys, time
from electra_tf import cli

def main(argv):
    def slow_exit():  # as the frameworks' clean-up at the interpreter's exit
        print("exiting", file=sys.stderr, flush=True)
        time.sleep(120)
    atexit.register(slow_exit)
    print("done", flush=True)

cli.run_command(main, "__main__", ["prog"])
"""

# As TensorFlow's objects torn down past the exit hooks, where Python has put every
# Python signal handler back to the default: an object of the main module's, deleted then
_FINISHED_THEN_SLOW_TEARDOWN = """
import os, sys, time
from electra_tf import cli

class Slow:
    def __del__(self, os=os, time=time):
        os.write(2, b"exiting\\n")
        time.sleep(2)

def main(argv):
    print("done", flush=True)

kept = Slow()
cli.run_command(main, "__main__", ["prog"])
"""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("exit_part", ["exit hook", "teardown"])
def test_a_signal_after_the_command_finished_ends_it_at_once_with_status_0(sig, exit_part):
    """A Ctrl-C or SIGTERM once a command has finished its work and said so (an export
    during TensorFlow's clean-up) had ended the process by the signal without a word,
    so that a script took the finished export for a failed one (or, in an exit hook,
    printed a traceback). In an exit hook it ends the process at once; past them (a
    converted folder's or a score's objects torn down) the signal is ignored and the
    process ends when they are (it had died by the signal there still)."""
    import signal
    import subprocess

    from helpers import patience, popen_python

    script = (_FINISHED_THEN_SLOW_EXIT if exit_part == "exit hook"
              else _FINISHED_THEN_SLOW_TEARDOWN)
    proc = popen_python(["-c", script], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr.readline() == "exiting\n"
        proc.send_signal(getattr(signal, sig))
        out, err = proc.communicate(timeout=patience(60))
    finally:
        proc.kill()
    assert (proc.returncode, out, err) == (0, "done\n", "")


def test_a_jax_backend_without_jax_installed_is_one_line(tmp_path):
    """KERAS_BACKEND=jax on an install without JAX (the README's plain install): Keras'
    import had ended the command in a ModuleNotFoundError traceback."""
    import subprocess

    (tmp_path / "jax").mkdir()  # JAX made unimportable, as where it is not installed
    (tmp_path / "jax" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'jax'\", name='jax')\n")
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=f"{tmp_path}{os.pathsep}{REPO}")
    proc = subprocess.run(
        [sys.executable, "-m", "electra_tf.run_pretraining", "--flagfile=configs/demo.flags",
         f"--demo_data_dir={tmp_path / 'data'}", f"--model_dir={tmp_path / 'model'}"],
        env=env, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.splitlines()[-1] == (
        "error: KERAS_BACKEND=jax needs JAX, which is not installed: pip install 'jax[cpu]' "
        "(CPU) or 'jax[cuda12]' (NVIDIA GPUs); docs/backends.md"), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "model").exists()

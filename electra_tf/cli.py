"""What the `python -m electra_tf.*` entry points share, and nothing else uses.

Library code raises ordinary exceptions (`errors.InputError` and the other
bad-input types); entry points turn those into one clear line on stderr and
exit status 2, and leave tracebacks for real bugs. No library module imports
this one.
"""

from __future__ import annotations

import atexit
import codecs
import contextlib
import errno
import importlib.abc
import importlib.util
import json
import logging as std_logging
import os
import re
import signal
import sys
from typing import Callable

from absl import flags

from electra_tf.core import framework_messages, peers, signals
from electra_tf.core.errors import clipped

# A flag defined here (define_strip_accents_flag) is a key flag of the command that asks
# for it, so that its --help lists it (flags.py does the same).
flags.disclaim_key_flags()

# Entry points import this module before TensorFlow, which reads TF_CPP_MIN_LOG_LEVEL
# once, at its import: keep its C++ runtime's start-up lines (a CPU machine's "failed call
# to cuInit" error, the oneDNN and cpu_feature_guard notes) off the console, and (run_cli)
# its Python warnings too, so that what the commands print is their own. ELECTRA_TF_VERBOSE=1
# brings TensorFlow's logging back; a TF_CPP_MIN_LOG_LEVEL set by the user is kept.
VERBOSE = os.environ.get("ELECTRA_TF_VERBOSE", "") not in ("", "0")
if not VERBOSE:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def tri_state(value: str) -> bool | None:
    """'auto' -> None, 'true'/'false' -> bool (for BERT's strip_accents)."""
    return {"auto": None, "true": True, "false": False}[value.lower()]


def define_strip_accents_flag() -> None:
    flags.DEFINE_enum(
        "strip_accents", "auto", ["auto", "true", "false"],
        "Strip accents (NFD, drop combining marks). 'auto' follows do_lower_case, as BERT.")


def flagfiles_first(argv: list[str]) -> list[str]:
    """argv with its --flagfile arguments first, so that a flag given on the command line
    wins over a flagfile's, wherever it stands (absl reads them in order: the last wins).

    Args:
      argv: the program name, then its arguments (sys.argv).
    """
    head, rest = argv[:1], argv[1:]
    if "--" in rest:  # arguments after `--` are not flags
        cut = rest.index("--")
        rest, tail = rest[:cut], rest[cut:]
    else:
        tail = []
    files, others, i = [], [], 0
    while i < len(rest):
        if rest[i].startswith(("--flagfile=", "-flagfile=")):
            files.append(rest[i])
        elif rest[i] in ("--flagfile", "-flagfile") and i + 1 < len(rest):
            files += rest[i:i + 2]  # `--flagfile PATH` (had been read in place: its flags
            i += 1                  # then won over those given before it)
        else:
            others.append(rest[i])
        i += 1
    return head + files + others + tail


EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C (SIGTERM: 128 + 15)


class Terminated(KeyboardInterrupt):
    """SIGTERM outside a training loop's InterruptGate (start-up, evaluation): a Ctrl-C."""

    signum = 15


STDOUT = "<stdout>"  # the file name of write_stdout's errors


def _json_escapes(error: UnicodeEncodeError) -> tuple[str, int]:
    """An encoding's error handler: each character it cannot take as JSON's \\uXXXX
    (a surrogate pair past U+FFFF)."""
    out = []
    for char in error.object[error.start:error.end]:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out), error.end


codecs.register_error("electra_tf_json", _json_escapes)


def write_stdout(text: str, lines_out: Callable[[int], None] | None = None) -> None:
    """A command's output on stdout. A stdout that is closed (`>&-`) or cannot take it
    (`> /dev/full`, a full disk) raises an OSError named STDOUT, which run_cli tells
    in one line (not as a file write, which leaves the files before whole); a closed
    pipe (`| head`) stays a BrokenPipeError.

    `lines_out(n)`: called as n more whole lines are out, the text written through
    stdout's descriptor a write at a time, so that a signal or a full disk midway
    leaves the count of the lines out (Python's text layer, stopped inside a write,
    tells none; unbuffered, it takes a partial write for the whole)."""
    try:
        if sys.stdout is None:
            raise OSError(errno.EBADF, "it is closed")
        if lines_out is not None:
            _write_counted(text, lines_out)
            return
        try:
            sys.stdout.write(text)
        except UnicodeEncodeError:  # a stdout of another encoding (PYTHONIOENCODING=ascii,
            # a C locale): \uXXXX escapes, which JSON reads too (score --energies, query;
            # it had ended in a traceback)
            encoding = sys.stdout.encoding or "utf-8"
            sys.stdout.write(text.encode(encoding, "electra_tf_json").decode(encoding))
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        raise OSError(e.errno, e.strerror or str(e), STDOUT) from None


def _write_counted(text: str, lines_out: Callable[[int], None]) -> None:
    """write_stdout's counted writes: through the descriptor where stdout has one (a
    Python stream without, as a test's capture, takes the text whole).

    Each write waits for room first (select, where a Ctrl-C or SIGTERM acts at once:
    nothing of that write is out) and then writes at most PIPE_BUF bytes, which a pipe
    with room takes whole, with the stop signals recorded for its length and acted on
    once its lines are counted: a signal acted on inside the write itself had dropped
    the count of what it wrote (Python raises as the call returns). A reader that
    stalls keeps no signal from ending the command."""
    import select
    import signal
    import threading

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # (io.UnsupportedOperation too)
        sys.stdout.write(text)
        sys.stdout.flush()
        lines_out(text.count("\n"))
        return
    sys.stdout.flush()
    encoding = sys.stdout.encoding or "utf-8"
    data = memoryview(text.encode(encoding, "electra_tf_json"))  # (as the text layer's)
    main = threading.current_thread() is threading.main_thread()
    came: list[int] = []

    def record(signum, frame):
        came.append(signum)

    while data:
        select.select([], [fd], [])
        previous = {}
        if main:
            for signum in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(signum) not in (signal.SIG_IGN, None):
                    previous[signum] = signal.signal(signum, record)
        try:
            n = os.write(fd, data[:select.PIPE_BUF])
            lines_out(data[:n].tobytes().count(b"\n"))
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        if came:
            signum, handler = came[0], previous[came[0]]
            came.clear()
            if callable(handler):
                handler(signum, None)  # (Python's raises KeyboardInterrupt)
            else:
                os.kill(os.getpid(), signum)  # SIG_DFL: the default action
        data = data[n:]


def run_command(main: Callable[[list[str]], None], module: str,
                argv: list[str] | None = None) -> None:
    """What every command's `run` does: absl's app around `run_cli(main)`.

    `module` is the command module's `__name__`. Run as a console script
    (`electra-pretrain`), the command module is not the main one, and absl's
    --help lists only the main module's key flags: the command's flags are
    made key flags of the script too.
    """
    from absl import app

    global _command
    if module != "__main__":
        for flag in flags.FLAGS.get_key_flags_for_module(module):
            flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
        _command = module
        # absl's --help opens with the main module's docstring: the script's has none
        # (its help had begun "USAGE: electra-finetune [flags]", without the summary
        # and example `python -m` shows)
        script = sys.modules.get("__main__")
        if script is not None and not getattr(script, "__doc__", None):
            script.__doc__ = getattr(sys.modules.get(module), "__doc__", None)
    else:  # python -m electra_tf.X
        _command = getattr(getattr(sys.modules["__main__"], "__spec__", None), "name", "") or ""
    _help_exits_zero()
    signals.leave_at_once = True  # this process is the command's: a second signal may end it
    # Every command: a flag on the command line wins over a flagfile's; -h asks for help
    argv = flagfiles_first(sys.argv if argv is None else argv)
    argv = [a if a != "-h" or "--" in argv[:i] else "--help" for i, a in enumerate(argv)]
    def command(args):
        run_cli(lambda: main(args))
        _leave_quietly_once_done()

    # Registered before the command's own exit hooks (and the frameworks' it imports),
    # so run after them: the last Python the interpreter's exit runs.
    atexit.register(_ignore_stop_signals_once_done)
    app.run(command, argv=argv, flags_parser=_parse_flags)


_done = False  # the command finished its work and said so (_leave_quietly_once_done)


def _ignore_stop_signals_once_done() -> None:
    """After the exit hooks of a command that finished: SIGINT and SIGTERM ignored for
    the rest of the interpreter's exit (the modules' and TensorFlow's objects torn
    down), where Python puts every Python handler back to the default and the
    signal had killed the finished command (status 130 or 143, a script taking a
    finished conversion for a failed one)."""
    if _done:
        _ignore_stop_signals()


def _leave_quietly_once_done() -> None:
    """The command finished and said so: a Ctrl-C or SIGTERM from here on (the
    interpreter's exit and the frameworks' clean-up, seconds) ends the process at once
    with status 0, its work being on the disk, whole (it had died by the signal without a
    word: a script took a finished export for a failed one); then, past the exit hooks,
    once the clean-up ends (_ignore_stop_signals_once_done)."""
    import signal
    import threading

    global _done
    _done = True

    def leave(signum, frame):
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(0)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, leave)
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
            signal.signal(signal.SIGTERM, leave)


def _parse_flags(argv: list[str]) -> list[str]:
    """absl's flag parsing, a flag that does not parse (an unknown flag, a value of
    the wrong type, a missing --flagfile) told in one `error:` line with status 2, as
    other bad input; absl's own printed two lines (FATAL ..., Pass --helpshort ...)
    and exited 1."""
    empty = [a for a in argv[1:] if a in ("--flagfile=", "-flagfile=")]
    if empty:  # (absl had read no file and said nothing)
        print(f"error: {empty[0]} names no file; give --flagfile=PATH", file=sys.stderr)
        sys.exit(2)
    comment = _trailing_comment(argv)
    if comment:
        print(f"error: {comment}", file=sys.stderr)
        sys.exit(2)
    try:
        rest = flags.FLAGS(argv)
    except UnicodeDecodeError as e:  # absl reads a --flagfile as UTF-8 and names none
        print(f"error: {_undecodable_flagfile(argv)} is not UTF-8 text ({e.reason}); save "
              "it as UTF-8", file=sys.stderr)
        sys.exit(2)
    except (flags.Error, ValueError) as e:  # absl's `--noflag=value`: a ValueError
        reason = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
        reason = reason.removeprefix("ERROR:: ")  # absl's own prefix of a flagfile error
        # absl's tuple, "('Non-boolean argument to boolean flag', 'maybe')"
        reason = re.sub(r"\('Non-boolean argument to boolean flag', (.*)\)$",
                        r"not a boolean: \1 (give --name, --noname, --name=true or "
                        r"--name=false)", reason)
        if "does not take an argument" in reason:
            reason += " (a boolean is --name, --noname or --name=false)"
        unknown = re.match(r"Unknown command line flag '(\w+)'", reason)
        ours = _other_name(unknown.group(1), argv) if unknown else None
        if ours:  # NVIDIA's name of a flag this command has
            reason = f"Unknown command line flag {unknown.group(1)!r}: {ours}"
        print(f"error: {reason}", file=sys.stderr)
        sys.exit(2)
    _expand_home()
    return rest


# Flags other ELECTRA and BERT scripts (NVIDIA's; the original's loss switches, which
# --objective replaces) name otherwise: what they are here (the flag's name, what it is
# here, and where the other is a switch given false, --use_xla=false or --nouse_xla,
# what that is: the hint had given the switched-on form whatever the value)
_OTHER_NAMES = {
    **dict.fromkeys(("amp", "use_amp", "fp16", "use_fp16", "bf16", "use_bf16"), (
        "mixed_precision", "--mixed_precision=bf16 (float16 is not offered: docs/backends.md)",
        "--mixed_precision=fp32, the default")),
    # the export's flag, an easy slip in a training command
    "precision": ("mixed_precision", "--mixed_precision=bf16 or fp32 (--precision is the "
                                     "export's flag)"),
    **dict.fromkeys(("xla", "use_xla"), ("jit_compile", "--jit_compile=true",
                                         "--jit_compile=false, the default")),
    # NVIDIA's and the original's pre-training have it; fine-tuning here has not
    "gradient_accumulation_steps": ("train_batch_size", "no gradient accumulation in "
                                    "fine-tuning: give a --train_batch_size that fits"),
    # NVIDIA's BERT's name, and a short one
    **dict.fromkeys(("num_accumulation_steps", "accumulation_steps"), (
        "gradient_accumulation_steps", "--gradient_accumulation_steps")),
    # the original's fine-tuning has it (its TPU loop); a fine-tuning run's steps stop for a
    # console line, a summary and a Ctrl-C or SIGTERM every --log_every_steps
    "iterations_per_loop": ("log_every_steps", "--log_every_steps (the steps between console "
                                               "lines, summaries and signal checks)"),
    "electra_objective": ("objective", "--objective (the original's electra_objective=false "
                                       "is --objective=bert_mlm)"),
    "electric_objective": ("objective", "--objective=electric"),
    "two_tower_generator": ("objective", "--objective=electric, which takes that generator "
                                         "(ELECTRA's own objective with it is not offered)"),
    # fine-tuning's flag, tried on pre-training (the command with --phase2_steps) to
    # continue a converted model
    "init_checkpoint": ("phase2_steps", "no --init_checkpoint in pre-training: --model_dir="
                                        "FOLDER continues the checkpoints of a run or of a "
                                        "conversion there"),
}


def _other_name(name: str, argv: list[str]) -> str | None:
    """What an unknown flag, another script's name of one this command has, is here, as
    the error line's end (None where it is no such name); `argv` tells whether a switch
    was given false (one in a --flagfile, which argv does not show: both forms)."""
    key, negated = name.lower(), False
    if key not in _OTHER_NAMES and key.startswith("no") \
            and len(_OTHER_NAMES.get(key[2:], ())) > 2:  # (a switch's --noname)
        key, negated = key[2:], True
    entry = _OTHER_NAMES.get(key)
    if entry is None or entry[0] not in flags.FLAGS or key in flags.FLAGS:
        return None
    if entry[1].startswith("no "):  # a sentence of its own
        return entry[1]
    given = [a for a in argv if a.split("=", 1)[0].lstrip("-").lower() == name.lower()]
    if len(entry) > 2 and not negated and not given:  # from a flagfile
        return f"here it is {entry[1]} (or {entry[2]})"
    if given and "=" in given[-1] \
            and given[-1].split("=", 1)[1].strip().lower() in ("false", "0", "no", "f", "n"):
        negated = True
    return f"here it is {entry[2] if negated and len(entry) > 2 else entry[1]}"


# Flags that take paths (a folder, a file, a pattern, a comma-separated list of them)
_PATH_FLAG = re.compile(r"(^|_)(dir|file|data|checkpoint|output|input|corpus|base|records|"
                        r"predictions|path)($|_)")


def _expand_home() -> None:
    """A path flag's leading ~ (or ~user), as a shell expands it unquoted: given quoted
    (or in a flagfile), `--output='~/v.txt'` had written ./~/v.txt, and
    `--vocab_file='~/vocab.txt'` was not found, while patterns were expanded."""
    for name in list(flags.FLAGS):
        flag = flags.FLAGS[name]
        value = flag.value
        if flag.present and isinstance(value, str) and _PATH_FLAG.search(name) \
                and any(p.startswith("~") for p in value.split(",")):
            flag.value = ",".join(os.path.expanduser(p) for p in value.split(","))


_TRAILING_COMMENT = re.compile(r"^-{1,2}([^=\s]+)=(.*?\s+#.*)$")


def _trailing_comment(argv: list[str]) -> str | None:
    """Where a flagfile (one on the command line, or one such a file names) has a
    `# comment` after a flag's value, in words; None where none has. absl takes a
    comment only on a line of its own: after a value it is part of the value (a
    --model_dir of `out  # mine`, silently), or a type error that quotes it."""
    seen: set[str] = set()
    todo = _flagfiles(argv)
    while todo:
        path = todo.pop(0)
        if path in seen:
            continue
        seen.add(path)
        try:
            with open(path, encoding="utf-8-sig") as f:
                lines = f.read().splitlines()
        except (OSError, UnicodeDecodeError):  # absl's own parse tells these
            continue
        for number, line in enumerate(lines, 1):
            line = line.strip()
            if line.startswith(("--flagfile=", "-flagfile=")):
                todo.append(line.split("=", 1)[1])
                continue
            match = _TRAILING_COMMENT.match(line)
            if match:
                name, value = match.groups()
                return (f"--flagfile {path} line {number}: absl reads the # and what "
                        f"follows as part of --{name}'s value ({value!r}); a flagfile's "
                        "comment takes a line of its own")
    return None


def _flagfiles(argv: list[str]) -> list[str]:
    """The flagfiles argv names (`--flagfile=PATH` or `--flagfile PATH`), in order."""
    args, paths = argv[1:], []
    for i, arg in enumerate(args):
        if arg.startswith(("--flagfile=", "-flagfile=")):
            paths.append(arg.split("=", 1)[1])
        elif arg in ("--flagfile", "-flagfile") and i + 1 < len(args):
            paths.append(args[i + 1])
    return paths


def _undecodable_flagfile(argv: list[str]) -> str:
    """`--flagfile PATH` for the first flagfile on the command line that is not UTF-8
    (one it names may be the culprit: `a --flagfile`)."""
    for path in _flagfiles(argv):
        try:
            with open(path, "rb") as f:
                f.read().decode("utf-8")
        except UnicodeDecodeError:
            return f"--flagfile {path}"
        except OSError:
            continue
    return "a --flagfile"


def _help_exits_zero() -> None:
    """absl's --help (-?, --helpshort, --helpfull, --helpxml) prints the help, then exits
    with status 1, which reads as a failure to a script or a shell's `&&`; help asked
    for is a success: status 0. A flag that does not parse: `_parse_flags`."""
    from absl import app

    app.define_help_flags()
    for name in ("help", "helpshort", "helpfull", "helpxml"):
        flag = flags.FLAGS[name]
        if getattr(flag, "exits_zero", False):
            continue

        def parse(argument, parse=flag.parse):
            try:
                parse(argument)
            except SystemExit as e:
                raise SystemExit(0 if e.code == 1 else e.code) from None

        flag.parse, flag.exits_zero = parse, True


def _on_sigterm(signum, frame):
    signals.received = signum  # for the training loop's gate, should the raise be lost
    raise Terminated


def run_cli(main: Callable[[], None]) -> None:
    """Runs an entry point: one line on stderr instead of a traceback for

    - bad input (InputError, ConfigError, VocabError, TaskDataError) and absl's
      UsageError (a positional argument, say `--do_eval true`): `error: ...`, exit
      status 2;
    - Ctrl-C, or SIGTERM (what Kubernetes, Slurm and preemptible VMs send
      before they kill a job): the loops save a checkpoint and say so
      (training.loop.Interrupted: `interrupted at step N; checkpoint saved;
      rerun to resume`); elsewhere `interrupted`; exit status 130 (SIGTERM:
      143, 128 + the signal, as a shell reports it). On a run of several
      processes (multi-worker, multi-host JAX) every process stops at the same
      step; one that a second signal stopped alone ends without its exit hooks.
      Where the processes ended together (the run finished, or stopped at the
      step they agreed on), the others meet the chief at the end and exit
      before it, without their exit hooks (core/peers.py);
    - a multi-worker peer found down mid-run (tf.errors.UnavailableError, or
      errors.PeerLost, after which the process ends without its exit hooks), a
      non-finite loss (errors.Diverged), a command's own worker process killed
      (errors.WorkerLost), or the file system refusing a write
      (a full disk, a file past the size limit, a read-only or forbidden folder:
      OSError, or TensorFlow's error of the same cause): `error: ...`, exit status
      1. Writes are atomic, so the files already there are whole;
    - a path with a name longer than the file system takes (ENAMETOOLONG, where a
      command's own checks had not refused it first): `error: ...`, exit status 2;
    - a reader of the output that went away (`| head -1`): nothing more, exit status
      141, as a shell reports a tool SIGPIPE ended.
    Anything else is a bug and keeps its traceback.
    """
    from absl import app, logging

    from electra_tf.core.errors import BAD_INPUT, Diverged, PeerLost, WorkerLost

    # TF's Python-side INFO lines (checkpoint sharding, ...); quiet: its warnings too,
    # but not electra_tf's own (a skipped question or row), each one `warning:` line
    logging.set_verbosity(logging.WARNING if VERBOSE else logging.ERROR)
    if not VERBOSE:  # tf.get_logger(), a logger of its own
        std_logging.getLogger("tensorflow").setLevel(std_logging.ERROR)
        _own_warnings_only()
    _handle_sigterm()
    _lean_framework_import()
    try:
        main()
    except BAD_INPUT as e:
        print(f"error: {clipped(str(e))}", file=sys.stderr)
        if getattr(e, "left_peers", None) is False:  # refused by every peer at one point
            peers.end_together(EXIT_BAD_INPUT)
        sys.exit(EXIT_BAD_INPUT)
    except app.UsageError as e:  # absl's app.run would print the whole help and exit 1
        hint = _USAGE_HINT if str(e).startswith("unexpected arguments") else ""
        if hint and ("\ufeff" in str(e) or "\\ufeff" in str(e)):  # (its repr) a flagfile
            # an editor saved with a byte-order mark: its first flag read as an argument
            hint = (" (a --flagfile starts with a byte-order mark, as some editors save "
                    "UTF-8: save it without one)")
        print(f"error: {clipped(str(e))}{hint}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt as e:
        # A Ctrl-C outside a training loop's gate (start-up, an evaluation, a final
        # write): every command's outputs are written whole or not at all, so a rerun
        # finishes the work (a training run resumes from its last checkpoint).
        print(str(e) or "interrupted; run the same command again to finish", file=sys.stderr,
              flush=True)
        _ignore_stop_signals()  # a second one would land in an exit hook (JAX's) as a traceback
        status = 128 + getattr(e, "signum", 2)
        if getattr(e, "left_peers", False):  # exit hooks would wait for the peers it left
            sys.stdout.flush()
            os._exit(status)
        if getattr(e, "left_peers", None) is False:  # the loop's stop, agreed by every peer
            peers.end_together(status)  # (none of them lingers after the chief)
        sys.exit(status)
    except (Diverged, WorkerLost) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except PeerLost as e:  # exit hooks would wait for the lost peer (then abort in C++)
        print(f"error: {e}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(1)
    except BrokenPipeError:
        # The reader went away (`| head -1`): quiet, as a Unix tool killed by SIGPIPE,
        # whose status (128 + 13) a shell reports; stdout is pointed at /dev/null so
        # that the interpreter's final flush does not fail again.
        with contextlib.suppress(OSError, AttributeError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        sys.exit(128 + int(signal.SIGPIPE))
    except OSError as e:
        if isinstance(e, FileNotFoundError) and "No usable temporary directory" in str(e):
            # tempfile's, from TensorFlow's import or a write's temporary: a full disk
            # (it had been a traceback of 60 lines)
            print("error: no temporary folder can be written (tempfile tried TMPDIR, /tmp, "
                  "/var/tmp and the working folder: a full disk or a file size limit?); "
                  "free space, or set TMPDIR to a folder with room", file=sys.stderr)
            sys.exit(1)
        if e.filename == STDOUT and not isinstance(e, BrokenPipeError):
            print(f"error: cannot write the output to the standard output ({e.strerror})",
                  file=sys.stderr)
            sys.exit(1)
        if e.errno == errno.ENAMETOOLONG:  # a path the commands' checks did not see first
            where = e.filename2 or e.filename or "a path"  # os.replace's: (temporary, target)
            print(f"error: {where}: a name in it is longer than the file system takes "
                  "(255 bytes on most); give a shorter one", file=sys.stderr)
            sys.exit(EXIT_BAD_INPUT)
        if e.errno not in _FILE_SYSTEM_ERRNOS:
            raise
        where = f"{e.filename}: " if e.filename else ""
        text = " ".join(f"{where}{e.strerror or e}".split())  # h5py's hold line breaks
        print(f"error: {text}{_file_system_hint(text, e.filename)}", file=sys.stderr)
        sys.exit(1)
    except Exception as e:
        tf = sys.modules.get("tensorflow")
        if tf is None or not isinstance(e, tf.errors.OpError):
            raise
        if isinstance(e, tf.errors.UnavailableError):
            print(f"error: {_peer_down(e.message or '')}", file=sys.stderr)
            sys.exit(1)
        sizes = framework_messages.group_sizes(e.message or "") \
            if isinstance(e, tf.errors.InternalError) else None
        if sizes:  # (a 65-line traceback at the first all-reduce)
            print(f"error: --strategy=multi_worker: the workers' TF_CONFIG clusters differ "
                  f"(a worker's lists {sizes[0]} tasks, another's {sizes[1]}); give every "
                  "worker the same cluster", file=sys.stderr)
            sys.exit(EXIT_BAD_INPUT)
        line = None  # EACCES, EPERM, EROFS: the type says it; ENOSPC, EDQUOT: the text
        if isinstance(e, tf.errors.PermissionDeniedError):
            line = next((x for x in (e.message or "").splitlines() if x.strip()), "")
        elif isinstance(e, (tf.errors.ResourceExhaustedError,  # or out of memory
                            tf.errors.OutOfRangeError)):  # EFBIG; or a dataset's end
            line = framework_messages.disk_full_line(e.message)
        if line is None:
            raise
        line = framework_messages.without_function_node(line).strip() or type(e).__name__
        print(f"error: {line[:400]}{_file_system_hint(line)}", file=sys.stderr)
        sys.exit(1)
    else:
        peers.end_together(0)  # a multi-process run's workers leave before its chief


class _OwnWarnings(std_logging.Handler):
    """A handler on absl's logger: the warnings electra_tf's own modules log through
    absl (the library's way, which a Python session sees as warnings) printed as one
    `warning: ...` line each. The other loggers stay at the ERROR verbosity sets (on
    the root logger, under absl's app); absl's own logger takes warnings, and absl's
    handler prints only errors (`_errors_only`), so TensorFlow's absl lines below
    ERROR stay quiet."""

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep

    def emit(self, record) -> None:
        if record.levelno < std_logging.ERROR and record.pathname.startswith(self.package):
            signals.say(f"warning: {clipped(record.getMessage())}")


def _errors_only(record) -> bool:
    return record.levelno >= std_logging.ERROR


def _own_warnings_only() -> None:
    """Installs _OwnWarnings once per process (run_cli may run several times in one)."""
    from absl import logging

    absl_logger = logging.get_absl_logger()
    if not any(isinstance(h, _OwnWarnings) for h in absl_logger.handlers):
        absl_logger.addHandler(_OwnWarnings(std_logging.WARNING))
    absl_logger.setLevel(std_logging.WARNING)  # its own: the root stays at ERROR
    if _errors_only not in logging.get_absl_handler().filters:
        logging.get_absl_handler().addFilter(_errors_only)


# After "unexpected arguments: [...]": the usual cause is a value given apart from its flag.
_USAGE_HINT = (" (every flag takes its value after an equals sign, --name=value; a boolean "
               "is --name, --noname or --name=false; --help lists the flags)")

# A write the file system refuses: a full disk or quota, a read-only or forbidden folder.
# EFBIG: past the process's file size limit (ulimit -f, a batch system's) or the file
# system's largest file (FAT's 4 GiB).
_FILE_SYSTEM_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES,
                       errno.EPERM)
# Every command's outputs: checkpoints, weights, exports, records, scores and tables.
_FILE_SYSTEM_HINT = (" (every file is written under a temporary name first, so those written "
                     "before are whole; free space, lift the file size limit or fix the "
                     "folder, then rerun: a training run resumes from its last checkpoint)")
# An export is written into a temporary folder and renamed into place whole.
_EXPORT_HINT = (" (an export is written into a temporary folder, renamed into place whole: "
                "that version was not published, and the versions there before are "
                "untouched; free space or lift the file size limit, then rerun)")
# The clause said only by the commands that train (the others start over).
_RESUMES = ": a training run resumes from its last checkpoint)"
_TRAINING_COMMANDS = ("electra_tf.run_pretraining", "electra_tf.run_finetuning")
_command = ""  # the module of the command this process runs (run_command)
# TensorBoard's event files are appended to as a run goes (not renamed into place):
# one cut short keeps its points up to the cut, which TensorBoard reads.
_EVENT_FILE_HINT = (" (TensorBoard's event files are appended to as the run goes: one cut "
                    "short keeps its points up to the cut; every other file is written under "
                    "a temporary name first, so those written before are whole; free space, "
                    "lift the file size limit or fix the folder, then rerun: a training run "
                    "resumes from its last checkpoint)")


# A device, a pipe or a standard stream is written into as the output comes, not replaced.
_STREAM_HINT = (" (it is written into as the output comes, not replaced whole: what reached "
                "it before the error stands; free space, lift the file size limit or fix "
                "the folder, then rerun)")


def _file_system_hint(line: str, path=None) -> str:
    """What a failed write leaves and what to do, for the file `line` names (that a
    rerun resumes, where the command trains: build_pretraining_data's, pack's and
    convert's rerun starts over); `path`, the file that failed where known: a device,
    a pipe or a standard stream, which no temporary name stood in for."""
    from electra_tf.core.fileio import writes_atomically

    if isinstance(path, str) and path and not writes_atomically(path):
        return _STREAM_HINT
    if _command == "electra_tf.export_saved_model" and any(
            cause in line for cause in framework_messages.DISK_FULL):
        return _EXPORT_HINT  # (a permission refused had been told to free space)
    hint = _EVENT_FILE_HINT if "tfevents" in line else _FILE_SYSTEM_HINT
    if _command and _command not in _TRAINING_COMMANDS:
        hint = hint.replace(_RESUMES, ")")
    return hint


# Imported, when installed, by Keras 3 and TensorFlow for features the commands never use:
# Keras' scikit-learn wrappers (keras.wrappers) and pandas inputs to fit(), TF Lite's
# conversion of JAX functions. About 2 s of CPU at every command's start on 2 cores
# (a third of `import tensorflow, keras`), for each of the many processes a
# multi-worker run or a sweep of trials starts.
_OPTIONAL_FOR_FRAMEWORKS = ("sklearn", "pandas")
_OPTIONAL_FOR_TENSORFLOW = ("jax",)  # the JAX backend's own


class _LeanLoader(importlib.abc.Loader):
    """The real loader of tensorflow (or keras), run with `blocked` unimportable: their
    `try: import sklearn / except ImportError` then take the not-installed branch.
    Once the framework is imported the modules import again as usual (seqeval's
    sklearn, a user's own pandas), whole."""

    def __init__(self, loader, blocked: tuple[str, ...]):
        self.loader, self.blocked = loader, blocked

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        held = [name for name in self.blocked if name not in sys.modules]
        for name in held:
            sys.modules[name] = None  # an import of it raises ImportError
        try:
            self.loader.exec_module(module)
        finally:
            for name in held:
                if sys.modules.get(name, 0) is None:
                    del sys.modules[name]


class _LeanFrameworkFinder(importlib.abc.MetaPathFinder):
    """On this process's first import of tensorflow or keras: its spec, loaded by
    _LeanLoader; then it leaves sys.meta_path."""

    def find_spec(self, name, path, target=None):
        if name not in ("tensorflow", "keras"):
            return None
        sys.meta_path.remove(self)  # one import; the lookup below finds the real spec
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        blocked = _OPTIONAL_FOR_FRAMEWORKS
        if _keras_backend() != "jax":
            blocked += _OPTIONAL_FOR_TENSORFLOW
        spec.loader = _LeanLoader(spec.loader, blocked)
        return spec


def tensorflow_backend(tag: str, why: str) -> None:
    """Makes Keras run on TensorFlow in a command that builds TensorFlow graphs (an
    export, the scorer's tf.function), whatever KERAS_BACKEND or keras.json says: under
    jax they had failed in a traceback (`Cannot convert a symbolic tf.Tensor`). Says so
    on stderr, `[tag] ... set aside: why`. Nothing where Keras is imported already."""
    backend = _keras_backend()
    if backend != "tensorflow" and "keras" not in sys.modules:
        os.environ["KERAS_BACKEND"] = "tensorflow"
        print(f"[{tag}] Keras' {backend} backend (KERAS_BACKEND or keras.json) set aside: "
              f"{why}", file=sys.stderr)


def _keras_backend() -> str:
    """The backend Keras will take, by its own rule, without importing it: KERAS_BACKEND,
    else the "backend" of keras.json in KERAS_HOME (default ~/.keras; Keras falls back to
    /tmp/.keras where that is not writable), else tensorflow. A keras.json that cannot be
    read counts as "jax" here: JAX is then left importable."""
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"]
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    for folder in (home, os.path.join("/tmp", ".keras")):
        path = os.path.join(folder, "keras.json")
        if os.path.exists(path):
            try:
                with open(path, encoding="utf-8") as f:
                    return str(json.load(f).get("backend", "tensorflow"))
            except (OSError, ValueError, AttributeError):
                return "jax"
    return "tensorflow"


def _lean_framework_import() -> None:
    """The command's first import of TensorFlow or Keras (whichever comes first, the
    other inside it) without what _OPTIONAL_FOR_FRAMEWORKS names, nor JAX unless Keras'
    backend is JAX (set in KERAS_BACKEND or keras.json: TensorFlow's import imports Keras,
    which then imports JAX). Nothing where either is imported already (a Python session
    calling run_cli, a test) or the finder is in place."""
    if "tensorflow" in sys.modules or "keras" in sys.modules or any(
            isinstance(f, _LeanFrameworkFinder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _LeanFrameworkFinder())


def _handle_sigterm() -> None:
    """SIGTERM raises as a Ctrl-C does (`Terminated`), instead of ending the process at
    once without a word; the training loops hold it to their next step boundary
    (training.loop.InterruptGate). An ignored SIGTERM stays ignored."""
    import signal
    import threading

    signals.take()  # none from an earlier run in this process
    if threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
        signal.signal(signal.SIGTERM, _on_sigterm)


def _ignore_stop_signals() -> None:
    """SIGINT and SIGTERM ignored from here on: the run has stopped and said so; what is
    left is the interpreter's exit, whose hooks a second one would interrupt with a
    traceback."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _peer_down(message: str) -> str:
    """One line for TensorFlow's UnavailableError: which task of the cluster stopped."""
    tasks = framework_messages.unhealthy_tasks(message)
    if tasks:
        names = ", ".join(f"{job} {task}" for job, task in tasks)
        return (f"--strategy=multi_worker: {names} of TF_CONFIG's cluster stopped (its own "
                "log says why), so this worker stops too; rerun every worker to resume")
    reason = framework_messages.first_reason(message)[:300] or "unavailable"
    tasks = framework_messages.unreachable_tasks(message)
    if tasks:
        names = ", ".join(f"{job} {task}" for job, task in tasks)
        return (f"--strategy=multi_worker: {names} of TF_CONFIG's cluster cannot be reached "
                f"({reason}): it stopped (its own log says why) or its host is down, so this "
                "worker stops too; rerun every worker to resume")
    return ("--strategy=multi_worker: a worker of the cluster is down or cannot be reached ("
            + reason + ")")

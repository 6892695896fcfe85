"""The study's ledger: every finished run's result, in a file that outlives the machine.

A CPU study takes longer than one sitting, and a sitting's machine, with the
work directory's checkpoints on it, may not be there for the next one. So the
study records each finished pre-training run and each fine-tuning result as one
JSON line in a ledger kept beside the report (committed with it), and a later
sitting, on this machine or a fresh one, skips what the ledger already holds.

Each line carries the id of the settings it was made with (`settings_id`): a
study whose settings changed does not mix its results with the old ones (they
stay in the file; the report leaves them out).

Writing is append-only, one line per record, flushed and fsynced: a study killed
mid-write leaves at most a torn last line, which the next read skips with a
warning and the next write terminates. A damaged line anywhere else is an
error naming the file and line.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading

# Settings that change how long a study takes, not what it measures.
_NOT_RESULTS = frozenset({"run_timeout_s", "finetune_workers", "pretrain_gflops_per_s",
                          "pretrain_overhead_s", "finetune_examples_per_s",
                          "process_overhead_s", "point_finetune_seeds"})

FINETUNE_KEY = ("objective", "pretrain_seed", "step", "task", "finetune_seed")


def settings_id(s: dict, vocab_size: int) -> str:
    """A short hash of the settings that shape the results, and the vocab size."""
    shaped = {k: v for k, v in s.items() if k not in _NOT_RESULTS}
    shaped["vocab_size"] = int(vocab_size)
    blob = json.dumps(shaped, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def finetune_key(r: dict) -> tuple:
    return tuple(int(r[k]) if k not in ("objective", "task") else r[k] for k in FINETUNE_KEY)


class Ledger:
    """Results by settings id: fine-tuning results and pre-training records.

    Args:
      path: the JSON-lines file (created on the first `add`).
      sid: the settings id of the running study; lookups see only its lines.
    """

    def __init__(self, path: str, sid: str):
        from electra_tf.core.errors import InputError

        self.path, self.sid = path, sid
        self._lock = threading.Lock()
        self._finetune: dict[tuple, dict] = {}
        self._pretrain: dict[tuple, dict] = {}
        self.other_settings = 0  # lines of other settings, kept in the file, not used
        if not os.path.exists(path):
            return
        if os.path.isdir(path):
            raise InputError(f"--ledger: {path} is a folder, not a file")
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        last = len(lines) - 1  # the text after the last newline: "" unless torn
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                kind = record["kind"]
                if kind not in ("finetune", "pretrain"):
                    raise KeyError(kind)
            except (ValueError, KeyError, TypeError):
                if number - 1 == last:  # a write cut off mid-line: the run is redone
                    print(f"[study] warning: {path}:{number}: an incomplete last line "
                          "(a write cut off), skipped", file=sys.stderr, flush=True)
                    continue
                raise InputError(f"{path}:{number}: not a ledger record (a JSON object "
                                 "with kind finetune or pretrain); repair or remove that "
                                 "line") from None
            if record.get("settings_id") != sid:
                self.other_settings += 1
            else:
                self._keep(record)

    def finetune(self, r: dict) -> dict | None:
        return self._finetune.get(finetune_key(r))

    def pretrain(self, objective: str, seed: int) -> dict | None:
        return self._pretrain.get((objective, int(seed)))

    def finetune_rows(self) -> list[dict]:
        return list(self._finetune.values())

    def pretrain_records(self) -> list[dict]:
        return [self._pretrain[k] for k in sorted(self._pretrain)]

    def add(self, kind: str, record: dict) -> dict:
        """Appends `record` (a copy with kind and settings_id) and returns it."""
        record = dict(record, kind=kind, settings_id=self.sid)
        line = json.dumps(record, sort_keys=True) + "\n"
        with self._lock:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            with open(self.path, "a+b") as f:
                f.seek(0, os.SEEK_END)
                if f.tell():  # a torn last line is ended before the new one
                    f.seek(-1, os.SEEK_END)
                    if f.read(1) != b"\n":
                        f.write(b"\n")
                f.write(line.encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())
            self._keep(record)
        return record

    def _keep(self, record: dict) -> None:
        if record["kind"] == "finetune":
            self._finetune[finetune_key(record)] = record
        else:
            self._pretrain[(record["objective"], int(record["seed"]))] = record

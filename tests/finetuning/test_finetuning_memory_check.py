"""The memory check before a fine-tuning step (training/memory.py; its pre-training
side: tests/training/test_memory_check.py)."""

import re
import types

GIB = 1 << 30


def test_finetuning_warns_of_a_step_that_does_not_fit(monkeypatch, capsys, pretrained_dir,
                                                      tmp_path):
    """The warning counts the batch at the length trimming leaves (it had counted
    --max_seq_length: 307 GiB said for a step that took 2.2 GB), names the flag that
    fits, and a batch above the train windows is noted (10**6 had been killed, 137)."""
    from helpers import finetune

    from electra_tf.training import memory as memory_module

    data = tmp_path / "data"
    data.mkdir()
    rows = ["sentence\tlabel"] + [f"{w} good\t1" if i % 2 else f"{w} bad\t0"
                                  for i, w in enumerate(["a", "b", "c", "d"] * 4)]
    for split in ("train", "dev"):
        (data / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    monkeypatch.setattr(memory_module, "available_bytes", lambda: 1)
    finetune("--task_name=sst2", f"--init_checkpoint={pretrained_dir}", f"--data_dir={data}",
             f"--model_dir={tmp_path}/out", "--num_train_epochs=1", "--train_batch_size=20",
             "--max_seq_length=64")
    err = capsys.readouterr().err
    # windows of a few positions in 64: TF's eager step cuts each batch to its longest
    counted = re.search(r"\(20 sequence\(s\) of (\d+) tokens at once\)", err)
    cut = re.search(r"training batches cut to their longest example: (\d+) of 64", err)
    assert counted and cut and int(counted.group(1)) == int(cut.group(1)) < 16, err[-2000:]
    assert re.search(r"warning: this step needs about .*; even one sequence at a time needs "
                     r"about", err), err[-2000:]
    assert ("note: --train_batch_size=20 is more than the 16 train windows: each step takes "
            "them all and 4 rows of zeros, which the step computes and its loss leaves out; a "
            "batch near the window count trains on the same rows at less cost") in err


def test_the_fine_tuning_advice_names_the_global_batch_that_fits():
    """It had said `about 15 sequences at a time would fit`, this process's count, where
    --train_batch_size is the global batch (4 workers: 60) and no flag splits a step."""
    encoder = types.SimpleNamespace()
    from electra_tf.training import memory

    def estimate(_encoder, n, _length):  # 1 GiB for the weights, 0.1 GiB a sequence
        return types.SimpleNamespace(total=GIB + n * GIB // 10)

    import pytest

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(memory, "finetuning_estimate", estimate)
        room = memory.MARGIN * 3 * GIB
        fits = max(n for n in range(1, 1000) if estimate(None, n, 0).total <= room)
        one = memory.finetuning_warning(encoder, 128, 1.0, 512, 3 * GIB)
        four = memory.finetuning_warning(encoder, 128, 0.25, 512, 3 * GIB)
    assert one.endswith(f"; --train_batch_size={fits} or less would fit (a smaller batch is "
                        "another training: no flag splits a fine-tuning step)"), one
    assert "(32 sequence(s) of 512 tokens at once)" in four
    assert f"; --train_batch_size={4 * fits} or less would fit" in four, four

"""The memory check before a fine-tuning step (training/memory.py; its pre-training
side: tests/training/test_memory_check.py)."""


def test_finetuning_warns_of_a_step_that_does_not_fit(monkeypatch, capsys, pretrained_dir,
                                                      tmp_path):
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
             f"--model_dir={tmp_path}/out", "--num_train_epochs=1", "--train_batch_size=4",
             "--max_seq_length=16")
    err = capsys.readouterr().err
    assert "warning: this step needs about" in err and "(4 sequence(s) of 16 tokens at once)" \
        in err, err[-2000:]

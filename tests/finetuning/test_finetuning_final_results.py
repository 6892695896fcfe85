"""The `[finetune] done:` line reports the last evaluation, whatever the number of epochs."""

from __future__ import annotations

from electra_tf.training.finetuning import Finetuning


def test_final_results_is_the_last_epoch_by_number_not_by_string_order():
    results = {f"epoch_{i}": {"accuracy": i / 100} for i in range(1, 21)}
    assert sorted(results)[-1] == "epoch_9"  # what a string sort would report
    assert Finetuning.final_results(results) == {"accuracy": 0.20}


def test_final_results_of_an_evaluation_without_training():
    results = {"epoch_1": {"accuracy": 0.5}, "eval": {"accuracy": 0.7}}
    assert Finetuning.final_results(results) == {"accuracy": 0.7}
    assert Finetuning.final_results({}) == {}

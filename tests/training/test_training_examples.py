"""--log_examples in pre-training: the first eval sequence as the objective sees it."""

import numpy as np

from electra_tf.training.examples import masked_example_lines

VOCAB = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "dog", "mat"]


def _batch():
    # [CLS] the [MASK] sat [MASK] [SEP] (pad); masked: 2 (cat), 4 (mat); a third slot unused
    return {"input_ids": np.array([[1, 4, 3, 6, 3, 2, 0]]),
            "input_mask": np.array([[1, 1, 1, 1, 1, 1, 0]]),
            "masked_lm_positions": np.array([[2, 4, 0]]),
            "masked_lm_ids": np.array([[5, 8, 0]]),
            "masked_lm_weights": np.array([[1.0, 1.0, 0.0]])}


def test_a_sample_that_replaced_one_that_did_not_and_a_false_alarm_are_shown():
    fake = {"sampled_ids": np.array([[7, 8, 4]]),  # dog replaces cat; mat stays mat
            "original_ids": np.array([[1, 4, 5, 6, 8, 2, 0]])}
    logits = np.array([[-3.0, 1.0, 2.0, -3.0, -1.0, -3.0, 5.0]])  # "the" a false alarm
    lines = masked_example_lines(_batch(), {"fake": fake}, VOCAB, logits)
    assert lines == [
        "example (the first eval sequence, 6 positions): 2 masked, 1 replaced by the "
        "generator's sampled tokens; the discriminator flags 1 of them and 1 other position "
        "(p > 0.5)",
        "  [CLS] the(p=0.73) [cat->dog p=0.88] sat [mat=mat p=0.27] [SEP]"]


def test_a_probability_near_the_threshold_is_told_from_it():
    """Early in a run every p is about 0.5: a flagged position and an unflagged one had
    both read p=0.50."""
    fake = {"sampled_ids": np.array([[7, 6, 4]]),  # dog replaces cat, sat replaces mat
            "original_ids": np.array([[1, 4, 5, 6, 8, 2, 0]])}
    logits = np.array([[0.0, 4e-4, 3e-3, -1e-3, -2e-6, 0.0, 0.0]])
    lines = masked_example_lines(_batch(), {"fake": fake}, VOCAB, logits)
    assert lines[0].endswith("the discriminator flags 1 of them and 1 other position "
                             "(p > 0.5)")
    assert lines[1] == "  [CLS] the(p=0.5001) [cat->dog p=0.501] sat [mat->sat p=0.50] [SEP]"


def test_without_a_discriminator_the_generators_predictions_are_shown_and_long_ones_cut():
    mlm_logits = np.zeros([1, 3, len(VOCAB)])
    mlm_logits[0, 0, 5] = mlm_logits[0, 1, 7] = 1.0  # cat (right), dog (wrong)
    lines = masked_example_lines(_batch(), {"mlm_logits": mlm_logits}, VOCAB, None, max_shown=4)
    assert lines == [
        "example (the first eval sequence, 6 positions): 2 masked; the generator's "
        "predicted tokens",
        "  [CLS] the [cat=cat] sat ... (2 more)"]


def test_an_evaluation_prints_the_example_before_its_scores(make_configs, capsys):
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining

    config, run = make_configs(run_overrides={"log_examples": True})
    trainer = TensorFlowPretraining(config, run)
    trainer.evaluate()
    err = capsys.readouterr().err.splitlines()
    first = next(i for i, line in enumerate(err) if "example (the first eval sequence" in line)
    assert err[first].startswith("[pretrain] at step 0, example (the first eval sequence, ")
    assert "masked, " in err[first] and "the discriminator flags" in err[first]
    shown = err[first + 1]
    assert shown.startswith("[pretrain]   [CLS]") and "->" in shown and " p=" in shown
    capsys.readouterr()
    trainer.evaluate()  # the same masks and samples at every evaluation
    again = capsys.readouterr().err.splitlines()
    assert again[again.index(err[first]) + 1] == shown

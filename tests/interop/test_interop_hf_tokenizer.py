"""convert --to=hf writes transformers' tokenizer settings for every folder kind: a model
pre-trained cased gives, through AutoTokenizer on the exported folder, the ids
electra_tf's tokenizer gives (without tokenizer_config.json transformers lower-cased)."""

import json
import os

import pytest
from helpers import TINY_MODEL, write_vocab

pytest.importorskip("transformers")

# Mixed case and accents, each cased form and its lower-cased, accent-stripped one in
# the vocabulary, so that any casing difference changes the ids.
WORDS = ["Zoë", "zoe", "Zürich", "zurich", "Café", "cafe", "São", "sao", "Paulo", "paulo",
         "Hello", "hello", "World", "world", "The", "the", "lives", "in", "and", "naïve",
         "naive", "中", "国"]
TEXTS = ["Zoë lives in Zürich", "Hello World and the Café", "São Paulo, naïve 中国",
         "ZOË hello ZÜRICH"]


@pytest.fixture(scope="module")
def cased_pretrained(tmp_path_factory):
    """A real pre-training folder of a model pre-trained cased (run_pretraining's loop,
    --do_lower_case=false, 2 steps on records built cased from a mixed-case corpus)."""
    from electra_tf.core.config import PretrainingConfig, PretrainingRun
    from electra_tf.data.builder import BuildOptions, build_pretraining_data
    from electra_tf.text.tokenizer import BERT_RESERVED_TOKENS
    from electra_tf.text.vocab import load_vocab
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining

    tmp = tmp_path_factory.mktemp("cased")
    chars = sorted(set("".join(WORDS) + "".join(w.upper() for w in WORDS) + ".,")
                   - set(WORDS))
    vocab = write_vocab(tmp / "vocab.txt", list(BERT_RESERVED_TOKENS) + WORDS + chars
                        + ["##" + c for c in chars if c.isalpha()])
    corpus = tmp / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(TEXTS) for _ in range(20)) + "\n",
                      encoding="utf-8")
    records = tmp / "records"
    build_pretraining_data(BuildOptions(files=(str(corpus),), vocab_file=vocab,
                                        output_dir=str(records), max_seq_length=16,
                                        num_shards=1, do_lower_case=False))
    model_dir = str(tmp / "model")
    config = PretrainingConfig(
        model_size="tiny", model_hparam_overrides=TINY_MODEL, vocab_size=len(load_vocab(vocab)),
        max_seq_length=16, generator_hidden_size=0.5, train_batch_size=4, num_train_steps=2,
        iterations_per_loop=2, num_warmup_steps=0, do_lower_case=False, seed=1)
    run = PretrainingRun(model_dir=model_dir, train_data=f"{records}/pretrain_data.tfrecord*",
                    vocab_file=vocab)
    TensorFlowPretraining(config, run).train()
    return model_dir


def _ids_agree(folder, do_lower_case):
    from transformers import AutoTokenizer

    from electra_tf.text.tokenizer import Tokenizer

    ours = Tokenizer(os.path.join(folder, "vocab.txt"), do_lower_case=do_lower_case)
    theirs = AutoTokenizer.from_pretrained(folder)
    for text in TEXTS:
        assert theirs(text, add_special_tokens=False)["input_ids"] == ours.encode([text])[0], text


def test_a_cased_pretraining_folder_exports_a_cased_tokenizer(cased_pretrained, tmp_path):
    from electra_tf.interop.hf import export_model
    from electra_tf.text.tokenizer import Tokenizer

    out = tmp_path / "hf"
    export_model(cased_pretrained, str(out), generator=True)
    for folder in (out, out / "generator"):
        settings = json.loads((folder / "tokenizer_config.json").read_text())
        assert settings["do_lower_case"] is False and settings["strip_accents"] is False
        assert settings["model_max_length"] == 512  # the model's positions (tiny: 512)
        assert (settings["unk_token"], settings["cls_token"], settings["sep_token"],
                settings["pad_token"], settings["mask_token"]) == (
            "[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]")
        _ids_agree(str(folder), do_lower_case=False)
    # cased: "Zoë" and "zoe" are different pieces (the test's texts can tell)
    ours = Tokenizer(str(out / "vocab.txt"), do_lower_case=False)
    assert ours.encode(["Zoë"])[0] != ours.encode(["zoe"])[0]


def test_an_uncased_folder_exports_lower_casing_and_accent_stripping(tmp_path):
    from helpers import write_pretrained_dir

    from electra_tf.interop.hf import export_model
    from electra_tf.text.tokenizer import BERT_RESERVED_TOKENS

    vocab = write_vocab(tmp_path / "vocab.txt", list(BERT_RESERVED_TOKENS) + WORDS
                        + list(".,"))
    model_dir = write_pretrained_dir(tmp_path / "model", vocab)  # records no casing: uncased
    export_model(model_dir, str(tmp_path / "hf"))
    settings = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    assert settings["do_lower_case"] is True and settings["strip_accents"] is True
    _ids_agree(str(tmp_path / "hf"), do_lower_case=True)


def test_a_cased_discriminator_from_transformers_keeps_its_casing(cased_pretrained, tmp_path):
    """convert --from=hf of a discriminator records its tokenizer's casing: the export's
    rtd tokenizer follows it and fine-tuning refuses the other one; a folder whose
    tokenizer says nothing records nothing (read as uncased, not checked)."""
    from electra_tf import folders
    from electra_tf.core.errors import ConfigError
    from electra_tf.interop.hf import export_model, import_model
    from electra_tf.serving.export import load_spec
    from electra_tf.training.finetuning import check_casing

    out = tmp_path / "hf"
    export_model(cased_pretrained, str(out))
    back = tmp_path / "back"
    import_model(str(out), str(back))
    assert folders.PretrainingFolder.open(str(back)).recorded_do_lower_case is False
    assert load_spec("rtd", str(back)).tokenizer.do_lower_case is False
    check_casing(False, str(back))
    with pytest.raises(ConfigError, match="records a model trained on cased text"):
        check_casing(True, str(back))
    os.remove(out / "tokenizer_config.json")
    silent = tmp_path / "silent"
    import_model(str(out), str(silent))
    folder = folders.PretrainingFolder.open(str(silent))
    assert folder.recorded_do_lower_case is None and folder.do_lower_case is True

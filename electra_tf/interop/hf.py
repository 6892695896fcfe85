"""transformers (Hugging Face) ELECTRA weights, both ways.

Import reads `config.json` and `model.safetensors` (or a sharded
`model.safetensors.index.json`) with the `safetensors` package's numpy API,
so no PyTorch is needed; `pytorch_model.bin` is read only where torch is
installed. Classes, recognised by their weight names:

| transformers class | electra_tf output |
|---|---|
| ElectraModel | the discriminator's encoder (its RTD head stays at its initial values) |
| ElectraForPreTraining | the discriminator with its RTD head |
| ElectraForMaskedLM | a stand-alone generator (`generator.weights.h5` + `generator_config.json`) |
| ElectraForTokenClassification | a fine-tuning folder: a `token_classification` head, task `ner` (`tagging` where the labels are not BIO tags) |
| ElectraForQuestionAnswering | a fine-tuning folder: a `squad` head (the independent span head), task `squad_v1` (`squad_v2` answers "" by the start + end logits at [CLS]: the `combined` null rule) |
| ElectraForSequenceClassification | a fine-tuning folder: a `sequence_classification` head (the `mlp` classifier head: dense -> GELU -> dense), task `classification` (with `num_labels` 1, a regression); `--drop_task_head` keeps the encoder only |

A task model's kind (`detect_kind`, the report's "kind") is the head it becomes
(the head class of tasks/heads/ whose `hf_detect` recognises its weights; the
class also owns its transformers names, `hf_modules`, and what its import and
export check and change), which the export's --task names.

A fine-tuning folder (electra_tf/folders/finetuned.py: `finetuning_config.json` +
`finetuned.weights.h5`, beside the discriminator's files) exports, evaluates
and fine-tunes further like one `run_finetuning` wrote. Its labels come from
`id2label`; its vocabulary from the folder's `vocab.txt` (or `tokenizer.json`,
or `--vocab_file`), and its casing from `tokenizer_config.json` /
`tokenizer.json`; `task_name` records it as another task of the same head
(e.g. `sst2`, `mnli`, `squad_v2`).

Export writes `config.json` + `model.safetensors` of an ElectraForPreTraining
(the discriminator) and, on request, of an ElectraForMaskedLM (the generator,
under `generator/`), which `from_pretrained` loads. A fine-tuning folder
exports as its transformers class (token classification, question answering,
sequence classification with either classifier head), with its labels and
the tokenizer's files (`export_finetuned`).

The generator's MLM head. transformers' ElectraGeneratorPredictions applies
GELU whatever `hidden_act` says, where the original (and electra_tf by
default) applies `hidden_act`. An import therefore records
`generator_head_act="gelu"` in the EncoderConfig when hidden_act is not gelu,
so the generator computes what transformers computes; an export whose
generator head activation is not GELU, which transformers' config cannot
express, logs a warning line (`export_warnings`).
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shlex

import numpy as np
from absl import logging

from electra_tf.core.config import EncoderConfig
from electra_tf.core.errors import ConfigError
from electra_tf.core.fileio import (
    atomic_write_json,
    check_free_space,
    undo_on_failure,
    write_bytes,
)
from electra_tf.folders import ConvertedFolder, FinetunedFolder, PretrainingFolder
from electra_tf.folders.finetuned import is_finetuning_folder
from electra_tf.folders.vocabulary import copy_vocab_file
from electra_tf.interop import core, names
from electra_tf.tasks import heads
from electra_tf.text.vocab import resolve_strip_accents

_ACT_FROM_HF = {"gelu": "gelu", "gelu_new": "gelu_approximate", "gelu_fast": "gelu_approximate",
                "gelu_pytorch_tanh": "gelu_approximate", "relu": "relu"}
_ACT_TO_HF = {"gelu": "gelu", "gelu_approximate": "gelu_new", "relu": "relu"}
_ENCODER_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                   "num_attention_heads", "intermediate_size", "hidden_dropout_prob",
                   "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
                   "initializer_range", "layer_norm_eps")
# transformers' ElectraConfig defaults (ELECTRA-Small's generator sizes), what it reads a
# config.json without a field as: EncoderConfig's (BERT-Base's) differ, and no weight
# shape shows a missing num_attention_heads (12 had been taken for 4, silently).
_HF_DEFAULTS = {"vocab_size": 30522, "embedding_size": 128, "hidden_size": 256,
                "num_hidden_layers": 12, "num_attention_heads": 4, "intermediate_size": 1024,
                "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
                "max_position_embeddings": 512, "type_vocab_size": 2,
                "initializer_range": 0.02, "layer_norm_eps": 1e-12}


# === Reading ===
def _read_json(path: str) -> dict:
    """A JSON object file of a transformers folder.

    Raises:
      ConversionError: not JSON, or JSON that is not an object (a damaged download).
    """
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (ValueError, RecursionError) as e:  # malformed, not UTF-8, an integer of over
        # 4,300 digits, nesting past the recursion limit (as fileio.parse_json refuses)
        raise core.ConversionError(f"{path}: not a valid JSON file ({e})") from None
    except OSError as e:  # a folder of that name, no permission
        raise core.ConversionError(f"{path}: cannot read it ({e.strerror or e})") from None
    if not isinstance(value, dict):
        raise core.ConversionError(f"{path}: expected a JSON object, got a "
                                   f"{type(value).__name__}")
    return value


def read_config(model_dir: str) -> tuple[dict, EncoderConfig]:
    path = os.path.join(model_dir, "config.json")
    if not os.path.exists(path):
        raise core.ConversionError(f"{path} not found (a transformers model folder holds "
                                   "config.json and model.safetensors)")
    hf = _read_json(path)
    if hf.get("model_type", "electra") != "electra":
        raise core.ConversionError(f"{path}: model_type {hf.get('model_type')!r} is not electra")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise core.ConversionError(f"{path}: position_embedding_type "
                                   f"{hf['position_embedding_type']!r} is not supported")
    decoder = [k for k in ("is_decoder", "add_cross_attention") if hf.get(k)]
    if decoder:  # ElectraForCausalLM's: imported, it would have attended both ways
        raise core.ConversionError(
            f"{path}: {' and '.join(decoder)} set: a causal (left-to-right) model, as "
            "ElectraForCausalLM is; electra_tf's ELECTRA encoders attend in both directions")
    act = hf.get("hidden_act", "gelu")
    if not isinstance(act, str) or act not in _ACT_FROM_HF:
        raise core.ConversionError(f"{path}: hidden_act {act!r} is not supported")
    values = {k: hf.get(k, _HF_DEFAULTS[k]) for k in _ENCODER_FIELDS}
    values["hidden_act"] = _ACT_FROM_HF[act]
    if values["hidden_act"] != "gelu":  # transformers' generator head is always GELU
        values["generator_head_act"] = "gelu"
    try:
        return hf, EncoderConfig.from_dict(values)
    except ConfigError as e:  # a damaged or hand-edited config.json
        raise core.ConversionError(f"{path}: {e}") from None


def read_weights(model_dir: str) -> dict[str, np.ndarray]:
    """The state dict as float32 numpy arrays (safetensors, else pytorch_model.bin)."""
    single = os.path.join(model_dir, "model.safetensors")
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(single) or os.path.exists(index):
        load_file = _safetensors().load_file
        from safetensors import SafetensorError

        files = [single]
        if not os.path.exists(single):
            weight_map = _read_json(index).get("weight_map")
            if not isinstance(weight_map, dict) or not weight_map:
                raise core.ConversionError(f"{index}: no weight_map of tensor -> file")
            files = sorted({os.path.join(model_dir, str(v)) for v in weight_map.values()})
        weights = {}
        for path in files:
            try:
                weights.update(load_file(path))
            except (SafetensorError, OSError) as e:  # truncated, damaged, missing
                raise core.ConversionError(
                    f"{path}: not a readable safetensors file ({e}); a damaged or "
                    "incomplete download?") from None
            except (TypeError, ValueError) as e:  # e.g. bfloat16, which numpy lacks
                raise core.ConversionError(f"{path}: {e}; save the model in float32") from None
    else:
        path = os.path.join(model_dir, "pytorch_model.bin")
        if not os.path.exists(path) and os.path.exists(path + ".index.json"):
            raise core.ConversionError(
                f"{model_dir} holds sharded pytorch_model-*.bin weights (pytorch_model.bin."
                "index.json), which electra_tf does not read; save the model as safetensors "
                "(model.save_pretrained(DIR) writes model.safetensors, sharded or not)")
        if not os.path.exists(path):
            raise core.ConversionError(f"no model.safetensors or pytorch_model.bin in {model_dir}")
        try:
            import torch
        except ImportError:
            raise core.ConversionError(f"{path} needs torch to read; install electra_tf[interop] "
                                       "or convert it to model.safetensors") from None
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
            weights = {k: v.float().numpy() for k, v in state.items()}
        except (RuntimeError, EOFError, ValueError, AttributeError, OSError,
                pickle.UnpicklingError) as e:  # (OSError: a zip archive cut short)
            reason = " ".join(str(e).split()) or type(e).__name__  # (an empty file: "")
            raise core.ConversionError(f"{path}: not a readable PyTorch state dict ({reason}); a "
                                       "damaged or incomplete download?") from None
    return {k: np.asarray(v, dtype=np.float32) if v.dtype.kind == "f" else v
            for k, v in weights.items()}


def _json_object(path: str, key: str) -> dict | None:
    """The object under `key` of the JSON file at `path` (None: absent or null).

    Raises:
      ConversionError: not JSON, or that value is not an object (a damaged file).
    """
    value = _read_json(path).get(key)
    if value is not None and not isinstance(value, dict):
        raise core.ConversionError(f"{path}: {key!r} should be a JSON object, got a "
                                   f"{type(value).__name__}")
    return value


def read_casing(model_dir: str) -> bool | None:
    """Whether a transformers folder's tokenizer lower-cases: tokenizer_config.json's
    do_lower_case, else tokenizer.json's BertNormalizer `lowercase`; None: the folder
    says nothing (no tokenizer_config.json or BERT normalizer). electra_tf strips
    accents exactly when it lower-cases (BERT's rule): a folder that says otherwise is
    refused.

    Raises:
      ConversionError: a casing electra_tf's tokenizer cannot follow.
    """
    lower, strip, chinese = None, None, None
    config_path = os.path.join(model_dir, "tokenizer_config.json")
    tokenizer_json = os.path.join(model_dir, "tokenizer.json")
    if os.path.exists(config_path):
        values = _read_json(config_path)
        lower, strip = values.get("do_lower_case"), values.get("strip_accents")
        chinese = values.get("tokenize_chinese_chars")
    if os.path.exists(tokenizer_json):
        normalizer = _json_object(tokenizer_json, "normalizer") or {}
        if normalizer.get("type") == "BertNormalizer":
            lower = normalizer.get("lowercase", True) if lower is None else lower
            strip = normalizer.get("strip_accents") if strip is None else strip
            chinese = normalizer.get("handle_chinese_chars") if chinese is None else chinese
    for name, value in (("do_lower_case", lower), ("strip_accents", strip),
                        ("tokenize_chinese_chars", chinese)):
        if value is not None and not isinstance(value, bool):  # "false" had been true
            raise core.ConversionError(f"{model_dir}: the tokenizer's {name} is {value!r}, "
                                       "not true, false or null")
    if chinese is not None and not chinese:
        raise core.ConversionError(
            f"{model_dir}: the tokenizer keeps Chinese characters together "
            "(tokenize_chinese_chars false); electra_tf's tokenizer splits each one off, as "
            "BERT's does by default")
    if strip is not None and bool(strip) != (True if lower is None else bool(lower)):
        raise core.ConversionError(
            f"{model_dir}: the tokenizer {'strips' if strip else 'keeps'} accents while it "
            f"{'keeps case' if lower is False else 'lower-cases'}; electra_tf's tokenizer "
            "strips accents exactly when it lower-cases (BERT's rule)")
    return None if lower is None else bool(lower)


MIN_MAX_SEQ_LENGTH = 8  # the shortest window FinetuningConfig takes


def read_max_length(model_dir: str, positions: int) -> int:
    """The window a transformers task model reads: tokenizer_config.json's
    `model_max_length` where it is a whole number of at most `positions` (what `--to=hf`
    writes of a fine-tuned folder: the max_seq_length it was trained with), else
    `positions` (a tokenizer without one records a huge number)."""
    path = os.path.join(model_dir, "tokenizer_config.json")
    value = _read_json(path).get("model_max_length") if os.path.exists(path) else None
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= positions:
        if value < MIN_MAX_SEQ_LENGTH:  # (had been refused as a --max_seq_length not given)
            raise core.ConversionError(
                f"{path}: model_max_length {value} is below the {MIN_MAX_SEQ_LENGTH} "
                "positions electra_tf's tasks take; give --max_seq_length, or correct it")
        return value
    return positions


def casing(model_dir: str, given: bool | None = None) -> bool | None:
    """The folder's casing (`read_casing`), else `given` (--do_lower_case: None when
    not given).

    Raises:
      ConversionError: `given` against what the folder says.
    """
    lower = read_casing(model_dir)
    if given is not None and lower is not None and bool(given) != lower:
        raise core.ConversionError(
            f"--do_lower_case={str(bool(given)).lower()}: {model_dir}'s tokenizer "
            f"{'lower-cases' if lower else 'keeps case'} (tokenizer_config.json or "
            "tokenizer.json); leave the flag out")
    return lower if lower is not None else (None if given is None else bool(given))


def read_tokenizer(model_dir: str, output: str, vocab_file: str = "",
                   do_lower_case: bool | None = None) -> tuple[str, bool]:
    """The vocabulary and casing of a transformers folder: (vocab path in `output`, lower).

    The vocabulary: `vocab_file` if given, else the folder's vocab.txt, else the
    WordPiece vocabulary inside tokenizer.json (written to output/vocab.txt in id
    order). The casing: `casing` (the folder's, else `do_lower_case`), else True
    (ELECTRA's released models are uncased).

    Raises:
      ConversionError: no vocabulary, or a casing electra_tf's tokenizer cannot follow.
    """
    lower = casing(model_dir, do_lower_case)
    lower = True if lower is None else lower
    folder = ConvertedFolder(output)
    if vocab_file:
        if not os.path.isfile(vocab_file):
            raise core.ConversionError(f"--vocab_file {vocab_file} not found")
        return folder.keep_vocab_file(vocab_file), lower
    copied = folder.keep_vocab_beside(model_dir)
    if copied:
        return copied, lower
    tokens = _tokenizer_json_tokens(model_dir)
    if tokens:
        return folder.keep_vocab_tokens(tokens), lower
    raise core.ConversionError(
        f"{model_dir} holds no vocabulary (vocab.txt, or a WordPiece tokenizer.json); pass "
        "--vocab_file, the vocabulary the model was trained with")


def _tokenizer_json_tokens(model_dir: str) -> list[str]:
    """The WordPiece vocabulary of model_dir/tokenizer.json in id order ([] if none)."""
    path = os.path.join(model_dir, "tokenizer.json")
    if not os.path.exists(path):
        return []
    vocab = (_json_object(path, "model") or {}).get("vocab")
    if isinstance(vocab, dict) and sorted(vocab.values()) == list(range(len(vocab))):
        tokens = sorted(vocab, key=vocab.get)
        for i, token in enumerate(tokens):  # (as load_vocab refuses such a vocab.txt line,
            # before the conversion writes one: it had named the written file, then gone)
            if not token or token != token.strip():
                raise core.ConversionError(
                    f"{path}: token {token!r} (id {i}) is " + (
                        "empty" if not token else "a word piece with whitespace at its ends")
                    + ", which no vocab.txt line holds (electra_tf refuses an empty line "
                    "and whitespace at a token's ends); pass --vocab_file, a vocab.txt "
                    f"with a placeholder such as [unused_id{i}] on line {i + 1}")
        return tokens
    return []


def check_vocabulary(model_dir: str, vocab_file: str, rows: int) -> None:
    """Refuses the vocabulary a conversion would keep when the table cannot take it.

    The one `read_tokenizer` (or the copy) would take: `vocab_file`, the
    folder's vocab.txt, else tokenizer.json's. It must hold a word piece (not
    special tokens only: nothing could be tokenized, and the export would end
    in tensorflow-text's traceback) and no more tokens than the embedding table
    has rows (a smaller one is legal: transformers models often pad the table).
    Reads and writes nothing else, so it runs before the weights are read.

    Raises:
      ConversionError: one line naming the file (and both sizes).
    """
    from electra_tf.core.errors import VocabError
    from electra_tf.text.vocab import load_vocab

    if vocab_file and not os.path.isfile(vocab_file):
        raise core.ConversionError(f"--vocab_file {vocab_file} not found")
    source = vocab_file or os.path.join(model_dir, core.SOURCE_VOCAB)
    try:
        if os.path.isfile(source):
            tokens = load_vocab(source)
        else:
            source, tokens = os.path.join(model_dir, "tokenizer.json"), \
                _tokenizer_json_tokens(model_dir)
            if not tokens:
                return  # none here: a task model's import says so (read_tokenizer)
    except VocabError as e:
        raise core.ConversionError(str(e)) from None
    core.check_vocabulary(tokens, source, rows)
    if not vocab_file:
        _check_tokenizer_agrees(model_dir, source, tokens)


def _added_tokens(model_dir: str) -> dict[str, int]:
    """{token: id} the folder's tokenizer adds to its WordPiece vocabulary:
    tokenizer.json's `added_tokens` and added_tokens.json (the slow tokenizer's),
    special tokens included (those of the vocabulary itself are listed there too)."""
    added = {}
    path = os.path.join(model_dir, "tokenizer.json")
    if os.path.exists(path):
        entries = _read_json(path).get("added_tokens") or []
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and isinstance(entry.get("content"), str) \
                    and isinstance(entry.get("id"), int):
                added[entry["content"]] = entry["id"]
    path = os.path.join(model_dir, "added_tokens.json")
    if os.path.exists(path):
        added.update({k: v for k, v in _read_json(path).items() if isinstance(v, int)})
    return added


def _check_tokenizer_agrees(model_dir: str, source: str, tokens: list[str]) -> None:
    """Refuses a folder whose transformers tokenizer reads text otherwise than electra_tf's
    WordPiece tokenizer with `tokens` would: tokens added to the vocabulary (`add_tokens`,
    `add_special_tokens`: electra_tf's tokenizer had read them as [UNK] or split them into
    pieces, and the converted model predicted otherwise, silently), or a vocab.txt that is
    not tokenizer.json's WordPiece vocabulary (transformers tokenizes with tokenizer.json).
    --vocab_file goes on with the vocabulary it names.

    Raises:
      ConversionError: naming the tokens or the first id that differs.
    """
    unread = sorted(((token, i) for token, i in _added_tokens(model_dir).items()
                     if not (0 <= i < len(tokens) and tokens[i] == token)), key=lambda t: t[1])
    if unread:
        shown = ", ".join(f"{token!r} (id {i})" for token, i in unread[:5])
        more = f" and {len(unread) - 5} more" if len(unread) > 5 else ""
        # (--vocab_file reads a vocab.txt: tokenizer.json given there had been refused)
        given = source if os.path.basename(source) != "tokenizer.json" else (
            "a vocab.txt of its WordPiece vocabulary, written by python -c \"import json, "
            "sys; v = json.load(open(sys.argv[1]))['model']['vocab']; print(chr(10).join("
            f"sorted(v, key=v.get)))\" {shlex.quote(source)} > vocab.txt")
        raise core.ConversionError(
            f"{model_dir}: its tokenizer adds {shown}{more} to {os.path.basename(source)}, "
            "which electra_tf's WordPiece tokenizer does not read (text holding them would "
            "become [UNK] or pieces, and the converted model predict otherwise than "
            f"transformers); to convert without them, give --vocab_file={given}")
    json_tokens = _tokenizer_json_tokens(model_dir)
    if json_tokens and os.path.basename(source) == core.SOURCE_VOCAB and json_tokens != tokens:
        first = next((i for i, (a, b) in enumerate(zip(tokens, json_tokens)) if a != b),
                     min(len(tokens), len(json_tokens)))
        said = (f"id {first} is {tokens[first]!r} in vocab.txt, {json_tokens[first]!r} in "
                "tokenizer.json" if first < min(len(tokens), len(json_tokens)) else
                f"vocab.txt holds {len(tokens)} tokens, tokenizer.json {len(json_tokens)}")
        raise core.ConversionError(
            f"{model_dir}: vocab.txt is not tokenizer.json's vocabulary ({said}), and "
            "transformers tokenizes with tokenizer.json; give the one the model was trained "
            "with as --vocab_file")


def keep_vocabulary(model_dir: str, output: str) -> str:
    """Copies the folder's vocabulary into output/vocab.txt (vocab.txt, else tokenizer.json's
    WordPiece tokens); returns the copy's path, or "" when the folder has none."""
    folder = ConvertedFolder(output)
    copied = folder.keep_vocab_beside(model_dir)
    tokens = [] if copied else _tokenizer_json_tokens(model_dir)
    if tokens:
        copied = folder.keep_vocab_tokens(tokens)
    return copied


def _keep_shared_vocabulary(model_dir: str, output: str) -> None:
    """A generator's vocabulary: copied in, unless `output` already holds a converted
    discriminator, whose vocabulary the generator must share (ELECTRA's two models
    share their embeddings): it had been replaced by the generator's, and every later
    use of the folder blamed a changed vocabulary on the user.

    Raises:
      ConversionError: the generator's tokens are not the discriminator's.
    """
    from electra_tf.folders.files import DISCRIMINATOR_WEIGHTS, holds_weights
    from electra_tf.folders.vocabulary import vocab_in
    from electra_tf.text.vocab import load_vocab

    existing = vocab_in(output)
    if not (existing and holds_weights(output, DISCRIMINATOR_WEIGHTS)):
        keep_vocabulary(model_dir, output)
        return
    beside = vocab_in(model_dir)
    tokens = load_vocab(beside) if beside else _tokenizer_json_tokens(model_dir)
    if tokens and list(tokens) != list(load_vocab(existing)):
        raise core.ConversionError(
            f"{model_dir}: its vocabulary ({len(tokens)} tokens) is not the discriminator's "
            f"({existing}): ELECTRA's generator and discriminator share one; give the "
            "generator trained with that discriminator")


def _check_shared_sizes(model_dir: str, config: EncoderConfig, output: str) -> None:
    """Refuses a generator whose vocabulary or position count is not that of the
    discriminator converted into `output` (ELECTRA's two models share their token and
    position embeddings): a generator's folder without a vocab.txt had gone in with 100
    rows beside a vocabulary of 211 tokens, and failed at its first id past 99.

    Raises:
      ConversionError: naming the size, both values and the folders.
    """
    from electra_tf.folders.pretraining import saved_discriminator_config

    saved = saved_discriminator_config(output)
    if saved is None:
        return
    discriminator, path = saved
    for name in ("vocab_size", "max_position_embeddings"):
        mine, theirs = getattr(config, name), getattr(discriminator, name)
        if mine != theirs:
            raise core.ConversionError(
                f"{model_dir}: its {name} is {mine}, the discriminator's {theirs} ({path}): "
                "ELECTRA's generator and discriminator share their token and position "
                "embeddings; give the generator trained with that discriminator")


def _check_shared_casing(model_dir: str, output: str) -> None:
    """Refuses a generator whose tokenizer cases text otherwise than the discriminator
    converted into `output` (its recorded casing; none recorded: lower-cased, as the
    folder is then read): the generator's had been dropped silently, and `--to=hf
    --generator` wrote the discriminator's into it.

    Raises:
      ConversionError: the two casings differ.
    """
    from electra_tf.folders.files import DISCRIMINATOR_WEIGHTS, holds_weights
    from electra_tf.folders.pretraining import read_pretraining_config, recorded_casing

    lower = read_casing(model_dir)
    if lower is None or not holds_weights(output, DISCRIMINATOR_WEIGHTS):
        return
    # the record as written so far (the folder is mid-conversion: not opened as a model)
    recorded = recorded_casing(read_pretraining_config(output))
    if lower != (True if recorded is None else recorded):
        said = ("records lower-cased text" if recorded else "records cased text"
                ) if recorded is not None else "records no casing (read as lower-cased)"
        raise core.ConversionError(
            f"{model_dir}: its tokenizer {'lower-cases' if lower else 'keeps case'}, but the "
            f"discriminator's conversion {said}: ELECTRA's generator and discriminator read "
            "the same text; give the generator trained with that discriminator"
            + ("" if recorded is not None else
               f", or convert the discriminator with --do_lower_case={str(lower).lower()}"))


def detect_kind(weights: dict) -> str:
    """pretraining | masked_lm | model, or a task model's head (the name of the head class
    whose `hf_detect` recognises the weights)."""
    keys = set(weights)
    if any(k.startswith(("generator_predictions.", "generator_lm_head.")) for k in keys):
        return "masked_lm"
    if any(k.startswith("discriminator_predictions.") for k in keys):
        return "pretraining"
    for head in heads.head_classes():
        if head.hf_detect(keys):
            return head.kind
    return "model"


# === Import ===
# What a folder of no task head holds, by detect_kind's kind.
_ARCHITECTURES = {"masked_lm": "ElectraForMaskedLM (a generator)",
                  "pretraining": "ElectraForPreTraining (a discriminator)",
                  "model": "ElectraModel (an encoder)"}


def import_model(model_dir: str, output: str, model_size: str = "",
                 drop_task_head: bool = False, task_name: str = "", vocab_file: str = "",
                 max_seq_length: int = 0, do_lower_case: bool | None = None) -> dict:
    """Converts one transformers ELECTRA folder into (part of) an electra_tf model_dir.

    A task model (a head of tasks/heads/) becomes a fine-tuning folder (`write_task_folder`);
    `task_name`, `vocab_file` and `max_seq_length` are for those. `do_lower_case`: the
    casing where the folder does not say (None: a task model is taken as uncased, a
    discriminator's is left unrecorded); against what it says, refused. A conversion that
    fails midway (a full disk) removes what it wrote: the folder it made, or the
    files it added to one that was there, so no half folder (a vocab.txt alone) is left.

    Returns the conversion report (also merged into conversion_report.json).
    """
    with undo_on_failure(output):
        return _import_model(model_dir, output, model_size, drop_task_head, task_name,
                             vocab_file, max_seq_length, do_lower_case)


def _import_model(model_dir: str, output: str, model_size: str, drop_task_head: bool,
                  task_name: str, vocab_file: str, max_seq_length: int,
                  do_lower_case: bool | None = None) -> dict:
    from electra_tf.modeling.models import ElectraGenerator, build_discriminator
    from electra_tf.tasks.model import FinetuningModel

    hf_config, config = read_config(model_dir)
    if max_seq_length < 0:
        raise core.ConversionError(f"--max_seq_length={max_seq_length}: give a positive "
                                   "length, or 0 for the task's default")
    if max_seq_length > config.max_position_embeddings:
        raise core.ConversionError(
            f"--max_seq_length={max_seq_length}: the model has "
            f"{config.max_position_embeddings} positions (max_position_embeddings in "
            f"{os.path.join(model_dir, 'config.json')}); give at most that")
    check_vocabulary(model_dir, vocab_file, config.vocab_size)
    weights = read_weights(model_dir)
    kind = detect_kind(weights)
    head = heads.head_class(kind) if kind in heads.HEADS else None
    held = head.hf_architecture if head is not None else _ARCHITECTURES[kind]
    if drop_task_head and (head is None or not head.hf_droppable):
        raise core.ConversionError(
            f"--drop_task_head: {model_dir} holds an {held}, "
            + ("which has no task head to drop" if head is None else
               "whose head electra_tf converts as a fine-tuning folder")
            + "; leave --drop_task_head out")
    dropped = head if drop_task_head else None
    if dropped is not None:
        kind, head = "model", None
    given = [f for f, v in (("task_name", task_name), ("max_seq_length", max_seq_length)) if v]
    if given and head is None:  # what a task model takes: here it would be dropped
        raise core.ConversionError(
            f"--{given[0]} is for a task model (a head electra_tf fine-tunes), and "
            f"{model_dir} holds an {held}" + (" (its head dropped)" if dropped else "")
            + "; leave it out")
    core.check_finite({k: v for k, v in weights.items()
                  if not (dropped is not None and dropped.hf_owns(k))}, model_dir)
    if kind != "masked_lm":  # a generator is a fraction of the size it goes with
        core.check_model_size(config, model_size, {})
    else:  # before anything is written
        _check_shared_sizes(model_dir, config, output)
    task_model = head is not None
    if task_model:  # before any file is written: a folder it cannot describe is refused
        head_config = check_task_head(model_dir, hf_config, weights, head)
        vocab, lower = read_tokenizer(model_dir, output, vocab_file, do_lower_case)
    elif kind != "masked_lm":  # recorded with the discriminator (None: the folder says not)
        lower = casing(model_dir, do_lower_case)
    scope = "generator" if kind == "masked_lm" else "electra"
    skipped, converted, source_names = [], {}, {}
    for key, value in weights.items():
        if key.endswith(names.HF_BUFFERS):
            skipped.append(f"{key} (buffer)")
            continue
        if key == "generator_lm_head.weight":  # tied to the input table, as in ELECTRA
            table = weights.get("electra.embeddings.word_embeddings.weight")
            if table is None or not np.array_equal(table, value):
                raise core.ConversionError(
                    f"{model_dir}: generator_lm_head.weight differs from the word embeddings; "
                    "electra_tf's MLM head is tied to them")
            skipped.append(f"{key} (tied to the word embeddings)")
            continue
        if dropped is not None and dropped.hf_owns(key):
            skipped.append(f"{key} (task head dropped)")
            continue
        mapped = (head.hf_to_original(key) if head is not None and head.hf_owns(key)
                  else names.hf_to_original(key, scope))
        if mapped is None:
            raise core.ConversionError(f"{model_dir}: {key} (shape {tuple(value.shape)}) maps "
                                       "to nothing in electra_tf")
        name, transpose = mapped
        converted[name] = value.T if transpose else value
        source_names[name] = key
    table = converted.get(f"{scope}/embeddings/word_embeddings")
    if table is not None and table.ndim == 2 and table.shape[0] != config.vocab_size:
        raise core.ConversionError(  # not electra_tf's table's fault: the folder's own
            f"{model_dir}: config.json gives vocab_size {config.vocab_size} but "
            f"{source_names[f'{scope}/embeddings/word_embeddings']} has {table.shape[0]} "
            "rows; the folder's config and weights disagree")
    _check_sizes(config, converted, scope, model_dir)
    folder = ConvertedFolder(output)
    may_be_missing: tuple[str, ...] = ()
    finetuned = None
    if kind == "masked_lm":
        model = ElectraGenerator(config)
        model.build()
        targets = names.generator_variables(model)
    else:
        model = build_discriminator(config)
        targets = names.discriminator_variables(model)
        if kind != "pretraining":
            may_be_missing = ("discriminator_predictions/",)
        if task_model:
            width = int(weights[head.hf_output_weight].shape[0])
            finetuned = FinetuningModel(model.encoder, kind, num_labels=width,
                                        config=head_config)
            finetuned.build()
            targets.update(finetuned.head.original_variables())
    report = core.assign(converted, targets, model_dir, may_be_missing, source_names)
    report.update(source=os.path.abspath(model_dir), format="hf", kind=kind, skipped=skipped,
                  mapping={n: targets[n].path for n in report["assigned"]})
    if kind == "masked_lm":
        _keep_shared_vocabulary(model_dir, output)
        _check_shared_casing(model_dir, output)
        folder.save_generator(model, standalone=True)
    else:
        if not task_model:  # --vocab_file where given (past _check_tokenizer_agrees)
            vocab = folder.keep_vocab_file(vocab_file) if vocab_file else \
                keep_vocabulary(model_dir, output)
            if not vocab:  # (as --from=tf1 says: it had been found missing at --to=hf)
                report["notes"] = [
                    f"{model_dir} holds no vocab.txt or WordPiece tokenizer.json and no "
                    "--vocab_file was given: the output holds no vocabulary; rerun with "
                    "--vocab_file=the vocab.txt the model was trained with (fine-tuning, "
                    "the export and --to=hf need it)"]
        folder.save_discriminator(model)
        folder.record_vocab(vocab, lower)
    if finetuned is not None:
        report["task"] = write_task_folder(
            output, finetuned, hf_config, source=os.path.abspath(model_dir), vocab=vocab,
            do_lower_case=lower, task_name=task_name,
            max_seq_length=max_seq_length or read_max_length(
                model_dir, config.max_position_embeddings))
    folder.write_report(report, kind=kind)
    return report


def _check_sizes(config: EncoderConfig, converted: dict, scope: str, model_dir: str) -> None:
    """config.json's sizes against the weights' shapes, before a model of those sizes is
    built: a hidden_size of 2^20 had run out of memory building it, 100,000 layers had
    built for hours, and smaller mismatches were found only after the build.

    Raises:
      ConversionError: naming the size, both values and the folder.
    """
    def width(name: str, axis: int):
        value = converted.get(f"{scope}/{name}")
        return None if value is None or value.ndim != 2 else int(value.shape[axis])

    layers = {int(m.group(1)) for name in converted
              if (m := re.match(rf"{re.escape(scope)}/encoder/layer_(\d+)/", name))}
    held = {"num_hidden_layers": len(layers),
            "hidden_size": width("encoder/layer_0/attention/self/query/kernel", 1),
            "intermediate_size": width("encoder/layer_0/intermediate/dense/kernel", 1),
            "embedding_size": width("embeddings/word_embeddings", 1),
            "max_position_embeddings": width("embeddings/position_embeddings", 0)}
    given = {**{k: getattr(config, k) for k in held},
             "embedding_size": config.resolved_embedding_size}
    for key, value in held.items():
        if value is not None and value != given[key]:
            raise core.ConversionError(
                f"{model_dir}: config.json gives {key} {given[key]} but the weights hold "
                f"{value}; the folder's config and weights disagree")


def check_task_head(model_dir: str, hf_config: dict, weights: dict, head):
    """Refuses a task model whose config.json does not describe its head; returns the
    head's config (`head.hf_import_config`).

    The head's outputs must be one or more; what the head class refuses
    (`hf_check`: a sequence classifier's problem_type it does not compute; a QA
    head without two outputs); id2label, where given, must name exactly the head's
    outputs, ids 0 to N-1.

    Raises:
      ConversionError naming config.json (or the folder) and what disagrees.
    """
    path = os.path.join(model_dir, "config.json")
    key = head.hf_output_weight
    if key not in weights:
        raise core.ConversionError(f"{model_dir}: an {head.hf_architecture} without "
                                   f"{key}: an incomplete checkpoint")
    width = int(weights[key].shape[0])
    if width == 0:
        raise core.ConversionError(f"{path}: the head has no outputs ({key} has shape "
                                   f"{tuple(weights[key].shape)}; num_labels "
                                   f"{hf_config.get('num_labels', 0)}): it predicts nothing")
    try:
        head.hf_check(path, hf_config, width)
        config = head.hf_import_config(width)
    except ValueError as e:
        message = str(e)
        raise core.ConversionError(message if message.startswith(path)
                                   else f"{model_dir}: {message}") from None
    if head.hf_labelled and width > 1:
        _labels(hf_config, width, path)
    return config


def _labels(hf_config: dict, width: int, path: str = "config.json") -> list[str]:
    """id2label in id order; LABEL_i where config.json has none (transformers' default).

    Raises:
      ConversionError: an id2label that does not name ids 0 to width - 1.
    """
    id2label = hf_config.get("id2label")
    if not id2label:
        return [f"LABEL_{i}" for i in range(width)]
    if not isinstance(id2label, dict):
        raise core.ConversionError(f"{path}: id2label must map ids to names, got {id2label!r}")
    ids = [str(k) for k in id2label]
    try:
        names = {int(k): str(v) for k, v in id2label.items()}
    except ValueError:
        names = {}
    if len(ids) != width or sorted(names) != list(range(width)):
        raise core.ConversionError(
            f"{path}: id2label's {len(ids)} names (ids {', '.join(ids)}) do not match the "
            f"head's {width} outputs (ids 0 to {width - 1}): config.json does not describe "
            "this model's head")
    labels = [names[i] for i in range(width)]
    # (had been refused as the --label_names the user never gave)
    bad = next((label for label in labels if not label.strip() or labels.count(label) > 1),
               None)
    if bad is not None:
        raise core.ConversionError(
            f"{path}: id2label names {bad!r} " + ("twice" if bad.strip() else "for a label")
            + ": a head's labels are distinct, non-empty names; name them so in "
              "config.json's id2label")
    from electra_tf.tasks.base import has_control_character
    from electra_tf.text.cleaning import has_lone_surrogate, invisible_character

    # (these had been refused as the --label_names the user never gave)
    odd = next((label for label in labels if has_control_character(label)
                or has_lone_surrogate(label) or invisible_character(label)), None)
    if odd is not None:
        raise core.ConversionError(
            f"{path}: id2label names {odd!r}, which holds a control, invisible or lone "
            "surrogate character (the tab-separated prediction files cannot hold it, or it "
            "prints as another name); rename it in config.json's id2label")
    return labels


def _finetuning_task(hf_config: dict) -> str:
    """The electra_tf task that config.json's `finetuning_task` names (ours, or the
    original's spelling of one: "sst-2"), or ""."""
    from electra_tf.tasks.registry import spelled_as, task_names

    named = hf_config.get("finetuning_task")
    if not isinstance(named, str) or not named:
        return ""
    return named if named in task_names() else spelled_as(named) or ""


def _to_task_order(model, labels: list[str], task, source: str) -> None:
    """Puts the classifier's outputs in the task's label order where config.json's
    id2label names the task's labels in another (transformers' MNLI models: entailment,
    neutral, contradiction; GLUE's: contradiction, entailment, neutral), which had been
    served under the task's names in the model's order. Names that are not the task's
    (LABEL_0, ...) cannot be matched: the model's order is taken, and a warning says so;
    where all but one name are the task's, the last is the label left; names of the task's
    that do not cover its labels otherwise are refused."""
    wanted = [n.lower() for n in task.label_names]
    have = [n.lower() for n in labels]
    known = [n for n in have if n in wanted]
    unknown = [i for i, n in enumerate(have) if n not in wanted]
    missing = [n for n in wanted if n not in have]
    if known and len(set(known)) == len(known) and len(unknown) == len(missing) == 1:
        # (one name not the task's: the one label left, by elimination; it had been taken
        # by position, which served two of MNLI's labels under each other's names)
        logging.warning("%s: config.json's id2label (%s) names --task_name=%s's labels but "
                        "%r: taken to be %r", source, ", ".join(labels), task.name,
                        labels[unknown[0]], task.label_names[wanted.index(missing[0])])
        have[unknown[0]] = missing[0]
    elif known and sorted(have) != sorted(wanted):  # (by position, they would be wrong)
        raise core.ConversionError(
            f"{source}: config.json's id2label ({', '.join(labels)}) names some of "
            f"--task_name={task.name}'s labels ({', '.join(task.label_names)}) but not each "
            "once: name every output's label there")
    if sorted(have) != sorted(wanted) or len(set(have)) != len(have):
        if have != wanted:
            logging.warning(
                "%s: config.json's id2label (%s) are not --task_name=%s's labels (%s): its "
                "outputs are taken to be in that order; check a few predictions", source,
                ", ".join(labels), task.name, ", ".join(task.label_names))
        return
    order = [have.index(n) for n in wanted]
    if order == list(range(len(order))):
        return
    dense = model.head.output_dense
    dense.kernel.assign(np.asarray(dense.kernel.numpy())[:, order])
    dense.bias.assign(np.asarray(dense.bias.numpy())[order])


def write_task_folder(output: str, model, hf_config: dict, *, source: str, vocab: str,
                      do_lower_case: bool, task_name: str, max_seq_length: int) -> str:
    """Writes the fine-tuning folder of an imported task model; returns its task name.

    The task: `task_name`, else by the head (ner, BIO or BIOES as its labels
    are, or tagging where they are neither; squad_v1; classification). Its head must be the model's.
    Tasks with labels of their own (GLUE) keep them, in the model's label
    order; the others take id2label's. SQuAD 2.0 without an answerability
    classifier (transformers has none) uses the combined null rule: start +
    end logits at [CLS] against the best span.

    Raises:
      ConversionError: a task of another head, or a label count the task cannot take.
    """
    from electra_tf.core.config import FinetuningConfig, FinetuningRun, model_size_of
    from electra_tf.tasks.registry import format_label_names, task_from_config

    head = model.head
    head_cls, head_config = type(head), head.head_config
    learns = head_cls.learns_labels(head_config)
    width = head.num_labels
    labels = _labels(hf_config, width) if learns else []
    default = head_cls.hf_default_task(labels)
    named = _finetuning_task(hf_config)
    if not task_name and named and named != default:  # (--to=hf writes it; so do
        # transformers' own GLUE and NER scripts)
        logging.warning("%s: config.json's finetuning_task is %r: recorded as %s; give "
                        "--task_name=%s to record it as that task (its labels, inputs and "
                        "settings)", source, hf_config["finetuning_task"], default, named)
    task_name = task_name or default
    options = {"task_name": task_name, "do_lower_case": do_lower_case,
               "max_seq_length": max_seq_length,
               **head_cls.hf_finetuning_options(head_config, task_name, labels)}
    if labels and task_name in ("classification", "tagging", "ner", "chunking"):
        options["label_names"] = format_label_names(labels)
    try:
        config = FinetuningConfig(**options)
        task = task_from_config(config)
    except (ConfigError, TypeError) as e:
        raise core.ConversionError(f"--task_name={task_name}: {e}") from None
    refusal = task.segments_refusal(model.encoder.config.type_vocab_size)
    if refusal:
        raise core.ConversionError(f"--task_name={task_name}: {refusal}")
    had = head_cls.describe(head_config)
    want = task.head_class.describe(task.head_config())
    if task.head_class is not head_cls or had != want:
        raise core.ConversionError(f"--task_name={task_name} has a {want}, but "
                                   f"{source} holds a {had}")
    if learns and len(task.label_names) != width:
        raise core.ConversionError(
            f"--task_name={task_name} has {len(task.label_names)} labels "
            f"({', '.join(task.label_names)}), but {source} predicts {width}")
    own_labels = "label_names" not in options  # a task of its own labels (GLUE)
    if learns and own_labels:
        _to_task_order(model, labels, task, source)
    label_scale = (0.0, 1.0)  # transformers' regression logit is the score
    if getattr(task, "regression", False) and own_labels:
        # STS-B trains on score / 5 and reads logit * 5 (the record's label_scale): the
        # scale goes into the output layer, or every later use had read 5x the score.
        low, high = task.regression_min, task.regression_max
        dense = model.head.output_dense
        dense.kernel.assign(np.asarray(dense.kernel.numpy()) / high)
        dense.bias.assign((np.asarray(dense.bias.numpy()) - low) / high)
        label_scale = (low, high)
    run = FinetuningRun(model_dir=output, vocab_file=vocab, init_checkpoint=source)
    ConvertedFolder(output).save_finetuned(
        model, task=task, config=config, run=run, encoder=model.encoder.config,
        model_size=model_size_of(model.encoder.config), max_seq_length=max_seq_length,
        head_config=head_config,  # transformers' (an independent span head, no answerability)
        head_options=head_cls.hf_head_options(head_config),
        label_scale=label_scale,
        converted_from=source)
    return task_name


# === Export ===
def hf_config(config: EncoderConfig, architecture: str) -> dict:
    values = {k: getattr(config, k) for k in _ENCODER_FIELDS}
    values.update(embedding_size=config.resolved_embedding_size, architectures=[architecture],
                  model_type="electra", hidden_act=_ACT_TO_HF[config.hidden_act],
                  position_embedding_type="absolute", pad_token_id=0, classifier_dropout=None,
                  tie_word_embeddings=True, summary_type="first", summary_use_proj=True,
                  summary_activation="gelu", summary_last_dropout=0.1)
    return values


def export_warnings(config: EncoderConfig, architecture: str) -> list[str]:
    """What transformers' `architecture` with hf_config(config) computes differently."""
    head_act = config.generator_head_act or config.hidden_act
    if architecture == "ElectraForMaskedLM" and head_act != "gelu":
        return [f"the generator's MLM head applies {head_act}, but transformers' "
                f"ElectraGeneratorPredictions always applies gelu: the exported "
                f"ElectraForMaskedLM's logits will differ from electra_tf's"]
    return []


def state_dict(variables: dict) -> dict[str, np.ndarray]:
    """{original name: variable} -> transformers' {key: array} (Linear weights transposed)."""
    out = {}
    for name, var in variables.items():
        key, transpose = names.original_to_hf(name)
        value = np.asarray(var.numpy(), dtype=np.float32)
        out[key] = np.ascontiguousarray(value.T if transpose else value)
    return out


def _safetensors():
    """safetensors.numpy, or a ConversionError that names the package to install."""
    try:
        from safetensors import numpy as safetensors_numpy
    except ImportError:
        raise core.ConversionError("transformers folders are read and written with the "
                                   "safetensors package: pip install safetensors (the "
                                   "`interop` extra also installs torch and transformers, "
                                   "for pytorch_model.bin files and the parity tests)"
                                   ) from None
    return safetensors_numpy


def _check_room(output: str, *tensors: dict, files: tuple[str, ...] = ()) -> None:
    """Refuses (OSError ENOSPC) an export whose files the disk has no room for, before
    any of them is written: each safetensors file holds its tensors' bytes and a
    header, then `files` are copied (the vocabulary) and a few small JSON files."""
    need = sum(v.nbytes + 256 for group in tensors for v in group.values())
    need += sum(os.path.getsize(f) for f in files if f and os.path.isfile(f)) + 65536
    check_free_space(os.path.join(output, "model.safetensors"), need,
                     what="it and the export's other files")


def _save(output: str, tensors: dict, config: dict, tokenizer: tuple) -> list[str]:
    """model.safetensors, the tokenizer's files (`write_tokenizer(output, *tokenizer)`)
    and config.json, each atomically: serialized in memory and written by Python, so a
    full disk is an OSError (safetensors' own writer raises SafetensorError and leaves
    the file it truncated). config.json comes last: transformers loads a folder once it is
    there (a killed export's folder, without its tokenizer_config.json, had loaded, and
    read back uncased)."""
    data = _safetensors().save(tensors, metadata={"format": "pt"})
    weights = os.path.join(output, "model.safetensors")
    write_bytes(weights, data)
    written = write_tokenizer(output, *tokenizer)
    atomic_write_json(os.path.join(output, "config.json"), config)  # transformers' format
    return [os.path.join(output, "config.json"), weights, *written]


def export_model(model_dir: str, output: str, generator: bool = False) -> list[str]:
    """Writes transformers folders for an electra_tf model_dir.

    Args:
      model_dir: holds discriminator.weights.h5 + discriminator_config.json
        (and for `generator`, generator.weights.h5 + its config).
      output: gets config.json + model.safetensors (ElectraForPreTraining), vocab.txt
        and tokenizer_config.json (the casing the model was pre-trained with:
        `tokenizer_config`), and with `generator` a `generator/` folder
        (ElectraForMaskedLM, the same tokenizer files).

    A fine-tuning folder is written as its transformers task model instead
    (`export_finetuned`).

    Returns the written paths.
    """
    if is_finetuning_folder(model_dir):
        if generator:
            raise core.ConversionError(f"{model_dir} is a fine-tuning folder: it holds no "
                                       "generator (--generator is for pre-training folders)")
        return export_finetuned(model_dir, output)
    folder = PretrainingFolder.open(model_dir, what="--model_dir")
    discriminator = folder.load_discriminator()
    vocab = folder.vocab(flag="")  # (--to=hf takes no --vocab_file)
    tensors = state_dict(names.discriminator_variables(discriminator))
    gen = folder.load_generator() if generator else None
    if gen is not None and not hasattr(gen, "mlm_head"):  # Electric's two-tower generator
        raise core.ConversionError(f"{model_dir} holds an Electric two-tower generator, which "
                                   "transformers has no model for: convert without --generator")
    gen_tensors = state_dict(names.generator_variables(gen)) if gen is not None else {}
    _check_room(output, tensors, gen_tensors, files=(vocab,))
    # transformers' tokenizer, with the casing the model was pre-trained with (without
    # tokenizer_config.json AutoTokenizer lower-cases)
    tokenizer = (vocab, folder.do_lower_case, discriminator.config.max_position_embeddings)
    written = _save(output, tensors, hf_config(discriminator.config, "ElectraForPreTraining"),
                    tokenizer)
    untrained = [n for n in ConvertedFolder(model_dir).left_at_init()
                 if n.startswith("discriminator_predictions/")]
    if untrained:  # (an ElectraModel import: an encoder without the head)
        logging.warning("%s holds no trained replaced-token head (conversion_report.json lists "
                        "%s under left_at_init): the ElectraForPreTraining written holds its "
                        "initial values; its encoder is the model's", model_dir, untrained[0])
    if folder.recorded.get("pretraining", {}).get("objective") == "electric":
        logging.warning("%s: an Electric model: ElectraForPreTraining's logits are its energies "
                        "(a text's score is minus their sum over its pieces), not replaced-token "
                        "logits; convert --from=hf reads the folder back as an ELECTRA "
                        "discriminator, which electra_tf.score refuses: score with %s itself",
                        model_dir, model_dir)
    if gen is not None:
        for warning in export_warnings(gen.config, "ElectraForMaskedLM"):
            logging.warning("%s: %s", model_dir, warning)
        folder = os.path.join(output, "generator")
        written += _save(folder, gen_tensors, hf_config(gen.config, "ElectraForMaskedLM"),
                         tokenizer)
    return written


def export_finetuned(model_dir: str, output: str) -> list[str]:
    """Writes a fine-tuning folder as its transformers model, labels and tokenizer files.

    - token_classification -> ElectraForTokenClassification; squad (the
      independent span head, without an answerability classifier) ->
      ElectraForQuestionAnswering; sequence_classification (either classifier
      head, regression or not) -> ElectraForSequenceClassification.
    - The mlp classifier head is transformers' ElectraClassificationHead. The
      dense head (one layer on [CLS]) is written as that dense -> GELU -> dense
      exactly: the first dense is the identity plus a shift c that puts every
      input in GELU's linear range (c = 10 + the bound the last LayerNorm puts
      on its outputs), and out_proj subtracts W c again (`_dense_as_mlp`).
    - A regression head's label scale is folded into out_proj, so transformers'
      logit is the score (STS-B: 0..5).
    - config.json carries num_labels, id2label and label2id (problem_type
      "regression" for regression); vocab.txt and tokenizer_config.json (the
      casing, model_max_length) let AutoTokenizer load the tokenizer.

    Raises:
      ConversionError: a head transformers has no class for (the joint span
        head, SQuAD 2.0's answerability classifier).
    """
    folder = FinetunedFolder.open(model_dir)
    model, record = folder.load_model(), folder.record
    head = model.head
    head_cls, head_config = type(head), head.head_config
    if head_cls.hf_architecture is None:
        raise core.ConversionError(f"{model_dir}: transformers has no class for a "
                                   f"{head_cls.describe(head_config)}")
    try:
        head_cls.hf_export_check(head_config, model_dir)
    except ValueError as e:
        raise core.ConversionError(str(e)) from None
    encoder = model.encoder
    tensors = state_dict(names.encoder_variables("electra", encoder, "electra"))
    head_arrays = {name: np.asarray(keras_value(var), np.float64)
                   for name, var in head.original_variables().items()}
    head_arrays = head_cls.hf_export_arrays(head_config, head_arrays, record, encoder)
    for name, value in head_arrays.items():
        key, transpose = head_cls.original_to_hf(name)
        value = value.astype(np.float32)
        tensors[key] = np.ascontiguousarray(value.T if transpose else value)
    config = head_cls.hf_export_config(
        head_config, hf_config(encoder.config, head_cls.hf_architecture), record)
    # transformers' field for it: --from=hf names it (a round trip had come back as the
    # head's generic task, an mrpc model as single-text classification, without a word)
    config["finetuning_task"] = record.task
    vocab = folder.vocab(flag="")  # (--to=hf takes no --vocab_file)
    _check_room(output, tensors, files=(vocab,))
    return _save(output, tensors, config, (vocab, record.do_lower_case, record.max_seq_length))


def export_note(model_dir: str) -> str | None:
    """What `export_model` of `model_dir` leaves behind that the folder's model does (a
    fine-tuned SQuAD 2.0 model's null rule and threshold), as a line; None: nothing."""
    if not is_finetuning_folder(model_dir):
        return None
    record = FinetunedFolder.open(model_dir).record
    return record.head_class.hf_export_note(record)


def tokenizer_config(do_lower_case: bool, model_max_length: int) -> dict:
    """transformers' tokenizer_config.json for electra_tf's tokenizer (text/tokenizer.py):
    ElectraTokenizer with the same casing, accent stripping (BERT's rule: with
    lower-casing, `resolve_strip_accents`), CJK splitting and special tokens, so that
    AutoTokenizer gives electra_tf's ids."""
    return {"tokenizer_class": "ElectraTokenizer", "do_lower_case": bool(do_lower_case),
            "strip_accents": resolve_strip_accents(bool(do_lower_case), None),
            "tokenize_chinese_chars": True, "model_max_length": int(model_max_length),
            "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
            "cls_token": "[CLS]", "mask_token": "[MASK]"}


def write_tokenizer(output: str, vocab: str, do_lower_case: bool,
                    model_max_length: int) -> list[str]:
    """vocab.txt and tokenizer_config.json (`tokenizer_config`) in `output`: what
    AutoTokenizer.from_pretrained(output) reads. No vocabulary: nothing (a folder
    converted without one), with a warning."""
    if not vocab or not os.path.isfile(vocab):
        logging.warning("%s: no vocab.txt or tokenizer_config.json written: the model's folder "
                        "holds no vocabulary, and transformers' AutoTokenizer needs one; copy "
                        "the vocab.txt it was trained with there", output)
        return []
    path = os.path.join(output, "tokenizer_config.json")
    copied = copy_vocab_file(vocab, output)  # (an absolute path)
    written = [copied if os.path.isabs(output) else os.path.relpath(copied)]  # as given
    atomic_write_json(path, tokenizer_config(do_lower_case, model_max_length))
    return written + [path]


def keras_value(variable) -> np.ndarray:
    import keras

    return keras.ops.convert_to_numpy(variable)

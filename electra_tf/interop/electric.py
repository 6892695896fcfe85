"""The original's names of Electric's generator (run_pretraining.py with
electric_objective, which forces two_tower_generator): the names table of the
two towers and the cloze head, beside names.py's ELECTRA table.

    generator_ltr/embeddings_project/{kernel,bias}        tied embeddings, E != H_G
    generator_ltr/encoder/layer_N/...                     as names.py's S/encoder/...
    generator_rtl/...                                     the same
    generator_{ltr,rtl}/embeddings/...                    untied_generator_embeddings
    cloze_predictions/dense/{kernel,bias}                 [2 H_G, E], dense(E, GELU)
    cloze_predictions/LayerNorm/{gamma,beta}
    cloze_predictions/output_bias                         [V]

With tied embeddings both towers read `electra/embeddings/...` (the
discriminator's); untied, the cloze head's output table is generator_ltr's.
"""

from __future__ import annotations

from electra_tf.core.errors import ConversionError
from electra_tf.interop import names

TOWERS = ("generator_ltr", "generator_rtl")
CLOZE = "cloze_predictions"


def is_electric(weights) -> bool:
    """Whether a checkpoint's names are an Electric generator's."""
    return f"{CLOZE}/output_bias" in weights or any(n.startswith("generator_ltr/")
                                                     for n in weights)


def generator_values(weights, d_hidden: int, d_layers: int, num_layers, shape) -> dict:
    """PretrainingConfig values of an Electric checkpoint's generator (from its shapes).

    Args:
      num_layers, shape: tf1's readers of a scope's layer count and of a variable's
        shape (which refuses a missing or misshapen variable in one line).
    """
    query = "{}/encoder/layer_0/attention/self/query/kernel"
    sizes = {tower: (num_layers(weights, tower), shape(weights, query.format(tower), 2)[1])
             for tower in TOWERS}
    if len(set(sizes.values())) > 1:  # (it had been blamed on --model_size)
        raise ConversionError(
            "the generator's towers differ, which the original's two-tower generator never "
            "builds: " + ", ".join(f"{tower} has {n} layer(s) of width {w}"
                                   for tower, (n, w) in sizes.items())
            + "; a damaged or edited checkpoint")
    g_layers, g_hidden = sizes["generator_ltr"]
    return {"objective": "electric",
            "generator_hidden_size": g_hidden / d_hidden,
            "generator_layers": g_layers / d_layers,
            "untied_generator_embeddings": "generator_ltr/embeddings/word_embeddings" in weights}


def generator_variables(generator, discriminator) -> dict:
    """{original name: variable} of a TwoTowerClozeGenerator (modeling/electric.py);
    embeddings shared with `discriminator` are D's and left out."""
    out = {}
    for scope, tower in zip(TOWERS, (generator.ltr, generator.rtl), strict=True):
        shared = tower.embeddings is discriminator.encoder.embeddings
        out.update(names.encoder_variables(scope, tower, None if shared else scope))
    head = generator.cloze_head
    out.update({f"{CLOZE}/dense/kernel": head.dense.kernel, f"{CLOZE}/dense/bias": head.dense.bias,
                f"{CLOZE}/LayerNorm/gamma": head.layer_norm.gamma,
                f"{CLOZE}/LayerNorm/beta": head.layer_norm.beta,
                f"{CLOZE}/output_bias": head.output_bias})
    return out

"""The paper's training algorithms (section 3.2) as phases of one loop.

A `Phase` is a range of optimizer steps trained with one objective on some
variables. Joint training (the default) and adversarial training are one
phase over the whole run; two-stage training is two: the generator alone by
MLM, then the discriminator (initialized from the generator by the loop) with
the generator frozen.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from electra_tf.config import PretrainingConfig
from electra_tf.objectives.electra import ElectraObjective
from electra_tf.objectives.variants import BertMlmObjective


@dataclasses.dataclass(frozen=True)
class Phase:
    """Optimizer steps [start, end) trained with one objective on some variables."""

    name: str  # joint | adversarial | two_stage_generator | two_stage_discriminator
    start: int
    end: int
    objective: Any  # objectives.base.Objective
    variables: tuple  # the trained variables


def make_phases(config: PretrainingConfig, model) -> list[Phase]:
    """The training algorithm as phases (paper section 3.2).

    joint / adversarial: one phase; BERT-MLM trains G only. two_stage: G alone
    by MLM for the first half, then D by the discriminator loss, G frozen
    (with tied embeddings the shared tables belong to D in the second half).
    """
    total, generator_vars = config.num_train_steps, tuple(model.generator.trainable_variables)
    if config.training_algorithm != "two_stage":
        used = (model.trainable_variables if model.objective.uses_discriminator
                else generator_vars)
        return [Phase(config.training_algorithm, 0, total, model.objective, tuple(used))]
    half = total // 2
    discriminator_only = dataclasses.replace(ElectraObjective.from_config(config), gen_weight=0.0)
    return [Phase("two_stage_generator", 0, half, BertMlmObjective(gen_weight=1.0),
                  generator_vars),
            Phase("two_stage_discriminator", half, total, discriminator_only,
                  tuple(model.discriminator.trainable_variables))]

"""The paper's training algorithms (section 3.2) as phases of one loop.

A `Phase` is a range of optimizer steps trained with one objective on some
variables. Joint training (the default) and adversarial training are one
phase over the whole run; two-stage training is two (paper section 3.2): the
generator alone by MLM for n = num_train_steps // 2 steps, then the
discriminator, initialized from all of the generator's weights by the loop,
for the other n with the generator frozen.

Two-stage details: G has its own embedding tables (modeling.models), so that
nothing G uses trains in the second stage and its samples do not drift; and
the learning-rate schedule (warmup, then decay to 0) restarts at the second
stage (PretrainingConfig.stage_starts, which the optimizer's schedule takes
as `restarts`), as the paper's "train D for n steps" is a training run of its
own.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from electra_tf.core.config import PretrainingConfig
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
    by MLM until config.stage_starts[0], then D by the discriminator loss with
    G frozen (G and D share no variable in two-stage training).

    Raises:
      ValueError: two_stage with variables that G and D share.
    """
    total, generator_vars = config.num_train_steps, tuple(model.generator.trainable_variables)
    if config.training_algorithm != "two_stage":
        used = (model.trainable_variables if model.objective.uses_discriminator
                else generator_vars)
        return [Phase(config.training_algorithm, 0, total, model.objective, tuple(used))]
    (half,) = config.stage_starts
    discriminator_vars = tuple(model.discriminator.trainable_variables)
    shared = {id(v) for v in generator_vars} & {id(v) for v in discriminator_vars}
    if shared:
        raise ValueError(f"two-stage training needs a generator that shares no variable with "
                         f"the discriminator; {len(shared)} are shared")
    discriminator_only = dataclasses.replace(ElectraObjective.from_config(config), gen_weight=0.0)
    return [Phase("two_stage_generator", 0, half, BertMlmObjective(gen_weight=1.0),
                  generator_vars),
            Phase("two_stage_discriminator", half, total, discriminator_only,
                  discriminator_vars)]

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
    # Its input: phase 2 (PretrainingConfig.phase2_steps) reads other records, at another
    # length and batch; data_start is the step its records are read from (their batch 0).
    max_seq_length: int = 0
    train_batch_size: int = 0
    gradient_accumulation_steps: int = 1
    train_data: str = ""
    data_start: int = 0


def make_phases(config: PretrainingConfig, model, run=None) -> list[Phase]:
    """The training algorithm as phases (paper section 3.2), and the second phase.

    joint / adversarial: one phase; BERT-MLM trains G only. two_stage: G alone
    by MLM until config.stage_starts[0], then D by the discriminator loss with
    G frozen (G and D share no variable in two-stage training). With
    config.phase2_steps (NVIDIA's two phases: most steps at 128, then 512),
    the last phase2_steps steps form a phase of their own ("<name>_phase2")
    that reads run.phase2_train_data at phase2_max_seq_length, with its own
    batch and gradient accumulation; the optimizer's schedule restarts there
    (PretrainingConfig.stage_starts, stage_rates).

    Args:
      run: the PretrainingRun, whose data and accumulation the phases carry (None:
        the phases' input fields keep the config's, as for a model built alone).

    Raises:
      ValueError: two_stage with variables that G and D share.
    """
    total, generator_vars = config.num_train_steps, tuple(model.generator.trainable_variables)
    first = dict(max_seq_length=config.max_seq_length, train_batch_size=config.train_batch_size,
                 gradient_accumulation_steps=run.gradient_accumulation_steps if run else 1,
                 train_data=run.train_data if run else "")
    if config.training_algorithm != "two_stage":
        used = (model.trainable_variables if model.objective.uses_discriminator
                else generator_vars)
        if not config.phase2_steps:
            return [Phase(config.training_algorithm, 0, total, model.objective, tuple(used),
                          **first)]
        start = config.phase2_start
        second = dict(max_seq_length=config.phase2_max_seq_length,
                      train_batch_size=config.resolved_phase2_train_batch_size,
                      gradient_accumulation_steps=(
                          run.resolved_phase2_gradient_accumulation_steps if run else 1),
                      train_data=run.phase2_train_data if run else "", data_start=start)
        return [Phase(config.training_algorithm, 0, start, model.objective, tuple(used),
                      **first),
                Phase(config.training_algorithm + "_phase2", start, total, model.objective,
                      tuple(used), **second)]
    (half,) = config.stage_starts
    discriminator_vars = tuple(model.discriminator.trainable_variables)
    shared = {id(v) for v in generator_vars} & {id(v) for v in discriminator_vars}
    if shared:
        raise ValueError(f"two-stage training needs a generator that shares no variable with "
                         f"the discriminator; {len(shared)} are shared")
    discriminator_only = dataclasses.replace(ElectraObjective.from_config(config), gen_weight=0.0)
    return [Phase("two_stage_generator", 0, half, BertMlmObjective(gen_weight=1.0),
                  generator_vars, **first),
            Phase("two_stage_discriminator", half, total, discriminator_only,
                  discriminator_vars, **first)]

"""Fine-tuning tasks: GLUE, SQuAD 1.1/2.0, MRQA, token classification, and classification
of your own files (`classification`).

Each task class subclasses `base.Task`: it reads the official file format,
turns examples into fixed-length features, turns the model's outputs back
into predictions, scores them and writes them. The fine-tuning loop
(`electra_tf.training.finetuning`) and the CLI (`run_finetuning`) know nothing else about
a task. `squad_eval` scores SQuAD files with the official evaluators (the
library side of `python -m electra_tf.eval_squad`), `mrqa_eval` MRQA files
(`python -m electra_tf.eval_mrqa`).
"""

"""electra_tf: ELECTRA pre-training, fine-tuning and TF Serving export in TF2 / Keras 3."""

from setuptools import find_packages, setup

# What JAX pre-training needs where TensorFlow is not installed
# (--jax_input_pipeline=numpy; docs/backends.md): `pip install --no-deps electra_tf`,
# then these (with jax[cuda12] on NVIDIA GPUs). h5py comes with keras.
JAX_WITHOUT_TENSORFLOW = ["keras>=3.10,<4", "jax>=0.6,<0.11", "numpy>=1.26", "absl-py>=1.4",
                          "tensorboard"]

setup(
    name="electra_tf",
    version="0.1.0",
    description="ELECTRA (Clark et al. 2020) in TensorFlow 2 / Keras 3, with TF Serving export",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10,<3.14",
    # Only electra_tf: export/ holds the clone's `python -m export.*` shims of the
    # electra_tf commands, and no generic top-level name goes into site-packages.
    packages=find_packages(include=["electra_tf", "electra_tf.*"]),
    include_package_data=True,
    install_requires=[
        "tensorflow==2.20.*",
        "keras>=3.10,<4",
        "tensorflow-text==2.20.*",
        "tf-models-official==2.20.*",
        "tensorflow-serving-api==2.20.*",
        "absl-py>=1.4",
        "numpy>=1.26",
        # Imported by electra_tf itself (tf-models-official pulls it in today,
        # but the code must not rest on that): span F1 for tagging.
        "seqeval>=1.2,<2",
    ],
    entry_points={"console_scripts": [
        "electra-pretrain=electra_tf.run_pretraining:run",
        "electra-finetune=electra_tf.run_finetuning:run",
        "electra-build-vocab=electra_tf.build_vocab:run",
        "electra-build-pretraining-data=electra_tf.build_pretraining_data:run",
        "electra-pack-pretraining-data=electra_tf.pack_pretraining_data:run",
        "electra-convert=electra_tf.convert:run",
        "electra-eval-glue=electra_tf.eval_glue:run",
        "electra-eval-squad=electra_tf.eval_squad:run",
        "electra-eval-mrqa=electra_tf.eval_mrqa:run",
        "electra-export=electra_tf.export_saved_model:run",
        "electra-query=electra_tf.query:run",
        "electra-results-table=electra_tf.results_table:run",
        "electra-score=electra_tf.score:run",
    ]},
    extras_require={
        # jax[cpu]: the JAX backend's tests (KERAS_BACKEND=jax) run on CPU.
        # pytest-xdist: the README's test command runs the suite on 2 workers.
        "test": ["pytest>=8", "pytest-xdist>=3.5,<4", "jax[cpu]>=0.6,<0.11"],
        # Checkpoint interop: the parity tests against PyTorch ELECTRA, and
        # `convert --from=hf` (safetensors alone is enough to import).
        "interop": ["torch==2.13.0", "transformers==5.23.*", "safetensors>=0.4"],
        # The JAX backend beside TensorFlow; without TensorFlow, see above.
        "jax": JAX_WITHOUT_TENSORFLOW,
        # studies/ (run from the repository root, not installed): the efficiency study's plot,
        # and real_data's probe_features (scikit-learn also comes with seqeval, a core
        # dependency, so the probe's tests run under `.[test]`).
        "studies": ["matplotlib>=3.7", "scikit-learn>=1.3"],
    },
)

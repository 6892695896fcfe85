"""The import graph keeps its shape: entry points on top, model code backend-portable,
the TensorFlow/JAX difference in two backend files.

Read statically (ast), so a lazy import inside a function counts too. Imports
under `if __name__ == "__main__":` belong to a module's own command line and
are allowed.
"""

from __future__ import annotations

import ast
import os
import re

from conftest import REPO

ENTRY_POINT = re.compile(r"^electra_tf\.(cli|convert|run_\w+|build_\w+|eval_\w+|pack_\w+)$")
# Model code runs under any Keras backend: keras / keras.ops / keras.random only.
BACKEND_PORTABLE = ("electra_tf/modeling/", "electra_tf/objectives/")
# Training code shared by both backends: TensorFlow only where named (the
# fine-tuning loop's in-memory tf.data input, tf.train checkpoints and
# tf.summary, each in a function the JAX loop without TensorFlow never calls).
TRAINING_SHARED = "electra_tf/training/"
TENSORFLOW_USERS_IN_TRAINING = ("electra_tf/training/backends/tensorflow.py",
                                "electra_tf/training/finetuning.py",
                                "electra_tf/training/checkpoints.py",
                                "electra_tf/training/summaries.py")
JAX_BACKEND = "electra_tf/training/backends/jax.py"


def python_files():
    for top in ("electra_tf", "export"):
        for folder, _, names in os.walk(os.path.join(REPO, top)):
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    yield os.path.relpath(path, REPO).replace(os.sep, "/"), path


def module_name(rel: str) -> str:
    return rel[:-3].replace("/", ".").removesuffix(".__init__")


def is_main_guard(node) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__")


def imports(path: str) -> list[str]:
    """Modules imported anywhere in the file, outside its __main__ guard."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    found = []

    def visit(node):
        if is_main_guard(node):
            return
        if isinstance(node, ast.Import):
            found.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
            found.extend(f"{node.module}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_no_library_module_imports_an_entry_point():
    edges = []
    for rel, path in python_files():
        if ENTRY_POINT.match(module_name(rel)):
            continue
        edges += [f"{rel} -> {m}" for m in imports(path) if ENTRY_POINT.match(m)]
    assert not edges, "library modules import entry points:\n" + "\n".join(edges)


def test_model_code_does_not_import_tensorflow():
    offenders = []
    for rel, path in python_files():
        if rel.startswith(BACKEND_PORTABLE):
            offenders += [f"{rel} -> {m}" for m in imports(path)
                          if m.split(".")[0] in ("tensorflow", "tensorflow_text")]
    assert not offenders, "\n".join(offenders)


def test_only_the_jax_backend_imports_jax():
    offenders = []
    for rel, path in python_files():
        if rel != JAX_BACKEND:
            offenders += [f"{rel} -> {m}" for m in imports(path) if m.split(".")[0] == "jax"]
    assert not offenders, "\n".join(offenders)


def test_shared_training_code_leaves_tensorflow_to_its_backend():
    offenders = []
    for rel, path in python_files():
        if rel.startswith(TRAINING_SHARED) and rel not in TENSORFLOW_USERS_IN_TRAINING:
            offenders += [f"{rel} -> {m}" for m in imports(path)
                          if m.split(".")[0] in ("tensorflow", "tensorflow_text")]
    assert not offenders, "\n".join(offenders)


def test_backends_are_reached_only_through_the_training_package():
    # The library below training/ (data, modeling, objectives, text, ...) knows
    # no backend; the entry points pick one through training.backends.
    offenders = []
    for rel, path in python_files():
        if rel.startswith(TRAINING_SHARED) or ENTRY_POINT.match(module_name(rel)):
            continue
        offenders += [f"{rel} -> {m}" for m in imports(path)
                      if m.startswith("electra_tf.training.backends")]
    assert not offenders, "\n".join(offenders)


def test_the_checker_sees_lazy_imports(tmp_path):
    # A guard against a checker that cannot fail: a function-level import of
    # an entry point is found, one under the __main__ guard is not.
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from electra_tf import cli\n"
                      "if __name__ == '__main__':\n    import electra_tf.run_pretraining\n")
    found = imports(str(source))
    assert "electra_tf.cli" in found and "electra_tf.run_pretraining" not in found

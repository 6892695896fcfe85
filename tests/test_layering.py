"""The import graph keeps its shape: entry points on top, model code backend-portable.

Read statically (ast), so a lazy import inside a function counts too. Imports
under `if __name__ == "__main__":` belong to a module's own command line and
are allowed.
"""

from __future__ import annotations

import ast
import os
import re

from conftest import REPO

ENTRY_POINT = re.compile(r"^electra_tf\.(cli|convert|run_\w+|build_\w+|eval_\w+)$")
# Model code runs under any Keras backend: keras / keras.ops / keras.random only.
BACKEND_PORTABLE = ("electra_tf/modeling/", "electra_tf/objectives/", "electra_tf/pretrainer.py")


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


def test_the_checker_sees_lazy_imports(tmp_path):
    # A guard against a checker that cannot fail: a function-level import of
    # an entry point is found, one under the __main__ guard is not.
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from electra_tf import cli\n"
                      "if __name__ == '__main__':\n    import electra_tf.run_pretraining\n")
    found = imports(str(source))
    assert "electra_tf.cli" in found and "electra_tf.run_pretraining" not in found

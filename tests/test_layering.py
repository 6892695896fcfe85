"""The import graph keeps its shape: the package's folders are its floors, the
commands stand on top, model code is backend-portable, and the TensorFlow/JAX
difference lives in two backend files.

Read statically (ast), so a lazy import inside a function counts too. Imports
under `if __name__ == "__main__":` belong to a module's own command line and
are allowed.
"""

from __future__ import annotations

import ast
import os
import re

from conftest import REPO

# The floors, from the ground up: a module imports only from its own floor and
# those below it. The package root (the commands and their plumbing, cli and
# flags) stands above them all.
FLOORS = ("core", "text", "data", "modeling", "objectives", "tasks", "folders", "training",
          "serving", "interop")
COMMANDS_FLOOR = len(FLOORS)
# Modules of the package root that are no command: what the commands share.
COMMAND_PLUMBING = ("cli", "flags")
ENTRY_POINT = re.compile(r"^electra_tf\.(?!(?:%s)$)\w+$" % "|".join(FLOORS))
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
# The floor that owns every folder format (electra_tf/folders): the files a folder
# holds, which no module outside it joins to a folder's path.
FOLDERS = "electra_tf/folders/"
FOLDER_FILES = ("pretraining_config.json", "discriminator.weights.h5",
                "discriminator_config.json", "generator.weights.h5", "generator_config.json",
                "final_eval.json", "finetuning_config.json", "finetuned.weights.h5",
                "results.json", "conversion_report.json", "vocab.txt", "checkpoints")
# The demo's data folder holds a vocab.txt of its own, and is no model folder.
# A TF Serving export's assets/ (SavedModel's layout, not a folder of electra_tf's)
# holds one too: a name joined after this literal is the export's.
EXPORT_ASSETS = "assets"
DATA_FOLDERS = ("electra_tf/data/demo_corpus.py",)
# Serving and conversion read and write folders through that floor, never the loops.
NOT_FROM_TRAINING = ("electra_tf/serving/", "electra_tf/interop/")
# Built on the library from outside it, never imported by it (studies/README.md).
LAB = ("studies", "benchmarks")


def python_files():
    for top in ("electra_tf", "export"):
        for folder, _, names in os.walk(os.path.join(REPO, top)):
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    yield os.path.relpath(path, REPO).replace(os.sep, "/"), path


def floor(module: str) -> int | None:
    """The floor of an electra_tf module (None for another package's)."""
    parts = module.split(".")
    if parts[0] != "electra_tf":
        return None
    if len(parts) > 1 and parts[1] in FLOORS:
        return FLOORS.index(parts[1])
    return COMMANDS_FLOOR


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
            if node.module == "electra_tf":  # `from electra_tf import cli`: the module named
                found.extend(f"electra_tf.{a.name}" for a in node.names)
            else:
                found.append(node.module)
                found.extend(f"{node.module}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_each_module_imports_only_its_floor_and_those_below():
    upward = []
    for rel, path in python_files():
        if not rel.startswith("electra_tf/"):
            continue
        mine = floor(module_name(rel))
        upward += [f"{rel} (floor {mine}) -> {m} (floor {floor(m)})" for m in imports(path)
                   if floor(m) is not None and floor(m) > mine]
    assert not upward, "imports that run up a floor:\n" + "\n".join(sorted(set(upward)))


def test_no_two_modules_import_each_other():
    # A package's face (__init__.py, which hands its modules' names on) is
    # left out: `from electra_tf.objectives import losses` names the module.
    graph = {}
    for rel, path in python_files():
        if rel.startswith("electra_tf/") and not rel.endswith("__init__.py"):
            graph[module_name(rel)] = {m for m in imports(path) if m.startswith("electra_tf.")}
    modules = set(graph)
    graph = {k: {m for m in v if m in modules and m != k} for k, v in graph.items()}
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_package_root_holds_the_commands_and_nothing_below_them():
    # Every other module lives in its floor's folder; a root module is a
    # command (a `run` for its console script) or what the commands share.
    not_commands = []
    for name in sorted(os.listdir(os.path.join(REPO, "electra_tf"))):
        stem = name[:-3]
        if not name.endswith(".py") or stem in ("__init__",) + COMMAND_PLUMBING:
            continue
        tree = ast.parse(open(os.path.join(REPO, "electra_tf", name), encoding="utf-8").read())
        if not any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in tree.body):
            not_commands.append(name)
    assert not not_commands, f"modules at the package root that are no command: {not_commands}"
    folders = {n for n in os.listdir(os.path.join(REPO, "electra_tf"))
               if os.path.isfile(os.path.join(REPO, "electra_tf", n, "__init__.py"))}
    assert folders == set(FLOORS), f"the package's folders {sorted(folders)} are not its floors"


def test_console_scripts_name_commands_and_only_electra_tf_is_installed():
    setup = open(os.path.join(REPO, "setup.py"), encoding="utf-8").read()
    tree = ast.parse(setup)
    scripts, packages = [], None
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "entry_points":
            scripts = [e.value for e in node.value.values[0].elts]
        if isinstance(node, ast.keyword) and node.arg == "packages":
            packages = [e.value for e in node.value.keywords[0].value.elts]
    assert packages == ["electra_tf", "electra_tf.*"], packages
    assert len(scripts) >= 10, scripts
    for script in scripts:
        name, target = (x.strip() for x in script.split("="))
        module, function = target.split(":")
        assert ENTRY_POINT.match(module) and function == "run", script
        path = os.path.join(REPO, *module.split(".")) + ".py"
        tree = ast.parse(open(path, encoding="utf-8").read())
        assert any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in tree.body), script
    # export/ holds the clone's shims of two of those commands, nothing else.
    for name in sorted(os.listdir(os.path.join(REPO, "export"))):
        if name.endswith(".py") and name != "__init__.py":
            found = imports(os.path.join(REPO, "export", name))
            assert found and all(ENTRY_POINT.match(m.rsplit(".", 1)[0]) or ENTRY_POINT.match(m)
                                 for m in found), (name, found)


def test_no_library_module_imports_an_entry_point():
    edges = []
    for rel, path in python_files():
        if ENTRY_POINT.match(module_name(rel)) or not rel.startswith("electra_tf/"):
            continue
        edges += [f"{rel} -> {m}" for m in imports(path) if ENTRY_POINT.match(m)]
    assert not edges, "library modules import entry points:\n" + "\n".join(edges)


def lab_imports(path: str) -> list[str]:
    """The lab modules (LAB) a file imports anywhere, its __main__ guard and
    importlib.import_module / __import__ calls included."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append(node.module)
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", None))
              in ("import_module", "__import__")):
            found.append(node.args[0].value)
    return [m for m in found if m.split(".")[0] in LAB]


def test_nothing_installed_or_shimmed_imports_the_studies_or_benchmarks():
    offenders = [f"{rel} -> {m}" for rel, path in python_files() for m in lab_imports(path)]
    assert not offenders, "the library imports the lab:\n" + "\n".join(offenders)


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
    # The lab check sees every way in, the __main__ guard included.
    source.write_text("import importlib\ndef f():\n    from studies.real_data import study\n"
                      "importlib.import_module('benchmarks.bench_common')\n"
                      "if __name__ == '__main__':\n    import studies.gpu_small\n"
                      "from . import studies_like\nimport studies_elsewhere\n")
    assert sorted(lab_imports(str(source))) == ["benchmarks.bench_common", "studies.gpu_small",
                                                "studies.real_data"]


# A module outside tasks/ that may spell a head's name: the pre-training discriminator's
# head kinds (modeling/models.py: "rtd", "mlm", ...) are the objectives' vocabulary, from
# which the served rtd head takes its name. Words that are a head's name and also mean
# something else: "score", an output (a regression's in serving/graph.py, the score
# command's JSON key). ("squad", the original's task of that name, is mapped to squad_v2
# in tasks/registry.py, inside tasks/.)
HEAD_NAME_DEFINED_BELOW = {"electra_tf/modeling/models.py": {"rtd"},
                           "electra_tf/serving/graph.py": {"score"},
                           "electra_tf/score.py": {"score"}}


def docstrings(tree) -> set[int]:
    """The ids of the docstring nodes (prose, not code) of a module's tree."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def head_names_spelled(path: str, names) -> list[tuple[int, str]]:
    """(line, name) of each string literal of `path` equal to a head's name, docstrings aside."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    prose = docstrings(tree)
    return sorted((node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value in names and id(node) not in prose)


def test_no_code_outside_tasks_names_a_head_kind():
    """Which head a model has is its head class's business (electra_tf/tasks/heads/, one
    file per kind): serving, interop, training and the commands ask the class, never
    compare with a head's name, so that a new head is one file and a registry line."""
    from electra_tf.tasks import heads

    names = set(heads.SERVED)
    spelled = []
    for rel, path in python_files():
        if rel.startswith("electra_tf/tasks/"):
            continue
        allowed = HEAD_NAME_DEFINED_BELOW.get(rel, set())
        spelled += [f"{rel}:{line}: {name!r}" for line, name in head_names_spelled(path, names)
                    if name not in allowed]
    assert not spelled, "head names outside tasks/:\n" + "\n".join(spelled)


def test_the_head_name_check_finds_a_comparison(tmp_path):
    """The check above sees `task == "squad"` (and a dict key), not a docstring naming it."""
    source = tmp_path / "m.py"
    source.write_text('"""Serves squad and "squad"."""\n'
                      'def f(task):\n    """squad"""\n    return task == "squad"\n'
                      'TABLE = {"token_classification": 1}\n')
    assert head_names_spelled(str(source), {"squad", "token_classification"}) == [
        (4, "squad"), (5, "token_classification")]


def folder_paths(path: str) -> list[str]:
    """The os.path.join calls of a file that join a folder file's name: a literal of
    FOLDER_FILES, or a name imported from electra_tf.folders (not after EXPORT_ASSETS)."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    imported = {a.asname or a.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "electra_tf.folders") for a in node.names}
    modules = {a.asname or a.name.rsplit(".", 1)[-1] for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and node.module == "electra_tf.folders"
               for a in node.names}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func) == "os.path.join"):
            continue
        for arg in node.args[1:]:
            if isinstance(arg, ast.Constant) and arg.value == EXPORT_ASSETS:
                break
            if (isinstance(arg, ast.Constant) and arg.value in FOLDER_FILES
                    or isinstance(arg, ast.Name) and arg.id in imported
                    or isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name)
                    and arg.value.id in modules):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_only_the_folders_floor_builds_paths_inside_a_folder():
    offenders = []
    for rel, path in python_files():
        if rel.startswith("electra_tf/") and not rel.startswith(FOLDERS) \
                and rel not in DATA_FOLDERS:
            offenders += [f"{rel} {call}" for call in folder_paths(path)]
    assert not offenders, "paths into a folder built outside electra_tf/folders:\n" + \
        "\n".join(offenders)


def test_serving_and_interop_import_nothing_from_training():
    offenders = []
    for rel, path in python_files():
        if rel.startswith(NOT_FROM_TRAINING):
            offenders += [f"{rel} -> {m}" for m in imports(path)
                          if m.startswith("electra_tf.training")]
    assert not offenders, "\n".join(offenders)


def test_the_folder_path_checker_sees_names_and_literals(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import os\nfrom electra_tf.folders.files import VOCAB\n"
                      "from electra_tf.folders import files\n"
                      "a = os.path.join(d, VOCAB)\nb = os.path.join(d, 'results.json')\n"
                      "c = os.path.join(d, files.FINAL_EVAL)\nd = os.path.join(d, 'train')\n"
                      "e = os.path.join(d, 'assets', 'vocab.txt')\n"
                      "f = os.path.join(d, 'checkpoints', 'assets')\n")
    assert [line.split(":")[0] for line in folder_paths(str(source))] == [
        "line 4", "line 5", "line 6", "line 9"]

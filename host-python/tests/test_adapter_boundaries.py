"""What the seam promises beyond one capture: adapter modules never import the registry (a
declaration only the declaration vocabulary), the kit imports no backend, registry or
framework, a file that names no backend or an unknown one is refused, a payload dtype nobody
can decode is refused rather than read as raw bytes, and no import hides inside a function except
to defer a framework or an optional dependency."""

from __future__ import annotations

import ast
import copy
import dataclasses
import os
import re

import numpy
import pytest

import torchlens as tl
from torchlens.adapter_kit import array_codec
from torchlens.errors import BackendUnsupportedError, TlspecFormatError

BACKENDS = os.path.join(os.path.dirname(tl.__file__), "backends")


def _imports(path):
    tree = ast.parse(open(path, encoding="utf-8").read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield ("." * node.level) + (node.module or "")


def test_no_adapter_module_imports_the_registry():
    checked = 0
    for name in sorted(os.listdir(BACKENDS)):
        folder = os.path.join(BACKENDS, name)
        if not os.path.isdir(folder) or name.startswith("__"):
            continue
        for file in sorted(os.listdir(folder)):
            if not file.endswith(".py") or file == "declaration.py":
                continue
            for module in _imports(os.path.join(folder, file)):
                assert not module.startswith(("torchlens.backends", "..")), (
                    f"backends/{name}/{file} imports {module}: adapters reach the package only "
                    "through torchlens.adapter_kit, torchlens.edits, torchlens.trace and torchlens.errors"
                )
            checked += 1
    assert checked >= 10


def test_declarations_import_only_the_declaration_vocabulary():
    # A declaration is read by the registry: importing the registry back would be a cycle.
    checked = 0
    for name in sorted(os.listdir(BACKENDS)):
        path = os.path.join(BACKENDS, name, "declaration.py")
        if not os.path.isfile(path):
            continue
        for module in _imports(path):
            if module.startswith(("torchlens.backends", "..")):
                assert module in ("..spec", "torchlens.backends.spec"), (
                    f"backends/{name}/declaration.py imports {module}"
                )
        checked += 1
    assert checked == 6


def test_each_backend_raises_only_its_own_and_the_shared_refusal_codes():
    # A backend's refusal_codes are read from the core's owners (its own and the preview codes):
    # a backend whose source names a code the core assigns to another framework would raise a
    # code it does not declare.
    owners = {code: owner for code, (owner, _meaning) in tl.backends.refusal_codes().items()}
    checked = 0
    for name in tl.backends.names():
        folder = os.path.join(BACKENDS, name)
        if not os.path.isdir(folder):
            continue
        for file in sorted(os.listdir(folder)):
            if not file.endswith(".py"):
                continue
            tree = ast.parse(open(os.path.join(folder, file), encoding="utf-8").read())
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Constant)
                    and node.value in owners
                    and owners[node.value] != "registry"
                ):
                    assert owners[node.value] in (name, "preview"), (
                        f"backends/{name}/{file} names {node.value!r}, owned by {owners[node.value]}"
                    )
                    checked += 1
    assert checked >= 30


def test_the_kit_imports_no_backend_no_registry_and_no_framework():
    frameworks = ("torch", "jax", "tensorflow", "keras", "mlx", "paddle", "tinygrad", "flax", "equinox")
    kit = os.path.join(os.path.dirname(tl.__file__), "adapter_kit")
    for file in sorted(os.listdir(kit)):
        if not file.endswith(".py"):
            continue
        for module in _imports(os.path.join(kit, file)):
            assert not module.startswith(("torchlens.backends", "..backends")), (
                f"adapter_kit/{file} imports {module}"
            )
            assert module.split(".")[0] not in frameworks, f"adapter_kit/{file} imports {module}"


def _docstrings(tree):
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def test_the_kit_never_branches_on_a_backend_name():
    """A framework's needs are hooks: no string in the kit's code (docstrings and comments, which
    name frameworks as examples, aside) is a registered backend's name or a framework module."""
    names = set(tl.backends.names()) | {"tensorflow", "keras", "flax", "equinox"}
    kit = os.path.join(os.path.dirname(tl.__file__), "adapter_kit")
    for file in sorted(os.listdir(kit)):
        if not file.endswith(".py"):
            continue
        with open(os.path.join(kit, file), encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        skipped = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
                words = {word.split(".")[0] for word in node.value.replace(":", " ").split()}
                assert not words & names, f"adapter_kit/{file}:{node.lineno} names {words & names}"


def test_the_kit_names_no_framework_even_in_its_prose():
    """The kit is written for any framework: its comments and docstrings describe needs
    ("a meta device", "a module class that is a dict"), never a backend by name."""
    # NumPy is the kit's neutral host array (and the test plugin's framework), not a backend's.
    names = (set(tl.backends.names()) | FRAMEWORK_WORDS) - {"numpy"}
    pattern = re.compile(r"\b(" + "|".join(sorted(names)) + r")\b", re.IGNORECASE)
    kit = os.path.join(os.path.dirname(tl.__file__), "adapter_kit")
    found = []
    for file in sorted(os.listdir(kit)):
        if file.endswith(".py"):
            with open(os.path.join(kit, file), encoding="utf-8") as handle:
                for number, line in enumerate(handle, 1):
                    if pattern.search(line):
                        found.append(f"adapter_kit/{file}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


#: Framework and module-library names beside the registered backends' names.
FRAMEWORK_WORDS = {"tensorflow", "keras", "flax", "equinox", "pytorch", "jnp", "mx", "numpy_adapter"}


#: What a function-local import may name, each with why it waits for first use. Importing
#: torchlens imports no framework (each backend imports its own when first used; NumPy included,
#: though it is a dependency: test_package.py) and no optional dependency.
LAZY_IMPORTS = {
    **dict.fromkeys(
        ("torch", "jax", "jaxlib", "flax", "equinox", "tensorflow", "keras", "paddle", "mlx", "tinygrad"),
        "a framework",
    ),
    "numpy": "a dependency, but importing torchlens imports no numpy (test_package.py)",
    "ray": "an optional dependency (torchlens[ray])",
    "wasmtime": "an optional dependency (the pure wheel's host)",
    "torchlens._native": "the native extension: absent from the pure wheel; loading it chooses the host",
    "torchlens._hosts.wasmtime_py.bindings": "imports wasmtime",
    "torchlens._hosts.wasmtime_py.runtime": "imports wasmtime",
}


def _is_type_checking(node):
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _function_local_imports(tree):
    """Every import inside a function body, outside ``if TYPE_CHECKING:``."""

    def walk(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for branch in child.orelse:
                    yield from walk(branch, in_function)
                continue
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            yield from walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    yield from walk(tree, False)


def _imported_modules(node, module_name, is_package):
    """The absolute names an import statement names: each ``import`` target; for ``from M import
    a, b`` M itself and M.a, M.b (either may be a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module_name.split(".") if is_package else module_name.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([node.module] if node.module else []))
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def _lazy_allowed(names):
    def allowed(name):
        return any(name == root or name.startswith(root + ".") for root in LAZY_IMPORTS)

    # ``from M import a``: allowed when M is, or when every M.a is (``from .. import _native``).
    return allowed(names[0]) or (len(names) > 1 and all(allowed(name) for name in names[1:]))


def _commented_lazy(lines, node):
    """Whether the import carries a ``# lazy:`` comment: on its line, or in the comment and
    import lines right above it."""
    if "# lazy:" in lines[node.lineno - 1]:
        return True
    index = node.lineno - 2
    while index >= 0 and lines[index].strip().startswith(("#", "import ", "from ")):
        if "# lazy:" in lines[index]:
            return True
        index -= 1
    return False


def test_function_local_imports_only_defer_a_framework_or_an_optional_dependency():
    """Imports tell the layers: every module of the installed package imports at module level,
    except a framework or an optional dependency (or a module of ours that imports one), which
    waits for first use and says so in a ``# lazy:`` comment; names used only in annotations are
    imported under ``TYPE_CHECKING``. No import hides in a function to dodge a cycle. The kit and
    the installed backends (``torchlens/backends/<name>/``) are checked too."""
    root = os.path.dirname(tl.__file__)
    checked = 0
    offenders = []
    for folder, subfolders, files in os.walk(root):
        relative = os.path.relpath(folder, root).split(os.sep)
        subfolders.sort()
        for file in sorted(files):
            if not file.endswith(".py"):
                continue
            path = os.path.join(folder, file)
            parts = ["torchlens"] + [part for part in relative if part != "."]
            is_package = file == "__init__.py"
            module_name = ".".join(parts if is_package else parts + [file[:-3]])
            source = open(path, encoding="utf-8").read()
            lines = source.splitlines()
            for node in _function_local_imports(ast.parse(source)):
                names = _imported_modules(node, module_name, is_package)
                where = f"{os.path.relpath(path, root)}:{node.lineno} ({names[0]})"
                if not _lazy_allowed(names):
                    offenders.append(f"{where}: import it at module level")
                elif not _commented_lazy(lines, node):
                    offenders.append(f"{where}: say why it is lazy in a '# lazy:' comment")
            checked += 1
    assert checked >= 40
    assert not offenders, "function-local imports:\n" + "\n".join(offenders)


def _saved_under(tmp_path, backend_name):
    from numpy_adapter.example import example

    model, args = example()
    trace = tl.trace(model, args)
    renamed = copy.copy(trace._backend)
    renamed.spec = dataclasses.replace(renamed.spec, name=backend_name)
    trace._backend = renamed
    path = str(tmp_path / f"{backend_name or 'nameless'}.tlspec")
    trace.save(path)
    return path


def test_a_file_that_names_no_backend_is_refused(tmp_path):
    with pytest.raises(TlspecFormatError) as caught:
        tl.load(_saved_under(tmp_path, ""))
    assert caught.value.code == "tlspec_backend_missing"


def test_a_file_from_a_backend_not_registered_here_is_refused(tmp_path):
    with pytest.raises(BackendUnsupportedError) as caught:
        tl.load(_saved_under(tmp_path, "caffe"))
    assert caught.value.code == "backend_unknown"


def test_a_payload_dtype_nobody_can_decode_is_refused_not_read_as_bytes():
    with pytest.raises(TlspecFormatError) as caught:
        array_codec.array_from_buffer(bytearray(8), 0, 8, "int4", [16])
    assert caught.value.code == "payload_dtype_unknown"
    bits = array_codec.array_from_buffer(bytearray(4), 0, 4, "bfloat16", [2])
    assert bits.dtype == numpy.uint16 and array_codec.is_bit_carrier("bfloat16")
    with pytest.raises(TlspecFormatError) as caught:
        array_codec.array_from_buffer(bytearray(6), 0, 6, "float32", [2])
    assert caught.value.code == "payload_length_mismatch"


def test_a_broken_third_party_declaration_is_skipped_with_a_warning_not_fatal(tmp_path):
    import subprocess
    import sys
    import textwrap

    info = tmp_path / "broken_adapters-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-adapters\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[torchlens.backends]\n"
        "missing = no_such_module_anywhere:SPEC\n"
        "not_a_spec = json:dumps\n"
        "taken_name = torchlens.backends.torch.declaration:SPEC\n"
        "overclaiming = overclaiming_adapter:SPEC\n"
    )
    (tmp_path / "overclaiming_adapter.py").write_text(
        textwrap.dedent(
            """
            from torchlens.backends import BackendSpec, FrameworkRequirement
            SPEC = BackendSpec(
                name="overclaiming", aliases=(), maturity="preview",
                requirement=FrameworkRequirement("numpy", "1.0", "3.0", "2.4.6", "numpy"),
                capabilities={"intervene": True},
            )
            """
        )
    )
    script = textwrap.dedent(
        f"""
        import sys, warnings
        sys.path.insert(0, {str(tmp_path)!r})
        import torchlens as tl
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            names = tl.backends.names()
        print(sorted(names))
        for warning in caught:
            print(type(warning.message).__name__, str(warning.message).split(":")[0])
        """
    )
    output = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout
    lines = output.strip().splitlines()
    # The built-in backends and the installed NumPy test plugin; none of the four broken ones.
    assert lines[0] == str(["jax", "mlx", "numpy", "paddle", "tf", "tinygrad", "torch"])
    skipped = sorted(line for line in lines[1:] if line.startswith("BackendDeclarationWarning"))
    assert len(skipped) == 4, output
    for name in ("missing", "not_a_spec", "taken_name", "overclaiming"):
        assert any(f"entry point {name!r}" in line for line in skipped), (name, output)

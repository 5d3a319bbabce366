"""The house rules that ruff cannot check: no module of the package imports another module's private names.

ruff's PLC2701 skips first-party imports, so the rule is checked here: ``from a.b import _x`` is allowed only where
``a.b`` is the importing module's own package or one above it (a package using its own private modules). Importing
a public name from a private module (``from rlviz_widgets._sql import ident``) is the lonboard style and allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rlviz_widgets"


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _own_package(path: Path, root: Path) -> str:
    name = _module_name(path, root)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _imported_from(node: ast.ImportFrom, path: Path, root: Path) -> str:
    if not node.level:
        return node.module or ""
    base = _own_package(path, root).split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private_imports(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """The imports of ``path`` (a module below ``root``) that take a private name from a module that is neither
    its own package nor one above it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = _own_package(path, root)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _imported_from(node, path, root)
            for alias in node.names:
                if _private(alias.name) and not (own == source or own.startswith(source + ".")):
                    found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}: {alias.name} from {source}")
    return found


def test_no_module_imports_another_modules_private_names():
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in private_imports(path)]
    assert found == []


def test_the_check_finds_what_it_should(tmp_path):
    probe = tmp_path / "rlviz_widgets" / "widgets" / "_probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("from rlviz_widgets.run.run import _hidden\nfrom rlviz_widgets._sql import ident\n"
                     "from . import _base\nfrom rlviz_widgets.widgets import _validate\nfrom .. import _sql\n"
                     "from rlviz_widgets.run import _db\n",
                     encoding="utf-8")
    assert private_imports(probe, tmp_path) == [
        "rlviz_widgets/widgets/_probe.py:1: _hidden from rlviz_widgets.run.run",
        "rlviz_widgets/widgets/_probe.py:6: _db from rlviz_widgets.run",
    ]

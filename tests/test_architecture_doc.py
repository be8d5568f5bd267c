"""``docs/architecture.md`` stays true to the code: its tables name every module and only modules
that exist, and every function, class, method and variable it names is there.

Read from the source with :mod:`ast` (nothing of the package is imported, torch never is), so the
test costs a fraction of a second. Paths on the page are relative to ``isaaclab_mgpu/`` (or to the
repository for ``tests/…``, ``docs/…``); a module is "in its table" when a table row's first cell is
its path. A name followed by ``()`` (``resolve()``, ``Supervisor.wait()``, ``report.dry_run()``) must
be defined: a top-level function or class of some module, or a member of the named class, or of the
module the qualifier names. Back-quoted class names, ``Class.member`` and upper-case constants are
checked the same way; ``MGPU_*`` variables against ``contract/env.py``, each of whose variables the
page must name.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "isaaclab_mgpu"
PAGE = ROOT / "docs" / "architecture.md"
#: Classes of the libraries mgpu patches, named on the page as what a patch changes.
UPSTREAM = {"OnPolicyRunner", "A2CBase"}

_CODE = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_PY_PATH = re.compile(r"(?<![\w/.-])((?:\w+/)*\w+\.py)\b")
_PKG_DIRS = sorted(p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists())
_DIR_PATH = re.compile(rf"(?<![\w/.-])((?:{'|'.join(_PKG_DIRS)})/(?:\w+/)*)(?![\w.])")
_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\(\)")
_MEMBER = re.compile(r"^([A-Z]\w*)\.([a-z_]\w*)$")
_CLASS = re.compile(r"^[A-Z][a-z]\w*$")
_CONSTANT = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$|^[A-Z]{4,}$")
_MGPU_VAR = re.compile(r"\bMGPU_[A-Z0-9_]*[A-Z0-9]")


def _text() -> str:
    return PAGE.read_text()


def _code_spans(text: str) -> list[str]:
    return _CODE.findall(_FENCE.sub("", text))


def _rows(text: str) -> list[list[str]]:
    """The cells of every table row (header and separator rows included)."""
    return [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.lstrip().startswith("|")
    ]


def _modules() -> set[str]:
    return {str(p.relative_to(PKG)) for p in PKG.rglob("*.py")}


@cache
def _index() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Module (dotted, without the package) → its top-level names; class name → its members."""
    modules: dict[str, set[str]] = {}
    classes: dict[str, set[str]] = {}
    for path in PKG.rglob("*.py"):
        parts = list(path.relative_to(PKG).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        tree = ast.parse(path.read_text(), filename=str(path))
        names = modules.setdefault(".".join(parts), set())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            if isinstance(node, ast.ClassDef):
                members = classes.setdefault(node.name, set())
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        members.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        members.add(item.target.id)
    return modules, classes


def _defined(dotted: str) -> bool:
    """True when ``dotted`` (``f``, ``Class.m``, ``module.f``, ``pkg.module.f``) names something defined."""
    modules, classes = _index()
    *qualifier, name = dotted.split(".")
    if not qualifier:
        return any(name in names for names in modules.values())
    owner = qualifier[-1]
    if owner in classes and name in classes[owner]:
        return True
    wanted = ".".join(qualifier)
    return any(
        name in names
        for module, names in modules.items()
        if module == wanted or module.endswith("." + wanted)
    )


def test_every_module_is_in_a_table_and_every_row_is_a_module():
    named = {m.group(1) for row in _rows(_text()) if row and (m := re.fullmatch(r"`([\w/]+\.py)`", row[0]))}
    assert sorted(_modules() - named) == [], "modules the page's tables leave out: give each a row"
    assert sorted(named - _modules()) == [], "rows for modules that do not exist"


def test_the_folder_table_names_every_top_level_folder_and_module():
    text = _text()
    header = text.index("| folder | runs in |")
    table = text[header : text.index("\n\n", header)]
    first = " ".join(row[0] for row in _rows(table))
    top = {f"{p.name}/" for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    top |= {p.name for p in PKG.glob("*.py") if p.name != "__init__.py"}
    assert sorted(t for t in top if f"`{t}`" not in first) == []


def test_every_path_the_page_names_exists():
    text = _text()
    missing = []
    for path in set(_PY_PATH.findall(text)) | set(_DIR_PATH.findall(text)):
        if not ((PKG / path).exists() or (ROOT / path).exists()):
            missing.append(path)
    assert sorted(missing) == []


def test_every_function_class_and_method_the_page_names_exists():
    text = _text()
    names = set(_CALL.findall(text))
    for span in _code_spans(text):
        constant = _CONSTANT.match(span) and not span.startswith("MGPU_")  # MGPU_*: the next test
        if _MEMBER.match(span) or _CLASS.match(span) or constant:
            names.add(span)
    names -= UPSTREAM
    assert sorted(n for n in names if not _defined(n)) == []


def test_the_environment_variables_are_contract_envs():
    tree = ast.parse((PKG / "contract" / "env.py").read_text())
    defined = {
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        and node.value.value.startswith("MGPU_")
    }
    named = set(_MGPU_VAR.findall(_text()))
    assert sorted(named - defined) == [], "named on the page but not in contract/env.py"
    assert sorted(defined - named) == [], "contract/env.py variables the page leaves out"


def _package_imports(path: Path) -> list[str]:
    """What of the package ``path`` imports outside its folder (``..…``: a relative import above it)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level > 1:
            found.append("." * node.level + (node.module or ""))
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.append(node.module or "")
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names]
    own = "isaaclab_mgpu." + path.parent.name
    return [
        m for m in found if m.startswith(".") or (m.startswith("isaaclab_mgpu") and not m.startswith(own))
    ]


def test_a_tool_imports_nothing_of_the_launcher_or_the_rank_side():
    found = {p.name: _package_imports(p) for p in (PKG / "tools").glob("*.py")}
    assert {name: mods for name, mods in found.items() if mods} == {}


def test_the_checks_can_fail():
    """Guard against checks that pass on anything: each catches what it is for."""
    assert _defined("Supervisor.wait") and _defined("resolve") and _defined("report.dry_run")
    assert _defined("launcher.scale.plan") and _defined("UNFINISHED")
    assert not _defined("Supervisor.run")  # the method the page once showed
    assert not _defined("report.no_such_function") and not _defined("NoSuchClass")
    assert _CALL.findall("then `Supervisor.run()` and prepare() but not f(x)") == [
        "Supervisor.run",
        "prepare",
    ]
    assert _PY_PATH.findall("`launcher/skills_check.py` (tests/x.py)") == [
        "launcher/skills_check.py",
        "tests/x.py",
    ]
    assert _DIR_PATH.findall("`rank/` and rank_<r>/ and logs/rank/ and launcher/supervise/") == [
        "rank/",
        "launcher/supervise/",
    ]
    assert "launcher/skills_check.py" not in _modules()
    assert _package_imports(PKG / "cli" / "__init__.py")  # the CLI imports the launcher side

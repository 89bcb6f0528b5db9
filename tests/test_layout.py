"""The package layout matches the module map of docs/architecture.md, and data flows one way.

Every module of the package belongs to exactly one stage of the map, and no module imports a
module of a later stage (function-level and type-checking imports included: a backwards
import is a backwards dependency however it is spelt). The public API is small, in verb
families, and ``import hylo_analytics.<stage>`` gives the module.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "hylo_analytics"
PREFIX = "hylo_analytics"


def _module_map() -> dict[str, int]:
    """Top-level module or package name -> stage number, read from the doc's table."""
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("## Module map", 1)[1].split("\n## ", 1)[0]
    stages: dict[str, int] = {}
    for line in section.splitlines():
        m = re.match(r"\|\s*(\d+)\s*\|[^|]*\|([^|]*)\|", line)
        if m:
            for name in re.findall(r"`([\w.]+)`", m.group(2)):
                assert name not in stages, f"{name} is in two stages of the module map"
                stages[name] = int(m.group(1))
    assert stages, "no module map table in docs/architecture.md"
    return stages


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _top(module: str) -> str:
    """The map's name for a module: its first component below the package (or the package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PREFIX


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith(PREFIX)}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not node.module.startswith(PREFIX):
                continue
            for alias in node.names:  # `from hylo_analytics import _schema` names a module
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in known else node.module)
    return found


def test_every_module_is_on_the_map() -> None:
    stages = _module_map()
    tops = {_top(m) for m in _modules()}
    assert tops - set(stages) == set(), "modules missing from the module map"
    assert set(stages) - tops == set(), "the module map names modules that do not exist"


def test_no_module_imports_a_later_stage() -> None:
    stages = _module_map()
    modules = _modules()
    bad = []
    for module, path in sorted(modules.items()):
        own = stages[_top(module)]
        bad += [
            f"{module} (stage {own}) imports {dep} (stage {stages[_top(dep)]})"
            for dep in _imports(module, path, set(modules))
            if stages[_top(dep)] > own
        ]
    assert bad == []


def test_the_store_is_persistence_only() -> None:
    modules = _modules()
    deps = set()
    for name, path in modules.items():
        if name == "hylo_analytics.store" or name.startswith("hylo_analytics.store."):
            deps |= _imports(name, path, set(modules))
    # _resolved: the score resolution the store writes at publish (SQL of the rule, no stage);
    # _traces: the trace files the store keeps once, and the lines read back from them;
    # _versions: the natural order runs are listed and selected in (runs(), select_runs)
    allowed = {
        "_atomic",
        "errors",
        "_manifest",
        "_resolved",
        "_schema",
        "_sql",
        "_traces",
        "_versions",
        "metrics",
        "store",
    }
    assert {_top(d) for d in deps} <= allowed


@pytest.mark.parametrize(
    "stage", ["aggregate", "compare", "derive", "ingest", "report", "scoring", "stats", "testing"]
)
def test_import_of_a_stage_gives_the_module(stage: str) -> None:
    module = importlib.import_module(f"{PREFIX}.{stage}")
    import hylo_analytics

    assert getattr(hylo_analytics, stage, module) is module
    assert module.__name__ == f"{PREFIX}.{stage}"


def test_public_api_is_small_and_sorted() -> None:
    import hylo_analytics as ha

    assert len(ha.__all__) <= 46
    assert ha.__all__ == sorted(ha.__all__, key=lambda n: (not n[0].isupper(), n))
    for name in ha.__all__:
        assert getattr(ha, name) is not None, name


MAX_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    """A module is one concept: past 600 lines it is several, and should be split."""
    long = {
        str(path.relative_to(REPO)): n
        for path in sorted(_modules().values())
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_every_module_says_what_it_is_in_its_first_line() -> None:
    """Every module opens with a docstring whose first line is a whole sentence (it ends
    with a period on that line), so ``head -1`` of any file says what the file is."""
    bad = []
    for module, path in sorted(_modules().items()):
        doc = ast.get_docstring(ast.parse(path.read_text()), clean=False)
        first = doc.strip().splitlines()[0].strip() if doc and doc.strip() else ""
        if not first.endswith("."):
            bad.append(f"{module}: {first or '(no docstring)'}")
    assert not bad, "first lines that are not a sentence:\n" + "\n".join(bad)


def _runtime_imports(path: Path, known: set[str]) -> set[str]:
    """The package modules ``path`` imports, at module level or in a function; imports under
    ``if TYPE_CHECKING:`` are left out (they never run)."""

    def type_checking(node: ast.If) -> bool:
        t = node.test
        return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
            isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
        )

    found: set[str] = set()
    todo: list[ast.AST] = [ast.parse(path.read_text())]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and type_checking(node):
            todo += node.orelse
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith(PREFIX)}
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.startswith(PREFIX)
        ):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in known else node.module)
        todo += ast.iter_child_nodes(node)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                scc = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    scc.append(m)
                    if m == node:
                        break
                if len(scc) > 1:
                    out.append(sorted(scc))
    return sorted(out)


def test_no_module_is_in_an_import_cycle() -> None:
    """Data flows one way inside a stage too: no module imports one that imports it back,
    however indirectly (a function-level import counts: it runs, only later)."""
    modules = _modules()
    known = set(modules)
    graph = {m: _runtime_imports(p, known) - {m} for m, p in modules.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": {"g"}, "g": {"f"}}
    assert _cycles(graph) == [["a", "b", "c"], ["f", "g"]]

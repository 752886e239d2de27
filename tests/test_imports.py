"""The project's modules import each other without cycles (issue 24): every `import` and `from .. import`
in megakernel/, compiler/, isa/ and discrete/, those inside functions included, read statically."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("megakernel", "compiler", "isa", "discrete")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (a `from pkg import name` counts as pkg.name where that is
    a module, else as pkg)."""
    files = {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}

    def known(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            else:
                continue
            graph[module].update(t for t in map(known, targets) if t and t != module)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_detector_finds_a_cycle_and_reads_relative_imports():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = import_graph()
    assert "megakernel.generation.passes" in graph["megakernel.generation.speculative"]  # `from .passes import ...`
    assert "megakernel.generation.speculative" in graph["megakernel.generation.generate"]
    assert "megakernel.model.plan" in graph["compiler.lowering"]  # `from megakernel.model import plan`


def test_no_import_cycles():
    assert cycles(import_graph()) == []


# The layers of docs/ARCHITECTURE.md, lowest first: a module may import its own layer and those below.
LAYERS = {
    "base": ["megakernel.errors", "megakernel.progress", "megakernel.provenance"],
    "model": ["megakernel.model", "megakernel.reference"],
    "isa": ["isa"],
    "compiler": ["compiler"],
    "runtime": ["megakernel.runtime", "discrete"],
    "generation": ["megakernel.generation", "discrete.backend"],
    "measurement": ["megakernel.measurement", "discrete.observe"],
    "cli": ["megakernel", "megakernel.cli", "megakernel.__main__"],
}


def layer_of(module: str) -> int:
    """The layer of a module: the longest listed name that is the module or a package holding it."""
    best, level = "", None
    for i, names in enumerate(LAYERS.values()):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > len(best):
                best, level = name, i
    assert level is not None, f"{module} is in no layer of LAYERS (docs/ARCHITECTURE.md)"
    return level


def upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((m, t) for m, targets in graph.items() for t in targets if layer_of(t) > layer_of(m))


def test_imports_point_down_the_layers():
    edges = {"megakernel.model.config": {"megakernel.generation.generate"},
             "megakernel.cli": {"megakernel.model.config"}}
    assert upward(edges) == [("megakernel.model.config", "megakernel.generation.generate")]  # sees an upward edge
    assert upward(import_graph()) == []


def test_the_package_top_holds_only_the_base_and_the_cli():
    """Every other module sits in the sub-package of its layer (model, reference, runtime, generation,
    measurement), so the tree reads as the architecture."""
    top = {p.stem for p in (ROOT / "megakernel").glob("*.py")}
    assert top == {"__init__", "__main__", "cli", "errors", "progress", "provenance"}
    packages = {p.parent.name for p in (ROOT / "megakernel").glob("*/__init__.py")}
    assert packages == {"model", "reference", "runtime", "generation", "measurement"}
    for name in packages:
        init = ROOT / "megakernel" / name / "__init__.py"
        assert init.read_text().startswith('"""'), f"megakernel.{name}: no docstring saying what lives there"

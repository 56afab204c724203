"""ARCHITECTURE.md's invariants about the code's shape, checked against the import graph (every
`import` in kernel_lsp/, function-level ones included): no circles, imports point downwards
through the layers, only the server knows LSP, the front ends stay apart."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "kernel_lsp"

# Each part of kernel_lsp and its layer, lowest first (ARCHITECTURE.md's code map). A module may
# import its own part and any part of a lower layer, or of its own layer; never a higher one.
LAYERS: dict[str, int] = {
    # core: plain data and arithmetic
    "model": 0,
    "stats": 0,
    "archs": 0,
    "procs": 0,
    "constants": 0,
    "advice": 0,
    "codes": 0,
    "safe_expr": 0,  # arithmetic of workspace text, never eval
    "safe_write": 0,  # kernel-lsp's own files, never through a link
    "child_python": 0,  # Python children that do not import from the current folder
    "elf": 0,
    "early_initialize": 0,  # the `initialize` answer before pygls loads (stdlib only)
    # reading sources and compiling them
    "source": 1,
    "compile": 1,
    "include_graph": 1,
    "index_expr": 1,
    "host_launch": 2,
    "host_entry": 2,
    "kernel_use": 2,
    "config": 2,
    "spec": 2,
    # what runs and checks compiled code
    "runner": 3,
    "fence": 3,
    "launch_check": 3,
    "skeleton": 3,
    "entry_skeleton": 3,
    "profile_text": 3,
    "evaluation": 4,
    "check": 5,
    "gpu": 5,
    "watch": 5,
    # the front door, the optimizer over it, the front ends over both
    "workspace": 6,
    "check_jobs": 6,  # what compile workers run, over the Workspace
    "gpu_check": 6,
    "optimizer": 7,
    "cli": 8,
    "server": 8,
    "__main__": 9,
}
FRONT_ENDS = ("cli", "server")


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the kernel_lsp modules it imports (anywhere in it) and the third-party roots."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = (".".join(package[: len(package) - node.level + 1]) if node.level else "") + (
                    ("." if node.level and node.module else "") + (node.module or "")
                )
                base = base.strip(".")
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for target in targets:
                if not target.startswith("kernel_lsp"):
                    graph[name].add(target.split(".")[0])
                    continue
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    return graph


GRAPH = _imports(MODULES := _modules())


def _part(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def test_every_part_of_the_package_has_a_layer():
    unplaced = sorted({_part(m) for m in MODULES if m != "kernel_lsp"} - set(LAYERS))
    assert not unplaced, f"place {unplaced} in LAYERS (and ARCHITECTURE.md's code map)"


def test_the_import_graph_has_no_circle():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH.get(v, ()):
            if w not in MODULES:
                continue
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
                circles.append(sorted(component))

    for module in MODULES:
        if module not in index:
            visit(module)
    assert circles == []


def test_imports_point_downwards():
    upward = [
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if target in MODULES
        and _part(module) in LAYERS
        and _part(target) in LAYERS
        and _part(module) != _part(target)
        and LAYERS[_part(target)] > LAYERS[_part(module)]
    ]
    assert upward == []


def test_the_front_ends_do_not_import_each_other_and_only_the_server_knows_lsp():
    crossing = [
        f"{m} -> {t}"
        for m, targets in GRAPH.items()
        for t in targets
        if t in MODULES and {_part(m), _part(t)} == set(FRONT_ENDS)
    ]
    assert crossing == [] or crossing == ["kernel_lsp.cli.serve -> kernel_lsp.server"]
    lsp = sorted(
        m for m, targets in GRAPH.items() if {"pygls", "lsprotocol"} & targets and _part(m) != "server"
    )
    assert lsp == []


@pytest.mark.parametrize("part", ["runner", "compile", "spec"])
def test_the_worker_side_never_imports_the_client_side(part):
    """The GPU worker, the compile stage and specs load in worker processes: they must not pull
    in the server, the CLI, the optimizer or the Workspace."""
    higher = {"workspace", "optimizer", "cli", "server", "check", "gpu", "evaluation"}
    found = [
        f"{m} -> {t}"
        for m, targets in GRAPH.items()
        if _part(m) == part
        for t in targets
        if t in MODULES and _part(t) in higher
    ]
    assert found == []


# The LSP requests that only read (server/requests/); execute_command.py starts FSR runs and
# compares the document after one, so it keeps the server.
REQUESTS = PACKAGE / "server" / "requests"
ACTING = {"execute_command"}
READ_ONLY = {"hover": "kernel_parts", "code_lens": "code_lenses", "code_action": "code_actions"}
SERVER_NAMES = {"ls", "server"}


def _top_level_functions(path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse(path.read_text())
    return [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def test_request_handlers_are_functions_of_a_snapshot_not_of_the_server():
    """In server/requests/, only `register` (the LSP binding) takes the server outside the
    acting commands; a read-only request's logic takes a DocumentSnapshot first; and no module
    but the acting ones asks the server for a document."""
    takes_server, reads_documents = [], []
    for path in sorted(REQUESTS.glob("*.py")):
        if path.stem in ACTING:
            continue
        for function in _top_level_functions(path):
            names = {a.arg for a in function.args.args + function.args.kwonlyargs}
            if function.name not in ("register", "register_all") and names & SERVER_NAMES:
                takes_server.append(f"{path.stem}.{function.name}")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("workspace", "open_document"):
                reads_documents.append(f"{path.stem}:{node.lineno} .{node.attr}")
    assert takes_server == []
    assert reads_documents == []
    for module, handler in READ_ONLY.items():
        [function] = [f for f in _top_level_functions(REQUESTS / f"{module}.py") if f.name == handler]
        first = function.args.args[0].annotation
        assert first is not None and ast.unparse(first) == "DocumentSnapshot", f"{module}.{handler}"

"""ARCHITECTURE.md's invariants about the code's shape, checked against the import graph (every
`import` in kernel_lsp/, function-level ones included): no circles, imports point downwards
through the layers, only the server knows LSP, the front ends stay apart."""

from __future__ import annotations

import ast
import functools
import itertools
import re
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "kernel_lsp"
# The optimizer's source: installed as kernel_lsp.optimizer (setup.py); kernel_lsp/optimizer links
# to it, and rglob does not follow links.
OPTIMIZER = REPO / "optimizer"

# Each part of kernel_lsp and its layer, lowest first (ARCHITECTURE.md's code map). A module may
# import its own part and any part of a lower layer, or of its own layer; never a higher one.
LAYERS: dict[str, int] = {
    # core: plain data and arithmetic
    "model": 0,
    "stats": 0,
    "archs": 0,
    "procs": 0,
    "constants": 0,
    "lexer": 0,  # the one reader of C/C++ comments, literals, brackets and argument lists
    "advice": 0,
    "codes": 0,
    "safe_expr": 0,  # arithmetic of workspace text, never eval
    "safe_write": 0,  # kernel-lsp's own files, never through a link
    "tempdirs": 0,  # temporary folders with an owner file, reaped when their owner is gone
    "child_python": 0,  # Python children that do not import from the current folder
    "elf": 0,
    "gpu_reports": 0,  # what ncu and compute-sanitizer said, as plain results
    "gpu_results": 0,  # what a GPU check answers (KernelCheck, Comparison, DeviceInfo), plain
    "early_initialize": 0,  # the `initialize` answer before pygls loads (stdlib only)
    "settings_shape": 0,  # a settings object's keys, read before the settings module loads
    "files": 0,  # a user's file read safely: regular, bounded, never blocking on a FIFO
    "report": 0,  # what a report of many checks shows: each finding once, a missing package once
    # reading sources and compiling them
    "source": 1,
    "compile": 1,
    "hostcode": 1,  # where a file's text has host code, read from the text alone
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
    "gpu_request": 4,  # what a GPU check is asked (GpuCheckRequest), plain: the optimizer builds it
    "check": 5,
    "gpu": 5,
    "watch": 5,
    # the front door, the optimizer over it, the front ends over both
    "workspace": 6,
    "check_jobs": 6,  # what compile workers run, over the Workspace
    "scheduler": 6,  # the one road from a front end's CheckRequest to its FileCheck
    "gpu_check": 6,
    "optimizer": 7,
    "api": 8,  # the front door's named surface, the optimizer's runs included
    "cli": 9,
    "server": 9,
    "__main__": 10,
}
FRONT_ENDS = ("cli", "server")
# What a front end may import from the rest of kernel_lsp: the Workspace and the api package.
FRONT_DOOR = ("workspace", "api")
# The only other imports a front end may make into the engine, each with why (at most 10).
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("kernel_lsp.cli.main", "kernel_lsp.child_python"): (
        "process hygiene set before any command parses its flags: the engine is not loaded yet"
    ),
    ("kernel_lsp.cli.serve", "kernel_lsp.early_initialize"): (
        "a saved `initialize` answer sent before pygls loads: standard library only, no engine"
    ),
    ("kernel_lsp.server.clangd.binary", "kernel_lsp.settings_shape"): (
        "the clangd settings read as config reads them, before its compiler imports load: stdlib only"
    ),
    ("kernel_lsp.server.clangd.proxy", "kernel_lsp.procs"): (
        "clangd, the server's own child, dies with it (setpriv --pdeathsig): process hygiene, no engine"
    ),
}


def package_files() -> dict[str, Path]:
    """Every module of the package as it is installed (kernel_lsp.optimizer.* from optimizer/)."""
    out = {}
    for root, prefix in ((PACKAGE, ["kernel_lsp"]), (OPTIMIZER, ["kernel_lsp", "optimizer"])):
        for path in root.rglob("*.py"):
            parts = prefix + list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _base(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The module a `from ... import` names, its dots resolved against `module`."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = (".".join(package[: len(package) - node.level + 1]) if node.level else "") + (
        ("." if node.level and node.module else "") + (node.module or "")
    )
    return base.strip(".")


@functools.cache
def _parsed(path: Path) -> ast.Module:
    """A module's tree, parsed once per run: the graphs below read each module's imports again
    for each name followed (3,100 parses of 200 files took 20 to 90 s of each run's collection,
    in every pytest-xdist worker). Only read, never changed."""
    return ast.parse(path.read_text())


@functools.cache
def _import_nodes(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """Every `import` and `from ... import` in a module, function-level ones included."""
    return [n for n in ast.walk(_parsed(path)) if isinstance(n, ast.Import | ast.ImportFrom)]


def _imports(modules: dict[str, Path], follow: bool = False) -> dict[str, set[str]]:
    """module -> the kernel_lsp modules it imports (anywhere in it) and the third-party roots.
    With `follow`, a name is the module it comes from: a re-export (`from .x import name` in the
    module named) is followed to the module that defines `name`."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for node in _import_nodes(path):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _base(name, path, node)
                if follow and base in modules:
                    targets = [_origin(base, a.name, modules) for a in node.names]
                else:
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


def _origin(module: str, name: str, modules: dict[str, Path], depth: int = 0) -> str:
    """The module `name` comes from when imported from `module`: a submodule of that name, else
    the module a top-level `from ... import name` of `module` takes it from (followed further),
    else `module` itself, which defines it."""
    if f"{module}.{name}" in modules:
        return f"{module}.{name}"
    if depth < 20:
        for node in _parsed(modules[module]).body:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        base = _base(module, modules[module], node)
                        if base in modules:
                            return _origin(base, alias.name, modules, depth + 1)
                        return f"{base}.{alias.name}"
    return module


MODULES = package_files()


# The graphs are built when a test first asks, not at import: collection imports this module in
# every pytest-xdist worker, and parsing the package there cost each worker 1.4 s of CPU.
@functools.cache
def graph() -> dict[str, set[str]]:
    """module -> the kernel_lsp modules it imports and the third-party roots."""
    return _imports(MODULES)


@functools.cache
def origins() -> dict[str, set[str]]:
    """Where each imported name comes from, re-exports followed."""
    return _imports(MODULES, follow=True)


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
        for w in graph().get(v, ()):
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
        for module, targets in graph().items()
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
        for m, targets in graph().items()
        for t in targets
        if t in MODULES and {_part(m), _part(t)} == set(FRONT_ENDS)
    ]
    assert crossing == [] or crossing == ["kernel_lsp.cli.serve -> kernel_lsp.server"]
    lsp = sorted(
        m for m, targets in graph().items() if {"pygls", "lsprotocol"} & targets and _part(m) != "server"
    )
    assert lsp == []


def side_doors(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a front end into kernel_lsp that go around the front door (and are not one
    of the EXCEPTIONS). The package itself (`__version__`) is not the engine."""
    return sorted(
        f"{m} -> {t}"
        for m, targets in graph.items()
        if _part(m) in FRONT_ENDS
        for t in targets
        if t in MODULES
        and t != "kernel_lsp"
        and _part(t) not in (*FRONT_ENDS, *FRONT_DOOR)
        and (m, t) not in EXCEPTIONS
    )


def test_front_ends_import_only_the_front_door():
    """cli/ and server/ reach the engine through kernel_lsp.workspace and kernel_lsp.api alone."""
    assert side_doors(graph()) == []


def test_the_exceptions_are_few_justified_and_still_needed():
    assert len(EXCEPTIONS) <= 10
    for (module, target), why in EXCEPTIONS.items():
        assert why.strip() and "\n" not in why, (module, target)
        assert target in graph().get(module, ()), f"{module} -> {target} is gone: drop the exception"


def test_a_new_side_door_is_caught():
    """The rule fails on a front end that imports the engine directly, at module level or inside
    a function, absolutely or relatively, and keeps passing the front door and the exceptions."""
    synthetic = {m: set(t) for m, t in graph().items()}
    synthetic["kernel_lsp.server.app"] |= {"kernel_lsp.gpu", "kernel_lsp.api.model"}
    synthetic["kernel_lsp.cli.bench"] |= {"kernel_lsp.compile.nvrtc"}
    assert side_doors(synthetic) == [
        "kernel_lsp.cli.bench -> kernel_lsp.compile.nvrtc",
        "kernel_lsp.server.app -> kernel_lsp.gpu",
    ]


# The machine behind the Workspace (compile, gpu, fence, evaluation, runner): the optimizer asks
# the Workspace to compile, fence, pool GPUs, verify, time and profile, and reaches none of it
# itself, directly or through a re-export (origins() follows each name to the module defining it).
MACHINE = ("compile", "gpu", "fence", "evaluation", "runner")


def optimizer_reach(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {
        (m, t)
        for m, targets in graph.items()
        if m.startswith("kernel_lsp.optimizer")
        for t in targets
        if t in MODULES and _part(t) in MACHINE
    }


def test_the_optimizer_reaches_the_machine_only_through_the_workspace():
    assert sorted(optimizer_reach(origins())) == []
    synthetic = {m: set(t) for m, t in origins().items()}
    synthetic["kernel_lsp.optimizer.loop"] |= {"kernel_lsp.runner.judge"}
    assert optimizer_reach(synthetic) == {("kernel_lsp.optimizer.loop", "kernel_lsp.runner.judge")}


def test_a_re_export_is_followed_to_the_module_that_defines_the_name(tmp_path):
    """`from kernel_lsp.workspace import compile_isolated`, where the Workspace only imports it,
    is a reach into compile; a name the importing module defines itself is that module's."""
    pkg = tmp_path / "kernel_lsp"
    (pkg / "compile").mkdir(parents=True)
    (pkg / "optimizer").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "compile" / "__init__.py").write_text("from .nvrtc import compile_isolated as compile_isolated\n")
    (pkg / "compile" / "nvrtc.py").write_text("def compile_isolated(): ...\n")
    (pkg / "workspace.py").write_text("from .compile import compile_isolated\nclass Workspace: ...\n")
    (pkg / "optimizer" / "__init__.py").write_text("")
    (pkg / "optimizer" / "loop.py").write_text(
        "from kernel_lsp.workspace import Workspace, compile_isolated\n"
    )
    modules = {
        "kernel_lsp": pkg / "__init__.py",
        "kernel_lsp.compile": pkg / "compile" / "__init__.py",
        "kernel_lsp.compile.nvrtc": pkg / "compile" / "nvrtc.py",
        "kernel_lsp.workspace": pkg / "workspace.py",
        "kernel_lsp.optimizer": pkg / "optimizer" / "__init__.py",
        "kernel_lsp.optimizer.loop": pkg / "optimizer" / "loop.py",
    }
    assert _imports(modules)["kernel_lsp.optimizer.loop"] == {"kernel_lsp.workspace"}
    assert _imports(modules, follow=True)["kernel_lsp.optimizer.loop"] == {
        "kernel_lsp.workspace",
        "kernel_lsp.compile.nvrtc",
    }


# What a front end still names of the check machinery (compile, check, check_jobs, gpu,
# gpu_check, evaluation, runner, fence, watch), each name followed through the api's re-exports to
# the module that defines it: issue 47 asks that the front ends hand the Workspace typed requests
# and get plain results back, naming no machinery. Empty since the watchers came from
# Workspace.watch_folder and the GPU feature held its sessions as `OpenGpu` (20 module pairs on
# 2026-12-06): a name a front end takes from the machinery fails the test below.
CHECK_MACHINERY = (
    "compile",
    "check",
    "check_jobs",
    "gpu",
    "gpu_check",
    "evaluation",
    "runner",
    "fence",
    "watch",
)
FRONT_END_REACH: dict[tuple[str, str], str] = {}


def front_end_machinery(modules: dict[str, Path]) -> dict[tuple[str, str], set[str]]:
    """(front-end module, machinery module) -> the names it takes from there, re-exports followed."""
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    for module, path in modules.items():
        if _part(module) not in FRONT_ENDS:
            continue
        for node in _import_nodes(path):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = _base(module, path, node)
            if base not in modules:
                continue
            for alias in node.names:
                origin = _origin(base, alias.name, modules)
                while origin and origin not in modules:
                    origin = origin.rpartition(".")[0]
                if origin in modules and _part(origin) in CHECK_MACHINERY:
                    found[(module, origin)].add(alias.name)
    return found


def test_the_front_ends_name_the_check_machinery_only_where_listed():
    found = front_end_machinery(MODULES)
    listed = {k: {n.strip() for n in v.split(",")} for k, v in FRONT_END_REACH.items()}
    new = sorted(
        f"{m} -> {t}: {', '.join(sorted(names - listed.get((m, t), set())))}"
        for (m, t), names in found.items()
        if names - listed.get((m, t), set())
    )
    gone = sorted(
        f"{m} -> {t}: {', '.join(sorted(names - found.get((m, t), set())))}"
        for (m, t), names in listed.items()
        if names - found.get((m, t), set())
    )
    assert new == [], "a front end names more of the check machinery"
    assert gone == [], "no longer named: drop it from FRONT_END_REACH"


# Where a pool of compile workers may be built: the scheduler of checks (every front end's
# checks), the shared pool of compile jobs (compile/pool.py: the tuner's and the optimizer's
# compiles), and the pool's own module (run_jobs).
POOL_BUILDERS = {"kernel_lsp.scheduler", "kernel_lsp.compile.pool", "kernel_lsp.compile.jobs"}


def _pool_builders(modules: dict[str, Path]) -> set[str]:
    """The modules that call WorkerPool, under its name or one it was imported as."""
    found = set()
    for module, path in modules.items():
        nodes = list(ast.walk(ast.parse(path.read_text())))
        names = {"WorkerPool"} | {
            a.asname
            for n in nodes
            if isinstance(n, ast.ImportFrom)
            for a in n.names
            if a.name == "WorkerPool" and a.asname
        }
        calls = (
            getattr(n.func, "id", None) or getattr(n.func, "attr", None)
            for n in nodes
            if isinstance(n, ast.Call)
        )
        if names & set(calls):
            found.add(module)
    return found


def test_only_the_scheduler_builds_a_pool_of_check_workers():
    """Issue 47: the server, `check` (its run over files, `--watch`, `--stdin`) and the GPU
    check schedule their checks through one CheckScheduler, which owns the worker processes."""
    assert _pool_builders(MODULES) <= POOL_BUILDERS, sorted(_pool_builders(MODULES) - POOL_BUILDERS)
    assert "kernel_lsp.scheduler" in _pool_builders(MODULES)


def test_a_pool_built_elsewhere_is_caught(tmp_path):
    (tmp_path / "gpu_check.py").write_text("def f(n):\n    return jobs.WorkerPool(n)\n")
    (tmp_path / "check_jobs.py").write_text("from .compile.jobs import WorkerPool as W\nW(2)\n")
    (tmp_path / "check.py").write_text("from .compile.jobs import WorkerPool\n")  # named, not built
    modules = {f"kernel_lsp.{p.stem}": p for p in tmp_path.glob("*.py")}
    assert _pool_builders(modules) == {"kernel_lsp.gpu_check", "kernel_lsp.check_jobs"}


def test_the_graph_reads_function_level_and_relative_imports(tmp_path):
    """The reader of the graph sees the imports a side door would use (a function's, relative)."""
    pkg = tmp_path / "kernel_lsp"
    (pkg / "server").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "gpu.py").write_text("")
    (pkg / "api.py").write_text("")
    (pkg / "server" / "__init__.py").write_text("")
    (pkg / "server" / "app.py").write_text("from .. import api\ndef f():\n    from ..gpu import GpuSession\n")
    modules = {
        "kernel_lsp": pkg / "__init__.py",
        "kernel_lsp.gpu": pkg / "gpu.py",
        "kernel_lsp.api": pkg / "api.py",
        "kernel_lsp.server": pkg / "server" / "__init__.py",
        "kernel_lsp.server.app": pkg / "server" / "app.py",
    }
    assert _imports(modules)["kernel_lsp.server.app"] == {"kernel_lsp.api", "kernel_lsp.gpu"}


@pytest.mark.parametrize("part", ["runner", "compile", "spec"])
def test_the_worker_side_never_imports_the_client_side(part):
    """The GPU worker, the compile stage and specs load in worker processes: they must not pull
    in the server, the CLI, the optimizer or the Workspace."""
    higher = {"workspace", "optimizer", "cli", "server", "check", "gpu", "evaluation"}
    found = [
        f"{m} -> {t}"
        for m, targets in graph().items()
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


def _diagram_rows() -> list[tuple[str, set[str]]]:
    """ARCHITECTURE.md's layer diagram: each row's label and the parts it names, top first."""
    text = (PACKAGE.parent / "ARCHITECTURE.md").read_text()
    block = text.split("## Layers", 1)[1].split("```", 2)[1]
    rows: list[tuple[str, list[str]]] = []
    for line in block.strip("\n").splitlines():
        if line[:1].strip():
            label, _, rest = line.partition("   ")
            rows.append((label.strip(), [rest]))
        elif rows:
            rows[-1][1].append(line)
    out = []
    for label, lines in rows:
        body = re.sub(r"\([^)]*\)", " ", " ".join(lines))  # what a part holds, in parentheses
        names = set()
        for token in re.split(r"[\s,·]+", body):
            token = token.removeprefix("kernel_lsp/").rstrip("/").removesuffix(".py")
            if token:
                names.add(token)
        out.append((label, names))
    return out


def test_the_layer_diagram_agrees_with_the_layers():
    rows = _diagram_rows()
    named = [name for _, names in rows for name in names]
    assert sorted(set(named) - set(LAYERS)) == [], "the diagram names a part LAYERS does not know"
    assert sorted(set(LAYERS) - set(named)) == [], "a part of LAYERS is missing from the diagram"
    assert len(named) == len(set(named)), "a part in two rows"
    for (upper, above), (lower, below) in itertools.pairwise(rows):
        assert min(LAYERS[n] for n in above) >= max(LAYERS[n] for n in below), (upper, lower)


# --- one lexer -----------------------------------------------------------------------------------
# kernel_lsp/lexer.py is the one reader of C/C++ comments, literals, brackets and lists. Places
# that still count brackets themselves walk statements and blocks (what a `{` opens decides what
# follows), not a list or a bracket's partner; each is named with why.
LEXER = "kernel_lsp.lexer"
BLOCK_SCANNERS: dict[tuple[str, str], str] = {
    ("kernel_lsp.host_launch.scan", "statements"): "a body's statements and the blocks around each",
    ("kernel_lsp.optimizer.file_items", "top_items"): "a file's top-level items, each to its `;` or body",
    (
        "kernel_lsp.optimizer.static_checks",
        "mutable_globals",
    ): "file-scope declarations, namespace by namespace",
    (
        "kernel_lsp.compile.host_names",
        "global_names",
    ): "global-scope names, visiting only braces, parentheses and the names asked about (every save)",
}
_BRACKETS = set("()[]{}<>")


def _bracket_text(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and set(node.value) <= _BRACKETS != set()
    )


def _steps_depth(node: ast.AST) -> bool:
    return isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add | ast.Sub)


def bracket_counters(tree: ast.AST) -> set[str]:
    """The functions that count bracket depth themselves: `depth += 1` under `if c == "("` (or
    `c in "([{"`), or `depth += {"(": 1, ")": -1}.get(c, 0)`."""
    found: set[str] = set()

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and any(_bracket_text(c) for c in node.test.comparators)
            and any(_steps_depth(n) for statement in node.body for n in ast.walk(statement))
        ):
            found.add(function)
        if (
            _steps_depth(node)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and isinstance(node.value.func.value, ast.Dict)
            and any(k is not None and _bracket_text(k) for k in node.value.func.value.keys)
        ):
            found.add(function)
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "<module>")
    return found


def comment_readers(tree: ast.AST) -> set[str]:
    """The functions (or the module) that find comments themselves: a function that looks for
    both `//` and `/*` or for `*/`, or a pattern that matches a whole comment."""
    found: set[str] = set()

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
            texts = {
                n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            }
            if {"//", "/*"} <= texts or "*/" in texts:
                found.add(function)
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and len(node.value) <= 300
            and "//" in node.value
        ):
            try:
                pattern = re.compile(node.value, re.S)
            except re.error:
                pattern = None
            if pattern and any(pattern.fullmatch(c) for c in ("// a comment", "/* a\ncomment */")):
                found.add(function)
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "<module>")
    return found


@functools.cache
def _tree(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text())


def _outside_the_lexer(reader) -> set[tuple[str, str]]:
    return {(module, function) for module in MODULES if module != LEXER for function in reader(_tree(module))}


def test_only_the_lexer_reads_comments():
    assert sorted(_outside_the_lexer(comment_readers)) == []


def test_only_the_lexer_matches_brackets_and_splits_lists():
    assert sorted(_outside_the_lexer(bracket_counters) - set(BLOCK_SCANNERS)) == []
    gone = set(BLOCK_SCANNERS) - _outside_the_lexer(bracket_counters)
    assert not gone, f"{sorted(gone)} count no brackets any more: drop them from BLOCK_SCANNERS"
    assert all(why.strip() for why in BLOCK_SCANNERS.values())


def test_a_second_blanker_matcher_or_splitter_is_caught():
    """The forms the four splitters, three blankers and three matchers had before the lexer."""
    blankers = """
_COMMENT = re.compile(r"//[^\\n]*|/\\*.*?\\*/|\\"(?:\\\\.|[^\\"\\\\\\n])*\\"", re.S)
def _blank(source):
    if source.startswith("//", i):
        pass
    elif source.startswith("/*", i):
        j = source.find("*/", i + 2)
"""
    counters = """
def _split_params(text):
    for i, ch in enumerate(text):
        if ch in "<([":
            depth += 1
def _closing(text, at):
    for j in range(at, len(text)):
        depth += {"(": 1, ")": -1}.get(text[j], 0)
def _matching_paren(code, at):
    for i in range(at, len(code)):
        if code[i] == "(":
            depth += 1
def fine(text):
    total = 0
    for c in text:
        if c == ",":
            total += 1
    return f"({total})"
"""
    assert comment_readers(ast.parse(blankers)) == {"<module>", "_blank"}
    assert bracket_counters(ast.parse(counters)) == {"_split_params", "_closing", "_matching_paren"}


# --- front ends read files through the regular-file reader ---------------------------------------


def _mode(call: ast.Call, position: int) -> str | None:
    """The mode an open-like call passes ("r" when none), None when it is not a constant."""
    node = call.args[position] if len(call.args) > position else None
    node = next((k.value for k in call.keywords if k.arg in ("mode", "flags")), node)
    if node is None:
        return "r"
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def plain_reads(tree: ast.AST) -> list[str]:
    """Reads of a file that go around the regular-file reader (kernel_lsp/files.py: `read_text_file`,
    `read_regular`, `read_source`, `read_text_prefix`): `open()`, `io.open`, `os.fdopen` to read,
    `os.open` without a write flag, `Path.read_text`/`read_bytes`/`open`. Such a read blocks on a
    FIFO and reads a device or a huge file to its end. (The engine's own `read_text` of the
    include graph is not a Path's.)"""
    found = []
    for node in sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)), key=lambda n: n.lineno):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
        if name in ("read_text", "read_bytes") and isinstance(func, ast.Attribute):
            found.append(f"{node.lineno}: .{name}()")
        elif owner == "os" and name == "open":
            flags = ast.unparse(node.args[1]) if len(node.args) > 1 else ""
            if not re.search(r"O_WRONLY|O_RDWR", flags):
                found.append(f"{node.lineno}: os.open(...) to read")
        elif (name, owner) in (("open", ""), ("open", "io"), ("fdopen", "os")) or (
            name == "open" and isinstance(func, ast.Attribute) and owner not in ("os", "io", "webbrowser")
        ):
            mode = _mode(node, 1 if (name, owner) in (("open", ""), ("open", "io"), ("fdopen", "os")) else 0)
            if mode is None or not set(mode) & set("wax+"):
                found.append(f"{node.lineno}: {ast.unparse(func)}(...) to read")
    return found


def test_front_ends_read_files_only_through_the_regular_file_reader():
    reads = [
        f"{module}:{where}"
        for module in MODULES
        if _part(module) in FRONT_ENDS
        for where in plain_reads(_tree(module))
    ]
    assert reads == []


def test_a_plain_read_in_a_front_end_is_caught():
    code = """
with open(path, encoding="utf-8") as f: pass
with open(path, "rb") as f: pass
text = Path(p).read_text()
fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
with os.fdopen(fd, encoding="utf-8") as f: pass
with Path(p).open() as f: pass
with open(out, "w", encoding="utf-8") as f: pass
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
with os.fdopen(fd, "w") as f: pass
data = read_text_file(path)
"""
    assert [r.split(":")[0] for r in plain_reads(ast.parse(code))] == ["2", "3", "4", "5", "6", "7"]


# --- the server's state, declared in one place ---------------------------------------------------
SERVER_STATE_HOME = "kernel_lsp.server.app"  # KernelLanguageServer.__init__ declares every attribute
# Attributes another module may assign: pygls's own, set as pygls's start_tcp sets them.
PYGLS_ATTRIBUTES: dict[tuple[str, str], str] = {
    ("kernel_lsp.server.tcp", "_stop_event"): "pygls's stop event for run_async, as its start_tcp sets it",
    (
        "kernel_lsp.server.tcp",
        "_server",
    ): "pygls's server object (its shutdown closes it), as start_tcp sets it",
}
SERVER_NAMES_IN_FEATURES = ("ls", "server")
HANDLER_LINES = 60  # the LSP handlers and their registration stay small


def server_state_writes(tree: ast.AST) -> set[str]:
    """Attributes of the server a module assigns (`ls.x = ...`, `server.x = ...`, `self.server.x
    = ...`), and "setattr" for any setattr call."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            found.add("setattr")
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AugAssign | ast.AnnAssign)
            else []
        )
        for target in targets:
            for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                if not isinstance(t, ast.Attribute):
                    continue
                owner = t.value
                if (isinstance(owner, ast.Name) and owner.id in SERVER_NAMES_IN_FEATURES) or (
                    isinstance(owner, ast.Attribute) and owner.attr == "server"
                ):
                    found.add(t.attr)
    return found


def test_only_the_server_sets_its_state():
    """Feature modules change the server through its methods (`new_session`, `gpu_up`,
    `gpu_down`, `watch_with`, `log_to_client`): no attribute appears on it from elsewhere."""
    writes = {
        (module, attribute)
        for module in MODULES
        if module.startswith("kernel_lsp.server") and module != SERVER_STATE_HOME
        for attribute in server_state_writes(_tree(module))
    }
    assert sorted(writes - set(PYGLS_ATTRIBUTES)) == []
    assert set(PYGLS_ATTRIBUTES) <= writes, "an allowed pygls attribute is set no more: drop it"


def test_a_state_write_from_a_feature_is_caught():
    code = """
def register(server):
    server.watching = object()
    server.analysis_setup.append(lambda a: setattr(a, "includers", None))
def handler(ls):
    ls._fsr_state = {}
    ls.gpu, ls.device_name = None, None
    ls.acted_on.clear()
class Feature:
    def stop(self):
        self.server.gpu = None
        self.session = None
"""
    assert server_state_writes(ast.parse(code)) == {"watching", "setattr", "_fsr_state", "gpu", "device_name"}


def test_lsp_handlers_and_their_registration_are_small():
    long = sorted(
        f"{module}.{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for module in MODULES
        if module.startswith(("kernel_lsp.server.requests", "kernel_lsp.server.notifications"))
        for node in ast.walk(_tree(module))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > HANDLER_LINES
    )
    assert long == []


# --- test hooks: injected by the tests, never read by kernel-lsp ---------------------------------
# A test selects the fake GPU in its own process (tests/conftest.py's `fake_gpu` fixture, or
# tests/kernel_lsp_on_fake_gpu.py for the CLI or the server started as a process), and the engine
# hands that choice to its worker processes as an argument; the fake's stall mark travels in the
# fake image. No module of the package names the variables that once selected them (issue 47),
# but the optimizer's test stand-in, which only a test's launcher injects
# (tests/e2e/server_with_test_evaluator.py).
TEST_HOOK_VARIABLES = ("KERNEL_LSP_FAKE_GPU", "KERNEL_LSP_FAKE_STALL_MARK")
INJECTED_TEST_SUPPORT = ("kernel_lsp.optimizer.testing",)


def hook_variable_readers(modules: dict[str, Path]) -> list[str]:
    """`module: VARIABLE` for each test-hook variable a module of the package names."""
    return sorted(
        f"{module}: {variable}"
        for module, path in modules.items()
        if module not in INJECTED_TEST_SUPPORT
        for variable in TEST_HOOK_VARIABLES
        if variable in path.read_text()
    )


def test_no_module_reads_a_test_hook_variable():
    assert INJECTED_TEST_SUPPORT[0] in MODULES, "the test support moved: follow it here"
    assert hook_variable_readers(MODULES) == []


def test_a_module_that_reads_a_test_hook_variable_is_caught(tmp_path):
    worker = tmp_path / "worker.py"
    worker.write_text('fake = args.fake or os.environ.get("KERNEL_LSP_FAKE_GPU") == "1"\n')
    fake = tmp_path / "fake.py"
    fake.write_text('mark = os.environ.get("KERNEL_LSP_FAKE_STALL_MARK", "")\n')
    testing = tmp_path / "testing.py"
    testing.write_text("# a stand-in that may say KERNEL_LSP_FAKE_GPU\n")
    modules = {
        "kernel_lsp.runner.worker": worker,
        "kernel_lsp.runner.fake": fake,
        "kernel_lsp.optimizer.testing": testing,
    }
    assert hook_variable_readers(modules) == [
        "kernel_lsp.runner.fake: KERNEL_LSP_FAKE_STALL_MARK",
        "kernel_lsp.runner.worker: KERNEL_LSP_FAKE_GPU",
    ]

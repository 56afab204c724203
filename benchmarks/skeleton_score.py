"""How often `kernel-lsp spec` gets an argument right with no edit: the skeleton of every file of the
spec corpus (tests/fixtures/spec_corpus: kernels with their launchers, each with a hand-written
spec, the truth) and of the launcher files (tests/fixtures/launchers: a naive kernel and the
`extern "C"` launcher a benchmark harness calls, each with a hand-written entry spec) scored
argument by argument on kind, shape and dtype.

    python benchmarks/skeleton_score.py                      # this checkout's skeleton
    python benchmarks/skeleton_score.py --skeleton-from /work/main   # another checkout's, same truth
    python benchmarks/skeleton_score.py --verbose            # and every argument it gets wrong
    python benchmarks/skeleton_score.py --corpus tests/fixtures/launchers   # one corpus

By default it scores four corpora: the spec corpus, the launcher files, samples/entries (the
entry samples, whose specs were written before entry skeletons existed) and
tests/fixtures/launchers_heldout (launchers written after the entry skeleton, not fitted to).

A truth that is an entry spec is scored against what `kernel-lsp spec FILE` writes for the file
with no flags (a checkout without entry skeletons wrote the kernel's or the pipeline's skeleton,
whose arguments are the kernel's).

An argument is right when all three are: its kind (In, Out, InOut, Scratch, Scalar, Alias; for a
scalar also whether it is a size or a value, for an alias the buffer it names), its shape
(evaluated at random sizes, every dimension equal: a 2-D buffer written as one size is wrong) and
its dtype. A truth spec that is a pipeline is scored against the pipeline skeleton where the
skeleton makes one, else against each kernel's skeleton, as a user would write them one by one.
The skeletons are made in a child process with the other checkout first on PYTHONPATH; both are
read with this checkout's spec loader."""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "fixtures" / "spec_corpus"
LAUNCHERS = REPO / "tests" / "fixtures" / "launchers"
ENTRIES = REPO / "samples" / "entries"  # entry specs written before entry skeletons existed
HELDOUT = REPO / "tests" / "fixtures" / "launchers_heldout"  # launchers written after the skeleton
TRIALS = 3


# --- the child: skeleton texts from whichever kernel_lsp is first on the path ------------------


def emit() -> None:
    """Reads [{"cu": path, "kernels": [...]}] on stdin, writes {"cu": [skeleton texts]}."""
    from kernel_lsp import skeleton
    from kernel_lsp.source import find_kernel, find_kernels, parse_directives

    out: dict[str, list[str]] = {}
    for item in json.load(sys.stdin):
        source = Path(item["cu"]).read_text()
        if item.get("entry"):
            out[item["cu"]] = [_default_skeleton(source, item["cu"])]
            continue
        if hasattr(skeleton, "skeleton_for"):  # one text for a kernel or a pipeline
            out[item["cu"]] = [skeleton.skeleton_for(source, item["kernels"], path=item["cu"])]
            continue
        texts = []
        for name in dict.fromkeys(item["kernels"]):
            sig = find_kernel(find_kernels(source), name)
            texts.append(skeleton.spec_skeleton(sig, parse_directives(source), source) if sig else "")
        out[item["cu"]] = texts
    json.dump(out, sys.stdout)


def _default_skeleton(source: str, path: str) -> str:
    """What `kernel-lsp spec FILE` writes with no flags: the launcher's entry skeleton where this
    checkout has them, else the pipeline its launcher runs, else the file's only kernel."""
    from kernel_lsp import skeleton
    from kernel_lsp.source import find_kernels, parse_directives

    try:
        from kernel_lsp.entry_skeleton import entry_skeleton, launcher_entries
    except ImportError:
        entry_skeleton = launcher_entries = None
    if launcher_entries is not None:
        entries = launcher_entries(source)
        if entries:
            return entry_skeleton(source, entries[0])
    pipeline = skeleton.files_pipeline(source) if hasattr(skeleton, "files_pipeline") else []
    if pipeline:
        return skeleton.skeleton_for(source, pipeline, path=path)
    kernels = [k for k in find_kernels(source) if k.definition]
    return skeleton.spec_skeleton(kernels[0], parse_directives(source), source) if kernels else ""


# --- the parent: score them against the truth ----------------------------------------------------


@dataclass
class ArgScore:
    name: str
    kind: bool
    shape: bool
    dtype: bool
    why: list[str] = field(default_factory=list)

    @property
    def right(self) -> bool:
        return self.kind and self.shape and self.dtype


@dataclass
class FileScore:
    path: str
    args: list[ArgScore]


def skeleton_texts(items: list[dict], checkout: Path) -> dict[str, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--emit"],
        input=json.dumps(items),
        capture_output=True,
        text=True,
        env=env,
        cwd=checkout,
        check=True,
    )
    return json.loads(done.stdout)


def load_text(text: str, folder: str, index: int):
    from kernel_lsp.spec import load_specs

    path = os.path.join(folder, f"skeleton_{index}.spec.py")
    Path(path).write_text(text)
    loaded = load_specs(path)
    return loaded.specs[0] if loaded.specs else None


def kind_of(arg) -> str:
    from kernel_lsp.spec import Alias, Scalar

    if isinstance(arg, Scalar):
        return "Scalar(size)" if arg.value is None else "Scalar(value)"
    if isinstance(arg, Alias):
        return f"Alias({arg.target})"
    return type(arg).__name__


def same_shape(truth, guess, truth_spec, guess_spec, rng: random.Random) -> bool:
    from kernel_lsp.spec import eval_shape

    names = set(truth_spec.size_names) | set(guess_spec.size_names) | set(guess_spec.derived_sizes or {})
    for _ in range(TRIALS):
        # Sizes the truth accepts (its sizes_valid: `k <= n` for a valid convolution).
        for _ in range(100):
            values = dict(zip(sorted(names), rng.sample(range(3, 90), len(names)), strict=True))
            if truth_spec.valid(truth_spec.complete({n: values[n] for n in truth_spec.size_names})):
                break
        try:
            expected = eval_shape(
                truth.shape, truth_spec.complete({n: values[n] for n in truth_spec.size_names})
            )
            got = eval_shape(guess.shape, guess_spec.complete(values))
        except Exception:
            return False
        if expected != got:
            return False
    return True


def score_file(truth_spec, guesses: list, rng: random.Random) -> list[ArgScore]:
    from kernel_lsp.spec import Alias, Scalar

    scores = []
    for name, truth in truth_spec.args.items():
        owner = next((g for g in guesses if g is not None and name in g.args), None)
        if owner is None:
            scores.append(ArgScore(name, False, False, False, ["missing from the skeleton"]))
            continue
        guess = owner.args[name]
        why = []
        kind = kind_of(guess) == kind_of(truth)
        if not kind:
            why.append(f"kind {kind_of(guess)}, truth {kind_of(truth)}")
        if isinstance(truth, Alias):
            dtype = shape = kind
        else:
            dtype = getattr(guess, "dtype", None) == truth.dtype
            if not dtype:
                why.append(f"dtype {getattr(guess, 'dtype', None)}, truth {truth.dtype}")
            if isinstance(truth, Scalar):
                shape = True
            else:
                shape = hasattr(guess, "shape") and same_shape(truth, guess, truth_spec, owner, rng)
                if not shape:
                    why.append(f"shape {getattr(guess, 'shape', None)!r}, truth {truth.shape!r}")
        scores.append(ArgScore(name, kind, shape, dtype, why))
    return scores


def score(corpus: Path, checkout: Path, seed: int = 0) -> list[FileScore]:
    from kernel_lsp.spec import load_specs

    truths = []
    for spec_path in sorted(corpus.rglob("*.spec.py")):
        loaded = load_specs(str(spec_path))
        if not loaded.ok:
            raise SystemExit(f"truth spec {spec_path} does not load: {loaded.diagnostics}")
        truths.append((str(spec_path).replace(".spec.py", ".cu"), loaded.specs[0]))
    texts = skeleton_texts(
        [{"cu": cu, "kernels": spec.kernels, "entry": spec.entry} for cu, spec in truths], checkout
    )
    rng = random.Random(seed)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for i, (cu, truth) in enumerate(truths):
            guesses = [load_text(t, folder, i * 10 + j) if t else None for j, t in enumerate(texts[cu])]
            results.append(FileScore(os.path.relpath(cu, corpus), score_file(truth, guesses, rng)))
    return results


def totals(results: list[FileScore]) -> dict[str, int]:
    args = [a for f in results for a in f.args]
    return {
        "args": len(args),
        "kind": sum(a.kind for a in args),
        "shape": sum(a.shape for a in args),
        "dtype": sum(a.dtype for a in args),
        "right": sum(a.right for a in args),
    }


def table(results: list[FileScore], verbose: bool = False) -> str:
    head = ["file", "args", "kind", "shape", "dtype", "right"]
    rows = []
    for f in results:
        t = totals([f])
        rows.append(
            [f.path, str(t["args"]), str(t["kind"]), str(t["shape"]), str(t["dtype"]), str(t["right"])]
        )
    t = totals(results)
    pct = {k: f"{t[k]} ({100 * t[k] / max(1, t['args']):.0f}%)" for k in ("kind", "shape", "dtype", "right")}
    rows.append(["total", str(t["args"]), pct["kind"], pct["shape"], pct["dtype"], pct["right"]])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [head, *rows]
    ]
    if verbose:
        for f in results:
            for a in f.args:
                if not a.right:
                    lines.append(f"  {f.path}: `{a.name}`: {'; '.join(a.why)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--emit", action="store_true", help=argparse.SUPPRESS)
    p.add_argument(
        "--corpus",
        type=Path,
        action="append",
        help="a folder of .cu files and specs (default: the four corpora)",
    )
    p.add_argument("--skeleton-from", type=Path, default=REPO, help="the checkout whose skeleton is scored")
    p.add_argument("--json", action="store_true")
    p.add_argument("--verbose", "-v", action="store_true")
    args = p.parse_args(argv)
    if args.emit:
        emit()
        return 0
    sys.path.insert(0, str(REPO))
    corpora = [c.resolve() for c in args.corpus or [CORPUS, LAUNCHERS, ENTRIES, HELDOUT]]
    found = {c: score(c, args.skeleton_from.resolve()) for c in corpora}
    if args.json:
        print(
            json.dumps(
                {
                    str(c): {
                        "totals": totals(results),
                        "files": {f.path: [a.__dict__ for a in f.args] for f in results},
                    }
                    for c, results in found.items()
                }
            )
        )
        return 0
    for c, results in found.items():
        print(
            f"skeleton of {args.skeleton_from.resolve()} against {len(results)} hand-written specs of {c.name}"
        )
        print(table(results, args.verbose))
        print()
    everything = [f for results in found.values() for f in results]
    t = totals(everything)
    print(f"arguments right with no edit: {t['right']} of {t['args']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

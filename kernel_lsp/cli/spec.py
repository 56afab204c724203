"""`kernel-lsp spec FILE [--kernel K | --pipeline K1,K2] [--force]`: write a spec skeleton beside a
.cu file, the command-line twin of the editor's code action. A file whose kernels one host
function launches in order gets one spec for that pipeline. Never overwrites a spec without
--force.

Exit codes: 0 written, 2 nothing written (no such file, no or ambiguous kernel, spec exists)."""

from __future__ import annotations

import argparse
import os
import sys

from ..compile import read_source
from ..safe_write import replace_file
from ..skeleton import files_pipeline, launcher_pipelines, skeleton_for, spec_skeleton
from ..source import KernelSignature, find_kernel, find_kernels, parse_directives
from ..spec import spec_path_for

EXIT_WRITTEN, EXIT_NOT_WRITTEN = 0, 2


def pick_kernel(kernels: list[KernelSignature], wanted: str | None) -> tuple[KernelSignature | None, str]:
    """The kernel named `wanted`, or the file's only kernel; else None and why. Shared with
    `optimize`, which also lets a one-kernel file go without --kernel."""
    names = sorted({k.name for k in kernels})
    if wanted is not None:
        match = next((k for k in kernels if k.name == wanted), None)
        return (match, "") if match else (None, f"no kernel `{wanted}` (found: {', '.join(names) or 'none'})")
    if len(names) == 1:
        return next(k for k in kernels if k.name == names[0]), ""
    if not names:
        return None, "no __global__ kernel found"
    return None, (
        f"the file has {len(names)} kernels ({', '.join(names)}); name one with --kernel, or several "
        "that run in order on shared buffers with --pipeline a,b"
    )


def _pipeline_hint(source: str) -> str:
    hints = [
        f"`{fn}` launches {' -> '.join(ks)}: --pipeline {','.join(ks)}"
        for fn, ks in launcher_pipelines(source)
    ]
    return f" ({'; '.join(hints)})" if hints else ""


def spec_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="kernel-lsp spec", description=__doc__.splitlines()[0])
    p.add_argument("file", help="the .cu file")
    p.add_argument(
        "--kernel",
        "-k",
        help="the kernel (default: the file's only kernel, or the pipeline its launcher runs)",
    )
    p.add_argument(
        "--pipeline",
        metavar="K1,K2",
        help="several kernels launched in this order on shared buffers: one spec for all of them",
    )
    p.add_argument("--force", action="store_true", help="overwrite an existing spec")
    args = p.parse_args(argv)
    if not args.file.endswith(".cu"):
        print(f"kernel-lsp spec: {args.file}: expected a .cu file", file=sys.stderr)
        return EXIT_NOT_WRITTEN
    source, problem = read_source(args.file)
    if source is None:
        print(
            f"kernel-lsp spec: {args.file}: {problem.message if problem else 'cannot read'}", file=sys.stderr
        )
        return EXIT_NOT_WRITTEN
    pipeline = [n.strip() for n in (args.pipeline or "").split(",") if n.strip()]
    if not pipeline and args.kernel is None:
        pipeline = files_pipeline(source)
    if pipeline:
        names = pipeline
        kernels = find_kernels(source)
        missing = [n for n in names if find_kernel(kernels, n) is None]
        if missing or not names:
            found = ", ".join(sorted({k.name for k in kernels})) or "none"
            print(
                f"kernel-lsp spec: {args.file}: no kernel {', '.join(missing)} (found: {found})",
                file=sys.stderr,
            )
            return EXIT_NOT_WRITTEN
        text, label = skeleton_for(source, names, args.file), "pipeline " + " -> ".join(names)
    else:
        kernel, why = pick_kernel(find_kernels(source), args.kernel)
        if kernel is None:
            print(f"kernel-lsp spec: {args.file}: {why}{_pipeline_hint(source)}", file=sys.stderr)
            return EXIT_NOT_WRITTEN
        text, label = spec_skeleton(kernel, parse_directives(source), source), f"kernel {kernel.name}"
    target = spec_path_for(args.file)
    try:
        # Never through a link at the spec's name (safe_write.py); without --force, the check for
        # an existing spec and the write are one step.
        replace_file(target, text, overwrite=args.force)
    except FileExistsError:
        print(f"kernel-lsp spec: {target} exists; not overwritten (use --force)", file=sys.stderr)
        return EXIT_NOT_WRITTEN
    except OSError as e:
        print(f"kernel-lsp spec: cannot write {target}: {e.strerror or e}", file=sys.stderr)
        return EXIT_NOT_WRITTEN
    print(f"wrote {os.path.relpath(target)} for {label}: fill in the reference and check the shapes")
    return EXIT_WRITTEN

"""`kernel-lsp spec FILE [--kernel K] [--force]`: write a spec skeleton beside a .cu file, the
command-line twin of the editor's code action. Never overwrites a spec without --force.

Exit codes: 0 written, 2 nothing written (no such file, no or ambiguous kernel, spec exists)."""

from __future__ import annotations

import argparse
import os
import sys

from ..compile import read_source
from ..safe_write import replace_file
from ..skeleton import spec_skeleton
from ..source import KernelSignature, find_kernels, parse_directives
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
    return None, f"the file has {len(names)} kernels ({', '.join(names)}); name one with --kernel"


def spec_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="kernel-lsp spec", description=__doc__.splitlines()[0])
    p.add_argument("file", help="the .cu file")
    p.add_argument("--kernel", "-k", help="the kernel (default: the file's only kernel)")
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
    kernel, why = pick_kernel(find_kernels(source), args.kernel)
    if kernel is None:
        print(f"kernel-lsp spec: {args.file}: {why}", file=sys.stderr)
        return EXIT_NOT_WRITTEN
    target = spec_path_for(args.file)
    text = spec_skeleton(kernel, parse_directives(source), source)
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
    print(
        f"wrote {os.path.relpath(target)} for kernel {kernel.name}: fill in the reference and check the shapes"
    )
    return EXIT_WRITTEN

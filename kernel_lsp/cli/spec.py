"""`kernel-lsp spec FILE [--entry F | --kernel K | --pipeline K1,K2] [--force]`: write a spec skeleton
beside a .cu file, the command-line twin of the editor's code action. A file with a launcher (an
`extern "C"` function, or a host function that launches kernels, with a C signature) gets an entry
spec for it (`Spec(entry=...)`: its parameters, the buffers its kernels read and write, its
guards as `sizes_valid`); `--kernel` writes one kernel's spec instead, `--pipeline` one for kernels
that run in order. A file without a launcher whose kernels one host function launches in order
gets one spec for that pipeline. Never overwrites a spec without --force.

Exit codes: 0 written, 2 nothing written (no such file, no or ambiguous kernel, spec exists)."""

from __future__ import annotations

import argparse
import os
import sys

from ..api.skeletons import (
    entry_skeleton,
    files_pipeline,
    launcher_entries,
    launcher_pipelines,
    skeleton_for,
    spec_skeleton,
)
from ..api.sources import (
    KernelSignature,
    find_host_function,
    find_kernel,
    find_kernels,
    parse_directives,
    read_source,
    replace_file,
    spec_path_for,
)
from .flags import doc_description

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


def _kernel_skeleton(
    args: argparse.Namespace, source: str, pipeline: list[str], entries: list[str]
) -> tuple[str, str] | None:
    """A kernel's or a pipeline's skeleton and its label; None (said why) when there is none."""
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
            return None
        return skeleton_for(source, names, args.file), "pipeline " + " -> ".join(names)
    kernel, why = pick_kernel(find_kernels(source), args.kernel)
    if kernel is None:
        fn = find_host_function(source, args.kernel) if args.kernel else None
        if fn is not None and fn.definition:
            why += f"; `{args.kernel}` is a host function: --entry {args.kernel} writes a spec for it"
        elif entries and args.kernel:
            why += f"; the file's launchers are specs too: --entry {entries[0]}"
        print(f"kernel-lsp spec: {args.file}: {why}{_pipeline_hint(source)}", file=sys.stderr)
        return None
    return spec_skeleton(kernel, parse_directives(source), source), f"kernel {kernel.name}"


def spec_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="kernel-lsp spec", description=doc_description(__doc__))
    p.add_argument("file", help="the .cu file")
    p.add_argument(
        "--entry",
        "-e",
        metavar="FUNCTION",
        help="the host function a program calls (default: the file's launcher, when it has one)",
    )
    p.add_argument(
        "--kernel",
        "-k",
        help="one kernel (default without a launcher: the file's only kernel, or the pipeline its launcher runs)",
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
    entries = launcher_entries(source)
    entry = args.entry
    if entry is None and not pipeline and args.kernel is None and entries:
        extern_c = [e for e in entries if (f := find_host_function(source, e)) is not None and f.extern_c]
        chosen = extern_c if len(extern_c) == 1 else entries
        if len(chosen) > 1:
            print(
                f"kernel-lsp spec: {args.file}: the file has {len(entries)} launchers ({', '.join(entries)}); "
                f"name the one your program calls with --entry, or a kernel with --kernel{_pipeline_hint(source)}",
                file=sys.stderr,
            )
            return EXIT_NOT_WRITTEN
        entry = chosen[0]
    if entry is not None:
        fn = find_host_function(source, entry)
        if fn is None or not fn.definition:
            found = f" (launchers: {', '.join(entries)})" if entries else " (it has no launcher)"
            print(
                f"kernel-lsp spec: {args.file}: no host function `{entry}` with a body{found}",
                file=sys.stderr,
            )
            return EXIT_NOT_WRITTEN
        text, label = entry_skeleton(source, entry), f"entry {entry}"
    else:
        if not pipeline and args.kernel is None:
            pipeline = files_pipeline(source)
        text_label = _kernel_skeleton(args, source, pipeline, entries)
        if text_label is None:
            return EXIT_NOT_WRITTEN
        text, label = text_label
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

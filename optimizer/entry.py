"""The optimizer at the level of a host entry (`Spec(entry=...)`): a candidate may rewrite the
kernels and the launcher (rename, add or remove kernels, change grids and blocks, add
temporaries) as long as the entry keeps its signature, since the user's program calls it. What
the loop needs for that: the signature check, the kernels a file's launcher launches, and the
launches' shapes at the spec's sizes (evaluator.py: the launch-limit check, resources, occupancy).

Text only (the host-launch reader), never raises.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kernel_lsp.host_entry import HostFunction, entry_abi, find_host_function
from kernel_lsp.host_launch.launcher import entry_kernels
from kernel_lsp.host_launch.occupancy import host_code
from kernel_lsp.spec import Scalar, Spec, launch_dims

from .tunables import define_values

Shape = tuple[tuple[int, int, int], tuple[int, int, int], int]


def _normal(c_type: str) -> str:
    return " ".join(
        re.sub(r"\b(volatile|__restrict__|__restrict|restrict)\b", " ", c_type).replace("*", " * ").split()
    )


def signature_problem(candidate: str, original: str, entry: str) -> str | None:
    """Why the candidate's entry cannot stand in for the original's (None: it can): it is
    missing, or its linkage, return type, parameter names or types changed. The user's program
    calls the entry, and the spec's args are keyed by its parameter names."""
    before = find_host_function(original, entry)
    after = find_host_function(candidate, entry)
    if before is None:
        return None  # the spec's own error, reported for the original
    keep = f"keep `{before.signature}` as it is"
    if after is None or not after.definition:
        launchers = [
            f.name
            for f in host_code(candidate).functions
            if f.launches and not f.is_kernel and f.name != entry
        ]
        found = f" (it defines {', '.join(f'`{n}`' for n in launchers)})" if launchers else ""
        return f"the candidate does not define the entry `{entry}`{found}: {keep}"
    changes = []
    if before.extern_c and not after.extern_c:
        changes.append('it lost its `extern "C"` linkage')
    if _normal(before.return_type) != _normal(after.return_type):
        changes.append(f"it returns `{after.return_type}` instead of `{before.return_type}`")
    if len(before.params) != len(after.params):
        changes.append(f"it takes {len(after.params)} parameters instead of {len(before.params)}")
    else:
        for old, new in zip(before.params, after.params, strict=True):
            if _normal(old.type) != _normal(new.type) and not _same_abi(old.type, new.type, before, after):
                changes.append(f"`{old.type} {old.name}` is now `{new.type} {new.name}`")
            elif old.name != new.name:
                changes.append(
                    f"parameter `{old.name}` is now named `{new.name}` (the spec's args use the names)"
                )
    if after.templated:
        changes.append("it is a template")
    if not changes:
        return None
    return f"the entry `{entry}` changed its signature: {'; '.join(changes)}; {keep}"


def _same_abi(old: str, new: str, before: HostFunction, after: HostFunction) -> bool:
    """`const float* x` vs `const float* __restrict__ x`, `int` vs `int32_t`: the same C ABI."""
    a = {p.type: k for p, k in zip(before.params, entry_abi(before).args, strict=False)}
    b = {p.type: k for p, k in zip(after.params, entry_abi(after).args, strict=False)}
    ka, kb = a.get(old), b.get(new)
    return ka is not None and kb is not None and (ka.code, ka.dtype) == (kb.code, kb.dtype)


def entry_scope(
    spec: Spec, sizes: Mapping[str, Any], source: str, defines: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Names a launch expression of the entry may use at `sizes`: the file's integer constants,
    the sizes, and each scalar parameter's value."""
    scope: dict[str, Any] = {**define_values(source, defines), **dict(sizes)}
    for name, arg in spec.args.items():
        if isinstance(arg, Scalar):
            try:
                scope[name] = spec.scalar_value(name, sizes).item()
            except Exception:  # a value the spec computes wrongly is the spec check's to report
                continue
    return scope


def entry_launch_shapes(
    source: str, spec: Spec, sizes: Mapping[str, Any], defines: tuple[str, ...] = ()
) -> dict[str, Shape]:
    """{kernel: (grid, block, smem)} of the entry's launches that evaluate at `sizes` (the last
    launch of a kernel launched twice); a launch that does not (a grid from the occupancy API)
    is left out."""
    fn = host_code(source, defines).function(spec.entry or spec.kernel)
    if fn is None:
        return {}
    scope = entry_scope(spec, sizes, source, defines)
    out: dict[str, Shape] = {}
    for x in fn.launches:
        grid, block, smem = x.grid.python(), x.block.python(), x.smem.python()
        if block is None:
            continue
        try:
            out[x.kernel] = launch_dims(grid or "1", block, smem or "0", scope)
        except Exception:  # SpecError, or a NameError over a name it does not know
            continue
    return out


_ENTRY_NAME = re.compile(r"""\bentry\s*=\s*["']([A-Za-z_]\w*)["']""")


def named_entries(spec_text: str, source: str) -> list[str]:
    """The entries a spec names (read as text, not run) that `source` defines."""
    names = dict.fromkeys(_ENTRY_NAME.findall(spec_text))
    return [n for n in names if (fn := find_host_function(source, n)) is not None and fn.definition]


def entries_at(source: str, spec_text: str, line: int) -> list[str]:
    """The entries a spec names (read as text: a spec is the user's code, and a code action does
    not run it) that the 1-based `line` of `source` belongs to: inside the entry's own function,
    or inside a kernel it launches."""
    from .file_items import top_items

    names = named_entries(spec_text, source)
    if not names:
        return []
    items = top_items(source)
    here = next(
        (it for it in items if source.count("\n", 0, it.start) + 1 <= line <= source.count("\n", 0, it.end)),
        None,
    )
    if here is None or here.kind not in ("host", "kernel", "block"):
        return []
    out = []
    for name in names:
        fn = find_host_function(source, name)
        assert fn is not None
        holds_entry = source.count("\n", 0, here.start) + 1 <= fn.line <= source.count("\n", 0, here.end)
        if (here.kind in ("host", "block") and holds_entry) or (
            here.kind == "kernel" and here.name in entry_kernels(source, name)
        ):
            out.append(name)
    return out

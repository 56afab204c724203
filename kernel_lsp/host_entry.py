"""A host entry: a host function of a `.cu` that a spec names (`Spec(entry="vector_add_bf16")`)
and the GPU worker calls through ctypes, with device buffers and scalars built from the spec.

Only C-compatible signatures can be called that way: pointers, integers, floats and
`cudaStream_t` by value; the return type void or a scalar (a non-zero `int`/`cudaError_t` is a
failure). `entry_abi` says for each parameter how it is passed (`ArgKind`), or why it cannot be.

`find_host_function` reads one function's signature from the text (comments blanked, no
compiling). It returns the same fields as the host-launch parser's functions (name, params,
return type, line, extern "C"), so either can feed `entry_abi` and the spec checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .lexer import blank_comments, blank_comments_keep_strings, matching
from .source import Param, parse_params
from .spec.dtypes import c_type_dtype

STREAM_TYPES = frozenset({"cudaStream_t", "CUstream"})
# How each spec dtype is passed by value (the worker maps these codes to ctypes types).
SCALAR_CODES = {
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float32": "f32",
    "float64": "f64",
    # __half / __nv_bfloat16 by value: one 16-bit integer class (the SysV ABI passes it in a
    # general register), so the worker passes the value's bits.
    "float16": "h16",
    "bfloat16": "b16",
}
_BOOL = {"bool", "_Bool"}
_QUALIFIERS = re.compile(r"\b(static|inline|__inline__|__forceinline__|__host__|extern|constexpr|noexcept)\b")


@dataclass(frozen=True)
class HostFunction:
    """A host function's signature as written (no body, no launches)."""

    name: str
    params: tuple[Param, ...]
    return_type: str
    line: int
    col: int = 1
    extern_c: bool = False
    templated: bool = False
    definition: bool = True

    @property
    def signature(self) -> str:
        """`extern "C" void f(const float* x, int n)`, as the optimizer's prompts and messages show it."""
        params = ", ".join(f"{p.type} {p.name}".strip() for p in self.params)
        return f"{'extern ' + chr(34) + 'C' + chr(34) + ' ' if self.extern_c else ''}{self.return_type} {self.name}({params})"


@dataclass(frozen=True)
class ArgKind:
    """How one parameter crosses the C ABI: `code` is "ptr", "stream" or a SCALAR_CODES value;
    `dtype` the spec dtype a scalar or a pointer's elements hold (None where the type does not
    say, e.g. `void*`)."""

    name: str
    code: str
    dtype: str | None
    c_type: str


@dataclass(frozen=True)
class EntryAbi:
    args: tuple[ArgKind, ...]
    returns: str  # "void", "status" (non-zero int or cudaError_t is a failure), "value" (ignored)
    problems: tuple[str, ...] = ()

    @property
    def stream_param(self) -> str | None:
        return next((a.name for a in self.args if a.code == "stream"), None)


def _extern_c_at(code: str, offset: int) -> bool:
    """Whether `offset` lies inside an `extern "C" { ... }` block."""
    return any(
        matching(code, m.end() - 1, end=offset) < 0 for m in re.finditer(r'extern\s+"C"\s*\{', code[:offset])
    )


def find_host_function(source: str, name: str) -> HostFunction | None:
    """The definition of host function `name` (else its last declaration), or None. Kernels and
    device functions are not host functions; a template is found but marked `templated`."""
    code = blank_comments(source)
    with_strings = blank_comments_keep_strings(source)  # `extern "C"` keeps its quotes
    found: list[HostFunction] = []
    for m in re.finditer(rf"(?<![\w:.>]){re.escape(name)}\s*\(", code):
        start = max(
            code.rfind(";", 0, m.start()), code.rfind("}", 0, m.start()), code.rfind("{", 0, m.start())
        )
        head = code[start + 1 : m.start()]
        head_lines = [ln for ln in head.splitlines() if not ln.lstrip().startswith("#")]
        head = " ".join(" ".join(head_lines).split())
        if not head or "=" in head or "__global__" in head or "return" in head.split():
            continue
        if "__device__" in head and "__host__" not in head:
            continue
        open_paren = m.end() - 1
        close = matching(code, open_paren)
        if close < 0:
            continue
        after = code[close + 1 :].lstrip()
        after = re.sub(r"^(noexcept|const|override|final|throw\s*\(\s*\))\s*", "", after)
        if not after.startswith(("{", ";")):
            continue
        raw_head = with_strings[start + 1 : m.start()]
        extern_c = bool(re.search(r'extern\s+"C"', with_strings[start + 1 : m.start()])) or _extern_c_at(
            with_strings, m.start()
        )
        templated = bool(re.search(r"\btemplate\s*<", head))
        return_type = _QUALIFIERS.sub(" ", re.sub(r'extern\s+"C"|\btemplate\s*<[^>]*>', " ", raw_head))
        return_type = " ".join(re.sub(r"^\s*#[^\n]*", " ", return_type, flags=re.M).split())
        params = parse_params(code[open_paren + 1 : close])
        line = source.count("\n", 0, m.start()) + 1
        col = m.start() - (source.rfind("\n", 0, m.start()) + 1) + 1
        found.append(
            HostFunction(
                name, params, return_type or "int", line, col, extern_c, templated, after.startswith("{")
            )
        )
    if not found:
        return None
    chosen = next((f for f in found if f.definition), found[-1])
    # A function declared extern "C" once keeps C linkage at its definition.
    return replace(chosen, extern_c=any(f.extern_c for f in found))


def _scalar_code(c_type: str) -> tuple[str | None, str | None]:
    base = " ".join(re.sub(r"\b(const|volatile)\b", " ", c_type).split())
    if base in _BOOL:
        return "u8", "uint8"
    dtype = c_type_dtype(c_type)
    if dtype is None or re.fullmatch(r"u?(char|short|int|long|longlong)[1-4]|float[1-4]|double[1-4]", base):
        return None, None  # unknown, or a vector type (float4, int2) by value
    return SCALAR_CODES.get(dtype), dtype


def entry_abi(fn: HostFunction) -> EntryAbi:
    """How each parameter and the result cross the C ABI, with a problem per parameter that
    cannot (references, classes, templates, vector types by value)."""
    problems: list[str] = []
    if fn.templated:
        problems.append(
            f'`{fn.name}` is a template: name a C-compatible wrapper (extern "C") that calls one instance'
        )
    args: list[ArgKind] = []
    for p in fn.params:
        t = p.type
        base = p.base_type
        if "&" in t or "..." in t or "[" in t or "<" in t or "::" in base:
            problems.append(
                f"parameter `{t} {p.name}` of `{fn.name}` cannot be passed from a spec (only pointers, "
                "integers, floats and cudaStream_t)"
            )
            continue
        if base in STREAM_TYPES and "*" not in t:
            args.append(ArgKind(p.name, "stream", None, t))
        elif p.is_pointer:
            args.append(ArgKind(p.name, "ptr", c_type_dtype(t), t))
        else:
            code, dtype = _scalar_code(t)
            if code is None:
                problems.append(
                    f"parameter `{t} {p.name}` of `{fn.name}` is not a C scalar the worker can pass "
                    "(pointers, integers, floats, cudaStream_t)"
                )
                continue
            args.append(ArgKind(p.name, code, dtype, t))
    ret = " ".join(re.sub(r"\b(const|volatile)\b", " ", fn.return_type).split())
    if ret == "void":
        returns = "void"
    elif "*" not in ret and (
        ret == "cudaError_t" or c_type_dtype(ret) in ("int32", "uint32", "int64", "uint64")
    ):
        returns = "status"
    else:
        returns = "value"
    return EntryAbi(tuple(args), returns, tuple(problems))

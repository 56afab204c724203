"""What the engine reads from CUDA source text without compiling it: kernel signatures, the
`// kernel-lsp:` directives and `#include` lines. Parsing never fails: each function returns what it
understood, and directives it could not read come back as problems with their line."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from .lexer import (
    blank_comments,
    blank_comments_keep_strings,
    matching,
    matching_back,
    split_top,
    top_level_spans,
)


@dataclass(frozen=True)
class Param:
    type: str  # e.g. "const float* __restrict__"
    name: str

    @property
    def is_pointer(self) -> bool:
        return "*" in self.type

    @property
    def is_const(self) -> bool:
        return bool(re.search(r"\bconst\b", self.type.split("*")[0]))

    @property
    def base_type(self) -> str:
        """The element or scalar type without qualifiers: "float", "__nv_bfloat16", "int"."""
        t = re.sub(r"\b(const|volatile|__restrict__|__restrict|restrict)\b", " ", self.type)
        return " ".join(t.replace("*", " ").replace("&", " ").split())


@dataclass(frozen=True)
class KernelSignature:
    name: str
    params: tuple[Param, ...]
    line: int  # 1-based line of the kernel's name
    col: int  # 1-based column of the kernel's name
    templated: bool = False
    extern_c: bool = False
    definition: bool = True  # False for a declaration or an explicit instantiation
    namespace: str = ""  # the enclosing namespaces, "a::b"; "" at file scope


_GLOBAL = re.compile(r"__global__")
_IDENT = re.compile(r"[A-Za-z_]\w*")


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col


def _parse_param(text: str, index: int) -> Param:
    text = text.split("=")[0].strip()  # default arguments
    m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\]\s*)*$", text)
    if m and m.start(1) > 0 and text[: m.start(1)].strip():
        return Param(type=" ".join(text[: m.start(1)].split()), name=m.group(1))
    return Param(type=" ".join(text.split()), name=f"arg{index}")  # unnamed parameter


def parse_params(text: str) -> tuple[Param, ...]:
    """The parameters of a parameter list's text (between its parentheses, comments blanked):
    `const float* a, int n = 4` -> (a: const float*, n: int); `void` and `` -> ()."""
    parts = [p for p in split_top(text) if p and p != "void"]
    return tuple(_parse_param(p, i) for i, p in enumerate(parts))


def _find_kernels(source: str) -> list[KernelSignature]:
    """Every `__global__` function declared or defined in the file, in order."""
    code = blank_comments(source)
    kernels: list[KernelSignature] = []
    for m in _GLOBAL.finditer(code):
        open_paren = code.find("(", m.end())
        if open_paren < 0:
            continue
        # The name is the last identifier before "(", skipping __launch_bounds__(...) and the like.
        head = code[m.end() : open_paren]
        while True:
            # `name<float>(`: an explicit instantiation; the name is before the template arguments.
            names = list(_IDENT.finditer(_without_trailing_template_args(head)))
            if not names:
                break
            name = names[-1].group(0)
            if name.startswith("__launch_bounds__") or name in ("__cluster_dims__",):
                close = matching(code, open_paren)
                if close < 0:
                    break
                open_paren = code.find("(", close + 1)
                head = code[m.end() : open_paren] if open_paren > 0 else ""
                continue
            break
        if not names:
            continue
        last = names[-1]
        if last.group(0).startswith("__launch_bounds__"):
            continue
        close = matching(code, open_paren)
        if close < 0:
            continue
        params = parse_params(code[open_paren + 1 : close])
        name_offset = m.end() + last.start()
        line, col = _line_col(source, name_offset)
        before = code[max(0, m.start() - 300) : m.start()]
        templated = bool(re.search(r"template\s*<[^;{}]*>\s*$", before))
        extern_c = bool(re.search(r'extern\s+"C"\s*(\{[^}]*)?$', source[max(0, m.start() - 300) : m.start()]))
        is_definition = code[close + 1 :].lstrip().startswith("{")
        kernels.append(
            KernelSignature(
                last.group(0),
                params,
                line,
                col,
                templated,
                extern_c,
                is_definition,
                _namespace_at(code, m.start()),
            )
        )
    # Declarations and explicit instantiations name a kernel again: keep its definitions (or, with
    # none in this file, its last declaration). Overloads (other parameter types) are kernels of
    # their own; a definition repeated with the same types (#if/#else branches) counts once, the last.
    defined = {k.name for k in kernels if k.definition}
    final: dict[tuple, KernelSignature] = {}
    for k in kernels:
        if k.definition:
            final[(k.namespace, k.name, tuple(" ".join(p.type.split()) for p in k.params))] = k
        elif k.name not in defined:
            final[(k.name,)] = k
    kept = {id(k) for k in final.values()}
    return [k for k in kernels if id(k) in kept]


def kernel_base_name(name: str) -> str:
    """The function name a kernel is declared under: `ns::scale<float>` -> `scale`."""
    return _without_trailing_template_args(name).strip().rpartition("::")[2].strip()


def find_kernel(sigs: list[KernelSignature], name: str) -> KernelSignature | None:
    """The definition of `name`: a plain kernel, a template instance (`scale<float>`) or a
    namespace-qualified one (`a::k`, when two namespaces have a `k`)."""
    base = kernel_base_name(name)
    scope = _without_trailing_template_args(name).strip().rpartition("::")[0]
    candidates = [s for s in sigs if s.name == base and (not scope or s.namespace.endswith(scope))]
    return next((s for s in candidates if s.definition), None) or next(iter(candidates), None)


_NAMESPACE_OPEN = re.compile(r"\bnamespace\s+([A-Za-z_][\w:]*)?\s*\{|[{}]")


def _namespace_at(code: str, offset: int) -> str:
    """The namespaces enclosing `offset` ("a::b"), from `namespace x {` and brace depth in the
    comment-free code; anonymous namespaces add nothing a user writes."""
    stack: list[str | None] = []  # a name for a namespace's brace, None for any other brace
    for m in _NAMESPACE_OPEN.finditer(code, 0, offset):
        text = m.group(0)
        if text == "}":
            if stack:
                stack.pop()
        elif text == "{":
            stack.append(None)
        else:
            stack.append(m.group(1) or "")
    return "::".join(n for n in stack if n)


def _without_trailing_template_args(head: str) -> str:
    text = head.rstrip()
    if not text.endswith(">"):
        return head
    open_ = matching_back(text, len(text) - 1)
    return text[:open_] if open_ >= 0 else head


# --- directives -------------------------------------------------------------------------------

_DIRECTIVE = re.compile(r"//\s*kernel-lsp:\s*(\w+)\s*(.*?)\s*$")


@dataclass(frozen=True)
class LaunchDirective:
    """`// kernel-lsp: launch <kernel> grid=<expr> block=<expr> [smem=<expr>]`.
    Expressions are Python expressions over the spec's sizes (and cdiv, min, max); a tuple such as
    `(cdiv(n, 32), m)` is a 2-D or 3-D grid."""

    kernel: str
    grid: str
    block: str
    smem: str = "0"
    line: int = 0
    # "" for a launch comment; for a launch read from host code (kernel_lsp.host_launch.spec_launch),
    # where it is: "the launch at saxpy.cu:88 in `launch_saxpy`".
    origin: str = ""

    @property
    def described(self) -> str:
        return self.origin or f"launch line {self.line} of the .cu"


@dataclass(frozen=True)
class TuneDirective:
    """`// kernel-lsp: tune BLOCK=64,128,256 VEC=1,2,4`: compile-time parameters the tuner may set
    (each becomes -DNAME=value)."""

    params: tuple[tuple[str, tuple[str, ...]], ...]
    line: int = 0


@dataclass(frozen=True)
class DirectiveProblem:
    line: int
    message: str


@dataclass
class Directives:
    launches: list[LaunchDirective] = field(default_factory=list)
    tunables: list[TuneDirective] = field(default_factory=list)
    problems: list[DirectiveProblem] = field(default_factory=list)
    # Kernel -> why its launches in host code give a spec no launch (when none does).
    host_notes: dict[str, str] = field(default_factory=dict)

    def launches_of(self, kernel: str) -> list[LaunchDirective]:
        """The launch lines of `kernel`; a template instance (`scale<float>`) without lines of its
        own uses those of its template (`scale`)."""
        exact = [d for d in self.launches if d.kernel == kernel]
        base = kernel_base_name(kernel)
        if exact or base == kernel:
            return exact
        return [d for d in self.launches if d.kernel == base]

    @property
    def tune_space(self) -> dict[str, tuple[str, ...]]:
        space: dict[str, tuple[str, ...]] = {}
        for t in self.tunables:
            space.update(dict(t.params))
        return space


def _split_assignments(text: str) -> tuple[list[str], dict[str, str]]:
    """'k grid=(cdiv(n, 32), m) block=256' -> (['k'], {'grid': '(cdiv(n, 32), m)', 'block': '256'}),
    splitting on spaces outside brackets."""
    tokens = [text[a:b] for a, b in top_level_spans(text, (" ", "\t", "\f", "\v")) if a < b]
    # Re-join "grid = 3" written with spaces around "=".
    joined: list[str] = []
    for tok in tokens:
        if joined and (tok.startswith("=") or joined[-1].endswith("=")):
            joined[-1] += tok
        else:
            joined.append(tok)
    words, assigns = [], {}
    for tok in joined:
        if "=" in tok:
            key, _, value = tok.partition("=")
            assigns[key.strip()] = value.strip()
        else:
            words.append(tok)
    return words, assigns


def _parse_directives(source: str) -> Directives:
    out = Directives()
    for lineno, text in enumerate(source.splitlines(), start=1):
        if "kernel-lsp:" not in text:
            continue
        m = _DIRECTIVE.search(text)
        if not m:
            continue
        verb, rest = m.group(1), m.group(2)
        words, assigns = _split_assignments(rest)
        if verb == "launch":
            missing = [k for k in ("grid", "block") if k not in assigns]
            if len(words) != 1 or missing:
                out.problems.append(
                    DirectiveProblem(
                        lineno,
                        "launch directive must read `// kernel-lsp: launch <kernel> grid=<expr> "
                        "block=<expr> [smem=<expr>]`"
                        + (f"; missing {', '.join(missing)}" if missing else ""),
                    )
                )
                continue
            unknown = set(assigns) - {"grid", "block", "smem"}
            if unknown:
                out.problems.append(
                    DirectiveProblem(lineno, f"unknown launch field(s): {', '.join(sorted(unknown))}")
                )
            out.launches.append(
                LaunchDirective(words[0], assigns["grid"], assigns["block"], assigns.get("smem", "0"), lineno)
            )
        elif verb == "tune":
            params = []
            for key, value in assigns.items():
                values = tuple(v.strip() for v in value.split(",") if v.strip())
                if not re.fullmatch(r"[A-Za-z_]\w*", key) or not values:
                    out.problems.append(DirectiveProblem(lineno, f"cannot read tunable `{key}={value}`"))
                    continue
                params.append((key, values))
            if words or not params:
                out.problems.append(
                    DirectiveProblem(lineno, "tune directive must read `// kernel-lsp: tune NAME=v1,v2 ...`")
                )
            if params:
                out.tunables.append(TuneDirective(tuple(params), lineno))
        else:
            out.problems.append(
                DirectiveProblem(lineno, f"unknown kernel-lsp directive `{verb}` (expected launch or tune)")
            )
    return out


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)


@dataclass(frozen=True)
class IncludeLine:
    target: str
    line: int
    quoted: bool  # "..." rather than <...>


def _find_includes(source: str) -> list[IncludeLine]:
    code = blank_comments_keep_strings(source)
    return [
        IncludeLine(m.group(2).strip(), code.count("\n", 0, m.start()) + 1, m.group(1) == '"')
        for m in _INCLUDE.finditer(code)
    ]


# --- parsed once ----------------------------------------------------------------------------------


class ParsedSource:
    """A source text and what the engine reads from it, each parsed once on first use: the spec
    checker, the tuner, occupancy, hover and the optimizer all ask for the same text's kernels
    and directives, so they share one parse (and so cannot disagree)."""

    def __init__(self, text: str) -> None:
        self.text = text

    @functools.cached_property
    def kernels(self) -> tuple[KernelSignature, ...]:
        return tuple(_find_kernels(self.text))

    @functools.cached_property
    def directives(self) -> Directives:
        return _parse_directives(self.text)

    @functools.cached_property
    def includes(self) -> tuple[IncludeLine, ...]:
        return tuple(_find_includes(self.text))


@functools.lru_cache(maxsize=16)
def parse(text: str) -> ParsedSource:
    """The parsed form of `text`; the same text asked again (a re-save, another feature, the
    optimizer's next gate) is not parsed again."""
    return ParsedSource(text)


def find_kernels(source: str) -> list[KernelSignature]:
    """Every `__global__` function declared or defined in the file, in order."""
    return list(parse(source).kernels)


def parse_directives(source: str) -> Directives:
    """The `// kernel-lsp:` launch and tune directives (a copy the caller may change)."""
    d = parse(source).directives
    return Directives(list(d.launches), list(d.tunables), list(d.problems))


def find_includes(source: str) -> list[IncludeLine]:
    return list(parse(source).includes)

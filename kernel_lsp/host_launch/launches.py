"""Kernel launches in host code: `k<<<grid, block, smem, stream>>>(args)` (templated kernels,
`dim3(...)` configurations, launches over several lines, launches in macros' bodies),
`cudaLaunchKernel`, `cudaLaunchCooperativeKernel` and `cudaLaunchKernelEx` (its config's fields
assigned before), and `__launch_bounds__`. Each launch's grid, block and dynamic shared memory
are resolved by `resolve.Resolver`; `parse_host` never raises: what it cannot read is a reason on
the launch, or a problem of the whole file."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..constants import Constants, read_constants, without_preprocessor
from ..constants.cexpr import Binary, Call, Cast, Name, Unary, int_value, parse
from ..lexer import blank_comments, matching, matching_back, parenthesized, split_top, top_level_end
from ..source import KernelSignature, find_kernels
from .headers import HeaderStamp, with_headers
from .model import (
    Guard,
    HostCall,
    HostCode,
    HostFunction,
    HostLaunch,
    LaunchArgument,
    LaunchBounds,
    LaunchShape,
)
from .resolve import Place, Resolver, statement_at
from .scan import (
    FunctionSpan,
    Lines,
    Statement,
    bindings,
    find_functions,
    statements,
    template_params,
)

API_LAUNCHES = (
    "cudaLaunchKernel",
    "cudaLaunchCooperativeKernel",
    "cudaLaunchKernelExC",
    "cudaLaunchKernelEx",
)
_API = re.compile(r"\b(?P<api>" + "|".join(API_LAUNCHES) + r")\s*(?:<[^<>;()]*>)?\s*\(")
_CUDA_CALL = re.compile(
    r"\b(cuda(?:Malloc\w*|Memset\w*|Memcpy\w*|Free\w*|DeviceSynchronize|StreamSynchronize))\s*\("
)
_DEFINE = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)(?P<params>\([^)\n]*\))?(?P<body>(?:[^\n\\]|\\.|\\\n)*)",
    re.M,
)
_LAUNCH_HINT = re.compile(r"<<<|\bcudaLaunch(?:Cooperative)?Kernel")
_CHEVRON = re.compile(r"<<<")


@dataclass(frozen=True)
class _Site:
    """A launch as found in text, before resolution; offsets into that text."""

    kind: str
    callee: str  # the kernel as written, template arguments included
    offset: int  # of the callee
    config: tuple[str, ...]  # <<<grid, block, smem, stream>>>, or the API call's arguments
    args: tuple[str, ...] | None  # the kernel's arguments (None: given as an array)


def find_sites(text: str, lo: int = 0, hi: int | None = None) -> list[_Site]:
    """Every launch between `lo` and `hi` of comment-free `text`, in order."""
    hi = len(text) if hi is None else hi
    sites: list[_Site] = []
    for m in _CHEVRON.finditer(text, lo, hi):
        callee_start = _callee_start(text, m.start())
        if callee_start < 0:
            continue
        end = _chevron_end(text, m.end(), hi)
        if end < 0:
            continue
        config = tuple(split_top(text[m.end() : end]))
        rest = end + 3
        while rest < hi and text[rest].isspace():
            rest += 1
        args: tuple[str, ...] = ()
        if rest < hi and text[rest] == "(":
            close = matching(text, rest, hi)
            if close > 0:
                args = tuple(a for a in split_top(text[rest + 1 : close]) if a)
        callee = " ".join(text[callee_start : m.start()].split())
        sites.append(_Site("<<<>>>", callee, callee_start, config, args))
    for m in _API.finditer(text, lo, hi):
        open_ = m.end() - 1
        close = matching(text, open_, hi)
        if close < 0:
            continue
        call = tuple(split_top(text[open_ + 1 : close]))
        api = m.group("api")
        kernel = call[1] if api.startswith("cudaLaunchKernelEx") and len(call) > 1 else call[0]
        callee = _callee_of_pointer(kernel)
        if not callee:
            continue
        kind = "cudaLaunchKernelEx" if api.startswith("cudaLaunchKernelEx") else api
        sites.append(
            _Site(kind, callee, m.start(), call, tuple(call[2:]) if api == "cudaLaunchKernelEx" else None)
        )
    sites.sort(key=lambda s: s.offset)
    return sites


def _callee_start(text: str, chevron: int) -> int:
    """Where the kernel's name before `<<<` starts (`ns::k<T, 256>` included), or -1."""
    i = chevron - 1
    while i >= 0 and text[i].isspace():
        i -= 1
    if i >= 0 and text[i] == ">":  # template arguments
        i = matching_back(text, i) - 1
        while i >= 0 and text[i].isspace():
            i -= 1
    end = i + 1
    while i >= 0 and (text[i].isalnum() or text[i] in "_:"):
        i -= 1
    start = i + 1
    return start if start < end and re.match(r"[A-Za-z_:]", text[start]) else -1


def _chevron_end(text: str, start: int, hi: int) -> int:
    """Where the `>>>` that closes a launch's configuration (from `start`) is, or -1."""
    end = top_level_end(text, start, (">>>", ";"), hi)
    return end if text.startswith(">>>", end) and end + 3 <= hi else -1


def _callee_of_pointer(text: str) -> str:
    """`(void*)k`, `reinterpret_cast<const void*>(&k<float>)`, `(const void*)&ns::k` -> the kernel."""
    t = text.strip()
    for _ in range(4):
        t = re.sub(r"^\(\s*(?:const\s+)?void\s*\*\s*\)\s*", "", t)
        m = re.match(r"^(?:reinterpret_cast|static_cast)\s*<[^<>]*>\s*\((?P<inner>.*)\)$", t, re.S)
        if m:
            t = m.group("inner").strip()
        t = t.lstrip("&").strip()
        if parenthesized(t):
            t = t[1:-1].strip()
    m = re.fullmatch(r"(?:::)?[A-Za-z_][\w:]*(?:\s*<.*>)?", t, re.S)
    return " ".join(t.split()) if m else ""


def split_callee(callee: str) -> tuple[str, tuple[str, ...]]:
    """`vllm::k<float, 1>` -> ("k", ("float", "1"))."""
    head, lt, rest = callee.partition("<")
    args = tuple(a for a in split_top(rest.rsplit(">", 1)[0])) if lt else ()
    return head.strip().rpartition("::")[2], args


# --- building launches --------------------------------------------------------------------------


class _Builder:
    def __init__(self, source: str, defines: Sequence[str], headers: Sequence[HeaderStamp] = ()) -> None:
        self.source = source
        self.code = blank_comments(source)
        self.flat = without_preprocessor(self.code)
        self.lines = Lines(source)
        self.constants: Constants = with_headers(read_constants(source, defines), headers, defines)
        self.kernels = find_kernels(source)
        self.macros = self._launch_macros()

    def _launch_macros(self) -> dict[str, tuple[tuple[str, ...] | None, str, int]]:
        """Macros whose bodies launch kernels: name -> (params or None, body, body offset)."""
        out = {}
        for m in _DEFINE.finditer(self.code):
            body = m.group("body")
            if _LAUNCH_HINT.search(body):
                params = None
                if m.group("params") is not None:
                    params = tuple(p.strip() for p in m.group("params")[1:-1].split(",") if p.strip())
                out[m.group("name")] = (params, body.replace("\\\n", " \n"), m.start("body"))
        return out

    def function(self, span: FunctionSpan) -> HostFunction:
        body = self.flat[span.open : span.close]
        launches: list[HostLaunch] = []
        calls: list[HostCall] = []
        guards: list[Guard] = []
        macro_calls = [n for n in self.macros if re.search(rf"\b{n}\b", body)]
        if _LAUNCH_HINT.search(body) or macro_calls or _CUDA_CALL.search(body):
            stmts = statements(self.flat, span.open, span.close)
            resolver = Resolver(self.constants, self.lines, span, bindings(stmts))
            for site in find_sites(self.flat, span.open, span.close):
                at = self._place(stmts, site.offset, span)
                launches.append(self.launch(site, resolver, at, span.name, lambda o: o))
            for name in macro_calls:
                launches += self._expanded(name, stmts, span, resolver)
            launches.sort(key=lambda launch: (launch.line, launch.col))
            calls = self._calls(stmts, span, resolver)
            guards = self._guards(stmts, span, resolver)
        return HostFunction(
            name=span.name.rpartition("::")[2],
            params=span.params,
            return_type=span.return_type,
            line=self.lines.line(span.name_offset),
            col=self.lines.col(span.name_offset),
            extern_c=span.extern_c,
            template_params=span.template_params,
            qualifiers=span.qualifiers,
            launches=tuple(launches),
            calls=tuple(calls),
            guards=tuple(guards),
        )

    @staticmethod
    def _place(stmts: list[Statement], offset: int, span: FunctionSpan) -> Place:
        s = statement_at(stmts, offset)
        return Place(offset, s.blocks if s else (span.open,))

    def _expanded(self, name: str, stmts, span: FunctionSpan, resolver: Resolver) -> list[HostLaunch]:
        """Launches of macro `name`'s body at each of its uses in the function, with the use's
        arguments in place of the macro's parameters; the body's own declarations count, then
        the function's at the use."""
        params, body, _ = self.macros[name]
        out = []
        for m in re.finditer(rf"\b{name}\b", self.flat[span.open : span.close]):
            use = span.open + m.start()
            text = body
            if params is not None:
                open_ = self.flat.find("(", use + len(name))
                if open_ < 0 or self.flat[use + len(name) : open_].strip():
                    continue
                close = matching(self.flat, open_, span.close)
                if close < 0:
                    continue
                args = split_top(self.flat[open_ + 1 : close])
                text = _substitute(body, dict(zip(params, args, strict=False)))
            out += self._body_launches(
                text, span, name, parent=(resolver, self._place(stmts, use, span)), at=use
            )
        return out

    def _body_launches(
        self,
        body: str,
        span: FunctionSpan | None,
        name: str,
        parent: tuple[Resolver, Place] | None = None,
        at: int = 0,
        params: tuple[str, ...] = (),
    ) -> list[HostLaunch]:
        """The launches of a macro's body (as one block of statements), each at source offset `at`."""
        wrapped = "{" + body + "}"
        stmts = statements(wrapped, 0, len(wrapped) - 1)
        resolver = Resolver(
            self.constants,
            self.lines,
            span if parent is None else None,
            bindings(stmts),
            macro=name,
            macro_params=params,
            parent=parent,
            line_of=lambda _offset: self.lines.line(at),
        )
        if parent is not None:
            resolver.params = parent[0].params
        out = []
        for site in find_sites(wrapped):
            s = statement_at(stmts, site.offset)
            place = Place(site.offset, s.blocks if s else (0,))
            function = span.name if span is not None else ""
            out.append(self.launch(site, resolver, place, function, lambda _offset: at, macro=name))
        return out

    def macro_launches(self, used: set[str]) -> list[HostLaunch]:
        """Launches in the bodies of macros no function uses: their parameters stay unknown."""
        out = []
        for name, (params, body, offset) in self.macros.items():
            if name not in used:
                out += self._body_launches(body, None, name, at=offset, params=params or ())
        return out

    def launch(
        self,
        site: _Site,
        resolver: Resolver,
        at: Place,
        function: str,
        to_source: Callable[[int], int],
        macro: str = "",
    ) -> HostLaunch:
        kernel, targs = split_callee(site.callee)
        grid, block, smem, stream, args = self._shape(site, resolver, at)
        arguments = self._arguments(kernel, args, resolver, at)
        # The same launch over the kernel's parameters: names passed to a scalar parameter are
        # that parameter (`vector_add(..., int length)` passing `length` as `n`: cdiv(n, 256)).
        resolver.stops.clear()
        resolver.stops.update(
            {
                a.text: a.param
                for a in arguments
                if a.param and a.value is not None and re.fullmatch(r"[A-Za-z_]\w*(\.\w+)*", a.text)
            }
        )
        try:
            resolver.stop_constants = True
            in_grid = self._shape(site, resolver, at, ("grid",))[0]
            resolver.stop_constants = False
            _, in_block, in_smem, _, _ = self._shape(site, resolver, at, ("block", "smem"))
            in_kernel = LaunchShape(in_grid, in_block, in_smem)
        finally:
            resolver.stops.clear()
            resolver.stop_constants = False
        offset = to_source(site.offset)
        return HostLaunch(
            kernel=kernel,
            written=site.callee,
            template_args=tuple(self._template_arg(a, resolver, at) for a in targs),
            kind=site.kind,
            line=self.lines.line(offset),
            col=self.lines.col(offset),
            function=function.rpartition("::")[2],
            grid=grid,
            block=block,
            smem=smem,
            stream=stream,
            arguments=arguments,
            macro=macro,
            in_kernel_terms=in_kernel,
        )

    def _shape(self, site: _Site, resolver: Resolver, at: Place, want=("grid", "block", "smem")):
        """(grid, block, smem, stream, kernel arguments) of a launch site; the quantities not in
        `want` are None."""
        config = site.config
        args: tuple[str, ...] = site.args or ()

        def arg(i: int, default: str = "") -> str:
            return config[i] if len(config) > i else default

        if site.kind == "<<<>>>":
            texts, stream = (arg(0), arg(1), arg(2, "0")), arg(3)
        elif site.kind == "cudaLaunchKernelEx":
            cfg = arg(0).lstrip("&").strip()
            texts, stream = (f"{cfg}.gridDim", f"{cfg}.blockDim", f"{cfg}.dynamicSmemBytes"), f"{cfg}.stream"
            if site.args is None and len(config) > 2:
                args = self._argument_array(config[2], resolver, at)
        else:  # cudaLaunchKernel(func, grid, block, args, smem, stream) and the cooperative one
            texts, stream = (arg(1), arg(2), arg(4, "0")), arg(5)
            args = self._argument_array(config[3], resolver, at) if len(config) > 3 else ()
        labels = (("grid", 3), ("block size", 3), ("dynamic shared memory", 1))
        quantities = [
            resolver.quantity(label, text, at, dims) if key in want else None
            for key, (label, dims), text in zip(("grid", "block", "smem"), labels, texts, strict=True)
        ]
        return (*quantities, stream, args)

    @staticmethod
    def _template_arg(text: str, resolver: Resolver, at: Place) -> str:
        parsed = parse(text)
        if parsed is None or (isinstance(parsed, Name) and parsed.name in ("float", "double", "int")):
            return " ".join(text.split())
        v = int_value(resolver.expr(parsed, at))
        return str(v) if isinstance(v, int) else " ".join(text.split())

    def _argument_array(self, text: str, resolver: Resolver, at: Place) -> tuple[str, ...]:
        """The kernel arguments of `void* args[] = {&a, &b};` passed as `args`."""
        name = re.sub(r"^\(\s*void\s*\*\*\s*\)|^\(\s*void\s*\*\s*\*\s*\)", "", text.strip()).strip()
        found = resolver._binding(name, at)
        init = found.init_text.strip() if found is not None and not isinstance(found, str) else ""
        if not (init.startswith("{") and init.endswith("}")):
            return ()
        items = []
        for item in split_top(init[1:-1]):
            item = re.sub(r"^\(\s*(?:const\s+)?void\s*\*\s*\)\s*", "", item).strip()
            items.append(item[1:].strip() if item.startswith("&") else item)
        return tuple(i for i in items if i)

    def _arguments(
        self, kernel: str, args: tuple[str, ...], resolver: Resolver, at: Place
    ) -> tuple[LaunchArgument, ...]:
        sig = self._signature(kernel, len(args))
        params = sig.params if sig else ()
        out = []
        for i, text in enumerate(args):
            param = params[i] if i < len(params) else None
            root = argument_root(text)
            value = None
            if param is not None and not param.is_pointer:
                value = resolver.quantity(f"argument `{param.name}`", text, at, 1, real=True)
            out.append(
                LaunchArgument(
                    param=param.name if param else "",
                    text=" ".join(text.split()),
                    source=root,
                    launcher_param=bool(root) and root in resolver.params,
                    temporary=False,
                    value=value,
                )
            )
        return tuple(out)

    def _signature(self, kernel: str, count: int) -> KernelSignature | None:
        named = [k for k in self.kernels if k.name == kernel]
        return next((k for k in named if len(k.params) == count), named[0] if named else None)

    def _guards(self, stmts: list[Statement], span: FunctionSpan, resolver: Resolver) -> list[Guard]:
        """The conditions at the body's top level, before its first launch, under which it returns
        (or exits) without launching, and its top-level `assert`s (negated)."""
        first_launch = min(
            (x.offset for x in find_sites(self.flat, span.open, span.close)), default=span.close
        )
        out: list[Guard] = []
        for i, s in enumerate(stmts):
            if s.start >= first_launch:
                break
            if s.blocks != (span.open,):
                continue
            condition, text = "", s.text
            m = re.match(r"(?:assert|static_assert)\s*\(", s.text)
            if m and not s.conditional:
                close = matching(s.text, m.end() - 1)
                condition = f"!({s.text[m.end() : close]})" if close > 0 else ""
            elif s.header or s.conditional:
                if s.header:  # `if (c) { ...; return x; }`: the statements of its block
                    head, body = s.text, []
                    for t in stmts[i + 1 :]:
                        if len(t.blocks) < 2:
                            break
                        body.append(t)
                else:  # `if (c) return x;`: the head is the text before the statement
                    before = self.flat[span.open + 1 : s.start]
                    head = before[max(before.rfind(";"), before.rfind("}"), before.rfind("{")) + 1 :]
                    body, text = [s], f"{head.strip()} {s.text}"
                hm = re.match(r"\s*if\s*\(", head)
                ends = any(re.match(r"(?:return|exit|abort|std::exit|throw)\b", t.text) for t in body)
                if hm and ends:
                    close = matching(head, hm.end() - 1)
                    condition = head[hm.end() : close] if close > 0 else ""
            if condition:
                q = resolver.quantity("guard", condition, self._place(stmts, s.start, span), 1)
                out.append(Guard(q, self.lines.line(s.start), " ".join(text.split())))
        return out

    def _calls(self, stmts: list[Statement], span: FunctionSpan, resolver: Resolver) -> list[HostCall]:
        out = []
        for m in _CUDA_CALL.finditer(self.flat, span.open, span.close):
            open_ = m.end() - 1
            close = matching(self.flat, open_, span.close)
            if close < 0:
                continue
            name = m.group(1)
            args = tuple(split_top(self.flat[open_ + 1 : close]))
            at = self._place(stmts, m.start(), span)
            target, size = "", None
            if name.startswith(("cudaMalloc", "cudaFree")) and args:
                target = argument_root(args[0])
                if name.startswith("cudaMalloc") and len(args) > 1:
                    size = resolver.quantity("size", args[1], at, 1)
            elif (name.startswith("cudaMemset") and len(args) > 2) or (
                name.startswith("cudaMemcpy") and len(args) > 2
            ):
                target, size = argument_root(args[0]), resolver.quantity("size", args[2], at, 1)
            out.append(HostCall(name, args, self.lines.line(m.start()), target, size))
        return out


def _substitute(body: str, args: dict[str, str]) -> str:
    """A macro body with its parameters replaced by the arguments of one use."""
    text = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: args.get(m.group(0), m.group(0)), body)
    return re.sub(r"\s*##\s*", "", text)


def argument_root(text: str) -> str:
    """The variable an argument passes: `d_x`, `(double*)out` -> `out`, `&x[0]` -> `x`,
    `input.data_ptr<float>()` -> `input`, `d_x + offset` -> `d_x`; "" for anything else."""
    e = parse(re.sub(r"(?<!_cast)(?<!_cast )<[^<>()]*>(?=\s*\()", "", text))
    for _ in range(16):
        if isinstance(e, (Cast, Unary)):
            e = e.operand
        elif isinstance(e, Binary) and e.op in ("+", "-"):
            e = e.left
        elif isinstance(e, Call) and e.func == "[]":
            e = e.args[0]
        elif isinstance(e, Call) and "." in e.func:
            return e.func.split(".")[0]
        elif isinstance(e, Call) and len(e.args) == 1:
            e = e.args[0]
        else:
            break
    if isinstance(e, Name) and re.fullmatch(r"[A-Za-z_]\w*(\.\w+)*", e.name):
        return e.name.split(".")[0]
    return ""


def launch_bounds(source: str, code: str | None = None) -> dict[str, LaunchBounds]:
    """`__launch_bounds__(N[, minBlocks])` of each kernel, by the kernel's name."""
    code = blank_comments(source) if code is None else code
    lines = Lines(source)
    out: dict[str, LaunchBounds] = {}
    for m in re.finditer(r"__launch_bounds__\s*\(", code):
        close = matching(code, m.end() - 1)
        if close < 0:
            continue
        name = re.match(r"(?:\s*[\w:<>*&]+\s+)*?\s*([A-Za-z_]\w*)\s*\(", code[close + 1 : close + 400])
        if not name:
            continue
        parts = split_top(code[m.end() : close])
        head_start = max(code.rfind(";", 0, m.start()), code.rfind("}", 0, m.start()), 0)
        out.setdefault(
            name.group(1),
            LaunchBounds(
                kernel=name.group(1),
                max_threads=" ".join(parts[0].split()),
                min_blocks=" ".join(parts[1].split()) if len(parts) > 1 else "",
                line=lines.line(m.start()),
                template_params=template_params(code[head_start : m.start()]),
            ),
        )
    return out


def bounds_threads(
    bounds: LaunchBounds, constants: Constants, template_args: Sequence[str] = ()
) -> int | None:
    """The most threads per block `bounds` allows, for a kernel instance's template arguments."""
    values = {}
    for name, arg in zip(bounds.template_params, template_args, strict=False):
        v = int_value(parse(re.sub(r"(?<=\d)[uUlL]+\b", "", arg)) or Name("?"))
        if isinstance(v, int):
            values[name] = v
    v = constants.evaluate(bounds.max_threads, values)
    return v if isinstance(v, int) else None


def parse_host(source: str, defines: Sequence[str] = (), headers: Sequence[HeaderStamp] = ()) -> HostCode:
    """Every launch of the file, the functions around them and the kernels' launch bounds;
    `headers` (`headers.quoted_headers`) lend their constants to the names the file lacks."""
    host = HostCode()
    try:
        builder = _Builder(source, defines, headers)
    except Exception as e:
        host.problems.append(f"host code not read: {type(e).__name__}: {e}")
        return host
    try:
        host.bounds = launch_bounds(source, builder.code)
    except Exception as e:
        host.problems.append(f"__launch_bounds__ not read: {type(e).__name__}: {e}")
    has_launches = bool(_LAUNCH_HINT.search(builder.code))
    try:
        spans = find_functions(builder.flat, source) if has_launches or "cudaMalloc" in source else []
    except Exception as e:
        host.problems.append(f"functions not read: {type(e).__name__}: {e}")
        spans = []
    used: set[str] = set()
    for span in spans:
        try:
            fn = builder.function(span)
        except Exception as e:
            line = builder.lines.line(span.name_offset)
            host.problems.append(f"`{span.name}` (line {line}) not read: {type(e).__name__}: {e}")
            continue
        fn = _with_temporaries(fn)
        host.functions.append(fn)
        host.launches += fn.launches
        used |= {launch.macro for launch in fn.launches if launch.macro}
    try:
        host.launches += builder.macro_launches(used)
    except Exception as e:
        host.problems.append(f"macros not read: {type(e).__name__}: {e}")
    host.launches.sort(key=lambda launch: (launch.line, launch.col))
    return host


def _with_temporaries(fn: HostFunction) -> HostFunction:
    """Marks the arguments that pass a buffer the function allocated itself."""
    temps = set(fn.temporaries)
    if not temps:
        return fn
    launches = tuple(
        replace(launch, arguments=tuple(replace(a, temporary=a.source in temps) for a in launch.arguments))
        for launch in fn.launches
    )
    return replace(fn, launches=launches)

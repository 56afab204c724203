"""Whose verdict a file gets: nvcc's, run as the file's build runs it, is the truth; NVRTC answers
alone only where it sees what nvcc sees.

NVRTC is a JIT compiler: no C or C++ standard library (`<cstdint>`, `<cmath>`), none of the host
headers nvcc's device pass includes by itself (`int64_t`, `INFINITY` without an include; a
`__device__ int index;` compiles there and clashes with strings.h's `index` under nvcc),
JIT-mode rules (an unannotated function or namespace-scope variable is an error),
`__CUDACC_RTC__` defined, and CUB's and Thrust's top-level headers refuse it. Where a file meets
none of these, NVRTC's verdict is nvcc's device pass's (the same EDG front end on the same text
and headers), in a tenth of the time. So, with `compiler = "auto"`:

- NVRTC first, where `nvrtc_blind_spot` finds nothing: its clean verdict stands; an error it
  reports is nvcc's to confirm (nvcc's result replaces NVRTC's, so no NVRTC-only error stands).
- nvcc alone, where it finds something (an include NVRTC cannot open or does not compile as nvcc
  does, host code, a function or variable declared without the execution or memory space JIT
  mode asks for, `__CUDACC_RTC__`, flags only nvcc takes), or where the file's
  compile_commands.json entry runs nvcc (NVRTC's verdict is then only the editor's first look).
- `compiler = "nvrtc"` or `defaultDevice` (the file is JIT-compiled, NVRTC is its build) and
  `compiler = "nvcc"` say it outright.

`build_pass` says which nvcc run is the build's: `-c` (the host pass too) for a file with host
code or whose database entry makes an object, the device pass alone otherwise. Anything this
module cannot tell goes to nvcc.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

from ..files import MAX_FILE_BYTES, read_text_prefix
from ..hostcode import find_host_code, find_unannotated
from ..lexer import blank_comments
from ..source import find_includes
from .host_names import host_name_clashes
from .includes import include_closure, resolve_include
from .options import CompileOptions, cuda_include_dirs
from .stamped import by_stamp

# CUDA's device headers that NVRTC compiles as nvcc's device pass does (each is compiled both ways
# by tests/integration/test_nvcc_truth.py). Every other header that is not the project's own (the
# C and C++ standard headers, CUB's and Thrust's, the libraries' host APIs) goes to nvcc.
NVRTC_DEVICE_HEADERS = frozenset(
    {
        "cuda_fp16.h",
        "cuda_bf16.h",
        "cuda_fp8.h",
        "cuda_fp6.h",
        "cuda_fp4.h",
        "mma.h",
        "cooperative_groups.h",
        "cuda_pipeline.h",
        "cuda_pipeline_primitives.h",
        "cuda_awbarrier.h",
        "cuda_awbarrier_primitives.h",
        "cuComplex.h",
        "vector_types.h",
        "vector_functions.h",
        "math_constants.h",
        "curand_kernel.h",
    }
)
# libcu++ (`cuda/std/cstdint`, `cuda/barrier`) and cooperative groups' parts.
NVRTC_DEVICE_FOLDERS = ("cuda/", "cooperative_groups/")

# The code of the one finding that says nvcc must decide a file and cannot run here.
NEEDS_NVCC = "needs-nvcc"
# The C and C++ standard library's headers (C17, C++23): the host compiler's, which NVRTC has not.
_STANDARD = (
    "assert.h complex.h ctype.h errno.h fenv.h float.h inttypes.h iso646.h limits.h locale.h "
    "math.h setjmp.h signal.h stdalign.h stdarg.h stdatomic.h stdbool.h stddef.h stdint.h "
    "stdio.h stdlib.h stdnoreturn.h string.h strings.h tgmath.h threads.h time.h uchar.h "
    "wchar.h wctype.h "
    "algorithm any array atomic barrier bit bitset cassert ccomplex cctype cerrno cfenv cfloat "
    "charconv chrono cinttypes ciso646 climits clocale cmath codecvt compare complex concepts "
    "condition_variable coroutine csetjmp csignal cstdalign cstdarg cstdbool cstddef cstdint "
    "cstdio cstdlib cstring ctgmath ctime cuchar cwchar cwctype deque exception execution "
    "expected filesystem format forward_list fstream functional future initializer_list "
    "iomanip ios iosfwd iostream istream iterator latch limits list locale map mdspan memory "
    "memory_resource mutex new numbers numeric optional ostream print queue random ranges "
    "ratio regex scoped_allocator semaphore set shared_mutex source_location span spanstream "
    "sstream stack stacktrace stdexcept stdfloat stop_token streambuf string string_view "
    "strstream syncstream system_error thread tuple type_traits typeindex typeinfo "
    "unordered_map unordered_set utility valarray variant vector version"
)
STANDARD_HEADERS = frozenset(_STANDARD.split())
RTC_MACRO = "__CUDACC_RTC__"
_RTC = re.compile(r"\b__CUDACC_RTC__\b")
# A header graph this large is not walked to the end: nvcc decides.
MAX_HEADERS = 512


def nvrtc_device_header(target: str) -> bool:
    return target in NVRTC_DEVICE_HEADERS or target.startswith(NVRTC_DEVICE_FOLDERS)


@dataclass(frozen=True)
class Choice:
    """Whose verdict a file gets. `backend`: the compiler that answers ("nvrtc": its clean verdict
    stands, an error goes to nvcc unless `nvrtc_alone`). `why_nvcc`: why nvcc decides, for
    messages. `nvrtc_first`: NVRTC sees what nvcc sees, so its result is a fair first look while
    nvcc runs."""

    backend: str
    why_nvcc: str = ""
    nvrtc_first: bool = False
    nvrtc_alone: bool = False


def choose(source: str, path: str, options: CompileOptions) -> Choice:
    """Whose verdict `source` (at `path`, compiled with `options`) gets: the settings' word
    (`compiler`, `defaultDevice`), else nvcc wherever NVRTC may not see what nvcc sees or the
    database builds the file with nvcc, else NVRTC first."""
    if options.compiler == "nvrtc":
        return Choice("nvrtc", nvrtc_alone=True)
    if options.default_device:  # NVRTC's -default-device: the file is JIT-compiled
        return Choice("nvrtc", nvrtc_alone=True)
    if options.compiler == "nvcc":
        return Choice("nvcc", "the compiler setting is nvcc")
    blind = nvrtc_blind_spot(source, path, options)
    if blind is not None:
        return Choice("nvcc", blind)
    if options.database_compiler == "nvcc":
        return Choice("nvcc", "its compile_commands.json entry builds it with nvcc", nvrtc_first=True)
    return Choice("nvrtc", nvrtc_first=True)


def nvrtc_blind_spot(source: str, path: str, options: CompileOptions) -> str | None:
    """Why NVRTC's verdict on this text with these options may differ from nvcc's, or None when it
    cannot (see the module's docstring)."""
    if options.relaxed_constexpr:
        return "its flags ask for --expt-relaxed-constexpr, which NVRTC does not take"
    if options.extended_lambda:
        return "its flags ask for --extended-lambda, which NVRTC does not take"
    if found := _text_blind_spot(source):
        return f"it {found}"
    return next(_include_blind_spots(source, path, options), None)


@functools.lru_cache(maxsize=64)
def _text_blind_spot(text: str) -> str | None:
    """What the text does that NVRTC does not see as nvcc does, or None. Memoised: a check asks
    for the same text more than once, and an unchanged re-save asks again."""
    if _RTC.search(blank_comments(text)):
        return f"tests {RTC_MACRO}, so NVRTC and nvcc compile different text"
    if host := find_host_code(text, "nvcc"):
        return f"has host code: {host[0].what} (line {host[0].line})"
    if plain := find_unannotated(text):
        return f"has {plain.what} (line {plain.line}), which NVRTC's JIT mode refuses"
    if clashes := host_name_clashes(text):
        return (
            f"declares `{clashes[0]}` at global scope, as the C library headers nvcc includes "
            "by itself do (NVRTC has none)"
        )
    return None


def _include_blind_spots(source: str, path: str, options: CompileOptions) -> Iterator[str]:
    """Why, for each `#include`, in the file or the project headers it reads, whose header
    NVRTC cannot open or does not compile as nvcc does, and each project header with host code or
    `__CUDACC_RTC__`. Angle includes are searched as nvcc searches them: the include folders, not
    the file's own folder (NVRTC would find one there; nvcc would not)."""
    dirs = tuple(options.include_dirs)
    todo = [(find_includes(source), os.path.dirname(os.path.abspath(path)), "it")]
    seen: set[str] = set()
    while todo:
        includes, folder, who = todo.pop()
        for inc in includes:
            if nvrtc_device_header(inc.target):
                continue
            shown = f'"{inc.target}"' if inc.quoted else f"<{inc.target}>"
            header = resolve_include(inc.target, inc.quoted, folder, dirs)
            if header is None:
                # A quoted include found nowhere is missing for both compilers (NVRTC's error is
                # nvcc's to word), unless the host compiler's or CUDA's search finds it.
                if not inc.quoted or _system_header(inc.target, options):
                    yield f"{who} includes {shown}, {_unseen(inc.target, options)}"
                continue
            if header in seen:
                continue
            if len(seen) >= MAX_HEADERS:
                yield f"it reads more than {MAX_HEADERS} project headers"
                return
            seen.add(header)
            scanned = _scan_header(header)
            name = f"{os.path.basename(header)}, which it reads,"
            if scanned is None:
                yield f"{who} includes {shown}, which cannot be read"
                continue
            header_includes, found = scanned
            if found:
                yield f"{name} {found}"
            todo.append((header_includes, os.path.dirname(header), name))


def _system_header(target: str, options: CompileOptions) -> bool:
    """A header outside the project that nvcc finds: a C or C++ standard header, or one in an
    -isystem folder or CUDA's."""
    return target in STANDARD_HEADERS or any(
        os.path.isfile(os.path.join(d, target)) for d in (*options.system_include_dirs, *cuda_include_dirs())
    )


def _unseen(target: str, options: CompileOptions) -> str:
    """Why NVRTC does not see a header as nvcc does, for one that is not the project's."""
    for d in options.system_include_dirs:
        if os.path.isfile(os.path.join(d, target)):
            return "a header of an -isystem folder (a host library's)"
    for d in cuda_include_dirs():
        if os.path.isfile(os.path.join(d, target)):
            return "a CUDA header that NVRTC does not compile as nvcc does"
    return "which NVRTC cannot open (the host compiler's headers are nvcc's alone)"


@by_stamp(maxsize=1024, missing=None)
def _scan_header(header: str) -> tuple[list, str | None] | None:
    """(its includes, what it does that NVRTC does not see as nvcc does) of a project header;
    None when it cannot be read."""
    text = read_text_prefix(header, MAX_FILE_BYTES)  # a regular file only: never a FIFO
    if text is None:
        return None
    return find_includes(text), _text_blind_spot(text)


def build_pass(source: str, path: str, options: CompileOptions) -> str:
    """ "host" (`nvcc -c`: the host pass runs too) or "device" (the device pass alone), as the
    file's build runs nvcc: its compile_commands.json entry's output, else `-c` for a file with
    host code (in it or in the project headers it reads) and the device pass for one without."""
    output = options.build_output
    if output == "device":  # an arch after the first: the first one's compile ran the host pass
        return "device"
    if output == "object" or options.host_check:
        return "host"
    if output:
        return "device"
    return "host" if has_host_code(source, path, options) else "device"


def has_host_code(source: str, path: str, options: CompileOptions) -> bool:
    """Host code nvcc compiles, in the text or a project header it reads: `main`, a launch, CUDA
    runtime calls, host containers. A host header alone makes no host code (candle's device-only
    kernels include <cuda.h>; their build is `nvcc --ptx`)."""
    if find_host_code(source, "nvcc", includes=False):
        return True
    return any(_runs_host_code(h) for h in _project_headers(source, path, options))


def _project_headers(source: str, path: str, options: CompileOptions) -> list[str]:
    return list(include_closure(source, path, tuple(options.include_dirs)))


@by_stamp(maxsize=1024, missing=False)
def _runs_host_code(header: str) -> bool:
    text = read_text_prefix(header, MAX_FILE_BYTES)  # a regular file only: never a FIFO
    return text is not None and bool(find_host_code(text, "nvcc", includes=False))


# NVRTC's errors that only JIT mode or its lack of nvcc's implicit host headers gives: where no
# nvcc can confirm an error, these are not shown as findings.
_NVRTC_ONLY = re.compile(
    r'cannot open source file "(?:' + "|".join(map(re.escape, sorted(STANDARD_HEADERS))) + r')"'
    r"|host functions are not allowed in JIT mode|host variables are not allowed in JIT mode"
    r"|without memory space annotations|without execution space annotations"
    r'|namespace "std" has no member'
    r'|identifier "(?:u?int(?:8|16|32|64|ptr|max)_t|u?int_(?:least|fast)\d+_t|ptrdiff_t|INFINITY|NAN'
    r"|HUGE_VALF?|HUGE_VALL|M_\w+|U?INT\d*_(?:MAX|MIN)|U?LLONG_(?:MAX|MIN)|U?LONG_(?:MAX|MIN)|CHAR_BIT"
    r"|RAND_MAX|EXIT_(?:SUCCESS|FAILURE))\" is undefined"
)


def nvrtc_only_error(message: str) -> bool:
    """An NVRTC error nvcc's device pass would not give (JIT mode, its missing host headers)."""
    return _NVRTC_ONLY.search(message) is not None

"""What host code an LLM wrote may use: headers, imported symbols, pragmas. Static lists, so a
review sees the whole surface in one place. A name not listed is refused (fail closed)."""

from __future__ import annotations

import re

# Headers of the C and C++ standard libraries that do no I/O beyond stdout/stderr and start no
# threads; CUDA's own headers. Anything else (POSIX, <fstream>, <thread>, a quoted header the
# original does not include) is refused.
STANDARD_HEADERS = frozenset(
    [
        "algorithm",
        "array",
        "cassert",
        "cfloat",
        "climits",
        "cmath",
        "complex",
        "cstddef",
        "cstdint",
        "cstdio",
        "cstdlib",
        "cstring",
        "functional",
        "initializer_list",
        "iterator",
        "limits",
        "map",
        "memory",
        "new",
        "numeric",
        "optional",
        "set",
        "stdexcept",
        "string",
        "tuple",
        "type_traits",
        "unordered_map",
        "unordered_set",
        "utility",
        "vector",
        "iostream",
        "cerrno",
        "assert.h",
        "float.h",
        "limits.h",
        "math.h",
        "stddef.h",
        "stdint.h",
        "stdio.h",
        "stdlib.h",
        "string.h",
        "stdbool.h",
        "errno.h",
    ]
)
CUDA_HEADERS = frozenset(
    [
        "cuda_runtime.h",
        "cuda_runtime_api.h",
        "cuda_fp16.h",
        "cuda_bf16.h",
        "cuda_fp8.h",
        "cuda_fp6.h",
        "cuda_fp4.h",
        "cuda_pipeline.h",
        "cuda_pipeline_primitives.h",
        "cuda_awbarrier.h",
        "cuda_awbarrier_primitives.h",
        "cooperative_groups.h",
        "device_launch_parameters.h",
        "device_functions.h",
        "vector_types.h",
        "vector_functions.h",
        "math_constants.h",
        "mma.h",
        "sm_20_intrinsics.h",
        "sm_30_intrinsics.h",
        "sm_32_intrinsics.h",
        "sm_60_atomic_functions.h",
        "sm_61_intrinsics.h",
        "cuda_texture_types.h",
        "texture_fetch_functions.h",
        "driver_types.h",
        "host_defines.h",
        "builtin_types.h",
        "cuda_device_runtime_api.h",
    ]
)
# Header folders of CUDA (CCCL's cub, thrust, cuda::std; cooperative groups' parts).
CUDA_HEADER_DIRS = ("cub/", "cuda/", "thrust/", "cooperative_groups/", "cuda/std/", "crt/")

# The CUDA runtime a launcher needs: launches, memory, copies, events, streams, graphs,
# occupancy, device queries, errors; and the registration functions nvcc emits. Not: host
# callbacks (cudaLaunchHostFunc, cudaStreamAddCallback, graph host nodes run host code on the
# driver's own threads), device selection (cudaSetDevice), IPC, managed memory (it can hang
# the GPU when over-asked), context-wide limits and resets.
CUDA_RUNTIME = frozenset(
    [
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cudaFuncSetAttribute",
        "cudaFuncGetAttributes",
        "cudaFuncSetCacheConfig",
        "cudaFuncSetSharedMemConfig",
        "cudaGetFuncBySymbol",
        "cudaMalloc",
        "cudaFree",
        "cudaMallocAsync",
        "cudaFreeAsync",
        "cudaMallocPitch",
        "cudaMallocHost",
        "cudaFreeHost",
        "cudaHostAlloc",
        "cudaMemGetInfo",
        "cudaMemset",
        "cudaMemsetAsync",
        "cudaMemset2D",
        "cudaMemset2DAsync",
        "cudaMemcpy",
        "cudaMemcpyAsync",
        "cudaMemcpy2D",
        "cudaMemcpy2DAsync",
        "cudaMemcpyToSymbol",
        "cudaMemcpyFromSymbol",
        "cudaMemcpyToSymbolAsync",
        "cudaMemcpyFromSymbolAsync",
        "cudaGetSymbolAddress",
        "cudaGetSymbolSize",
        "cudaPointerGetAttributes",
        "cudaEventCreate",
        "cudaEventCreateWithFlags",
        "cudaEventRecord",
        "cudaEventRecordWithFlags",
        "cudaEventSynchronize",
        "cudaEventElapsedTime",
        "cudaEventDestroy",
        "cudaEventQuery",
        "cudaStreamWaitEvent",
        "cudaStreamCreate",
        "cudaStreamCreateWithFlags",
        "cudaStreamCreateWithPriority",
        "cudaStreamDestroy",
        "cudaStreamSynchronize",
        "cudaStreamQuery",
        "cudaDeviceGetStreamPriorityRange",
        "cudaStreamBeginCapture",
        "cudaStreamEndCapture",
        "cudaGraphInstantiate",
        "cudaGraphInstantiateWithFlags",
        "cudaGraphLaunch",
        "cudaGraphExecDestroy",
        "cudaGraphDestroy",
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
        "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
        "cudaOccupancyMaxPotentialBlockSize",
        "cudaOccupancyAvailableDynamicSMemPerBlock",
        "cudaOccupancyMaxPotentialClusterSize",
        "cudaOccupancyMaxActiveClusters",
        "cudaGetDevice",
        "cudaGetDeviceCount",
        "cudaGetDeviceProperties",
        "cudaGetDeviceProperties_v2",
        "cudaDeviceGetAttribute",
        "cudaDeviceGetLimit",
        "cudaDeviceSynchronize",
        "cudaDriverGetVersion",
        "cudaRuntimeGetVersion",
        "cudaDeviceCanAccessPeer",
        "cudaGetLastError",
        "cudaPeekAtLastError",
        "cudaGetErrorString",
        "cudaGetErrorName",
        "__cudaRegisterFatBinary",
        "__cudaRegisterFatBinaryEnd",
        "__cudaUnregisterFatBinary",
        "__cudaRegisterFunction",
        "__cudaRegisterVar",
        "__cudaRegisterManagedVar",
        "__cudaRegisterTexture",
        "__cudaRegisterSurface",
        "__cudaPushCallConfiguration",
        "__cudaPopCallConfiguration",
        "__cudaLaunchKernel",
        "__cudaLaunchKernel_ptsz",
        "__cudaGetKernel",
        "__cudaInitModule",
    ]
)
# libc memory, strings (formatting in memory), math; printing to stdout/stderr (the worker's
# stdout is its log); exit/abort (they end only the sandboxed worker).
LIBC = frozenset(
    [
        "memcpy",
        "memmove",
        "memset",
        "memcmp",
        "malloc",
        "calloc",
        "realloc",
        "free",
        "aligned_alloc",
        "posix_memalign",
        "strlen",
        "strcmp",
        "strncmp",
        "strcpy",
        "strncpy",
        "snprintf",
        "sprintf",
        "vsnprintf",
        "printf",
        "puts",
        "putchar",
        "fprintf",
        "fputs",
        "fputc",
        "fflush",
        "fwrite",
        "vprintf",
        "vfprintf",
        "stdout",
        "stderr",
        "exit",
        "abort",
        "__assert_fail",
        "__stack_chk_fail",
        "atexit",
        "__cxa_atexit",
        "__dso_handle",
        "__printf_chk",
        "__fprintf_chk",
        "__sprintf_chk",
        "__snprintf_chk",
        "__vsnprintf_chk",
        "__memcpy_chk",
        "__memmove_chk",
        "__memset_chk",
        "__strcpy_chk",
        "abs",
        "labs",
        "llabs",
        "div",
        "rand",
        "srand",
        "qsort",
        "bsearch",
        "__errno_location",
    ]
)
_MATH_STEMS = [
    "sqrt",
    "cbrt",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "pow",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "atan2",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "erf",
    "erfc",
    "tgamma",
    "lgamma",
    "fabs",
    "floor",
    "ceil",
    "round",
    "trunc",
    "rint",
    "nearbyint",
    "lround",
    "llround",
    "lrint",
    "llrint",
    "fmod",
    "remainder",
    "fmin",
    "fmax",
    "fma",
    "hypot",
    "frexp",
    "ldexp",
    "modf",
    "copysign",
    "nextafter",
    "scalbn",
    "ilogb",
    "logb",
    "fdim",
]
MATH = frozenset(name for stem in _MATH_STEMS for name in (stem, stem + "f", stem + "l"))
# The C++ runtime pieces any C++ code may call: new/delete, exceptions, static-local guards,
# unwinding, and the throw helpers of standard containers.
CXX_RUNTIME = frozenset(
    [
        "_Znwm",
        "_Znam",
        "_ZdlPv",
        "_ZdlPvm",
        "_ZdaPv",
        "_ZdaPvm",
        "_ZnwmSt11align_val_t",
        "_ZdlPvSt11align_val_t",
        "_ZdlPvmSt11align_val_t",
        "_ZnwmRKSt9nothrow_t",
        "_ZnamRKSt9nothrow_t",
        "__cxa_guard_acquire",
        "__cxa_guard_release",
        "__cxa_guard_abort",
        "__gxx_personality_v0",
        "_Unwind_Resume",
        "__cxa_begin_catch",
        "__cxa_end_catch",
        "__cxa_allocate_exception",
        "__cxa_free_exception",
        "__cxa_throw",
        "__cxa_rethrow",
        "__cxa_pure_virtual",
        "_ZSt9terminatev",
        "_GLOBAL_OFFSET_TABLE_",
        "_ZSt17__throw_bad_allocv",
        "_ZSt28__throw_bad_array_new_lengthv",
        "_ZSt20__throw_length_errorPKc",
        "_ZSt19__throw_logic_errorPKc",
        "_ZSt20__throw_out_of_rangePKc",
        "_ZSt24__throw_out_of_range_fmtPKcz",
        "_ZSt24__throw_invalid_argumentPKc",
        "_ZSt21__glibcxx_assert_failPKciS0_S0_",
        "_ZSt25__throw_bad_function_callv",
    ]
)
# Type information and vtables of the standard exception classes (data symbols).
_CXX_DATA = re.compile(r"^_ZT[ISV](N10__cxxabiv1\d+\w+|St\d+\w+)$")
ALLOWED_SYMBOLS = CUDA_RUNTIME | LIBC | MATH | CXX_RUNTIME

# Why a refused call is dangerous, for the report (any other unlisted name: "not allowed").
DANGEROUS = {
    **dict.fromkeys(
        (
            "system",
            "popen",
            "execl",
            "execlp",
            "execle",
            "execv",
            "execvp",
            "execve",
            "execvpe",
            "fork",
            "vfork",
            "clone",
            "posix_spawn",
            "posix_spawnp",
        ),
        "runs another program",
    ),
    **dict.fromkeys(
        (
            "fopen",
            "fopen64",
            "freopen",
            "open",
            "open64",
            "openat",
            "creat",
            "fdopen",
            "unlink",
            "remove",
            "rename",
            "mkdir",
            "rmdir",
            "chmod",
            "truncate",
        ),
        "opens or changes files",
    ),
    **dict.fromkeys(
        (
            "socket",
            "connect",
            "bind",
            "listen",
            "accept",
            "sendto",
            "recvfrom",
            "getaddrinfo",
            "gethostbyname",
        ),
        "uses the network",
    ),
    **dict.fromkeys(("dlopen", "dlsym", "dlmopen", "dlvsym"), "loads code at run time"),
    **dict.fromkeys(("mmap", "mmap64", "mprotect", "munmap"), "maps memory or files itself"),
    **dict.fromkeys(("syscall",), "makes raw system calls"),
    **dict.fromkeys(("getenv", "secure_getenv", "setenv", "putenv"), "reads or changes the environment"),
    **dict.fromkeys(
        ("ptrace", "kill", "raise", "signal", "sigaction", "pthread_create", "prctl"),
        "controls processes, threads or signals",
    ),
    **dict.fromkeys(
        ("cudaLaunchHostFunc", "cudaStreamAddCallback", "cudaGraphAddHostNode"),
        "runs host code on the CUDA driver's own threads",
    ),
    **dict.fromkeys(("cudaMallocManaged",), "allocates managed memory (over-asking can hang the GPU)"),
    **dict.fromkeys(
        (
            "cudaSetDevice",
            "cudaDeviceReset",
            "cudaDeviceSetLimit",
            "cudaIpcOpenMemHandle",
            "cudaIpcGetMemHandle",
        ),
        "changes the device or its context for everyone",
    ),
}

# Pragmas that only tune code generation or diagnostics.
ALLOWED_PRAGMAS = re.compile(
    r"^\s*(unroll\b|nounroll\b|once\b|nv_diag_\w+|diag_\w+|nv_diagnostic\b|"
    r"(GCC|clang)\s+diagnostic\b|pack\b)"
)
# Attributes that run code at load or exit, or move code and data around.
DENIED_ATTRIBUTES = frozenset(
    (
        "constructor",
        "destructor",
        "init_priority",
        "section",
        "ifunc",
        "alias",
        "weakref",
        "used",
        "naked",
        "visibility",
        "cleanup",
        "weak",
        # Code generation by hand: another instruction set (`target("fsgsbase")` opens the
        # thread pointer), other optimisation, symbol versions, attributes copied from elsewhere.
        "target",
        "target_clones",
        "optimize",
        "symver",
        "copy",
    )
)

# Imported symbols that are data, not functions: their address is how they are used.
DATA_IMPORTS = frozenset(["stdout", "stderr", "__dso_handle", "_GLOBAL_OFFSET_TABLE_"])
# Imported functions the compiler itself stores as data: the C++ personality routine (a pointer
# in `DW.ref.__gxx_personality_v0`, read by the unwinder) and the pure-virtual slot of vtables.
COMPILER_FUNCTION_DATA = frozenset(["__gxx_personality_v0", "__cxa_pure_virtual"])

# The calls that take a stream: `stdout`/`stderr` may appear only as their argument.
PRINT_STREAM_FUNCTIONS = frozenset(
    ["fprintf", "vfprintf", "fputs", "fputc", "putc", "fflush", "fwrite", "__fprintf_chk"]
)

# Names that walk the loader's tables, the process's symbols, environment or memory map: from
# any of them, libc's `system` is a lookup away. (`__libc_*` and `_dl_*` are refused as
# prefixes.) The linker's own symbols mark where the library's code and data lie.
SYMBOL_WALKERS = frozenset(
    [
        "dl_iterate_phdr",
        "dladdr",
        "dladdr1",
        "dlinfo",
        "_r_debug",
        "r_debug",
        "link_map",
        "environ",
        "__environ",
        "_environ",
        "getauxval",
        "__getauxval",
        "program_invocation_name",
        "program_invocation_short_name",
        "__progname",
        "__progname_full",
        "_GLOBAL_OFFSET_TABLE_",
        "_DYNAMIC",
        "_PROCEDURE_LINKAGE_TABLE_",
        "__ehdr_start",
        "__executable_start",
        "_etext",
        "__etext",
        "etext",
        "_edata",
        "edata",
        "__bss_start",
        "_end",
        "__data_start",
        "__init_array_start",
        "__init_array_end",
        "__fini_array_start",
        "__fini_array_end",
        "__preinit_array_start",
        "__preinit_array_end",
        "__dso_handle",
        "backtrace",
        "backtrace_symbols",
        "_Unwind_Backtrace",
        "_Unwind_GetIP",
        "_Unwind_FindEnclosingFunction",
    ]
)
# Compiler builtins that read the stack's return addresses, the frame, the thread pointer, or
# jump by hand (`__builtin_ia32_*`, the x86 intrinsics, are refused as a prefix).
REFUSED_BUILTINS = frozenset(
    [
        "__builtin_frame_address",
        "__builtin_return_address",
        "__builtin_extract_return_addr",
        "__builtin_frob_return_addr",
        "__builtin_dwarf_cfa",
        "__builtin_eh_return",
        "__builtin_unwind_init",
        "__builtin_apply",
        "__builtin_apply_args",
        "__builtin_return",
        "__builtin_setjmp",
        "__builtin_longjmp",
        "__builtin_thread_pointer",
        "__builtin_call_with_static_chain",
        "__builtin___clear_cache",
        "setjmp",
        "_setjmp",
        "longjmp",
        "_longjmp",
        "sigsetjmp",
        "siglongjmp",
    ]
)
# Library functions the text may only call: a mention that is not a call is their address.
# (Math names and words a variable is often called, `div`, `abs`, `free`, `signal`, are left to
# the object check, which sees an address the compiler takes of any import.)
_COMMON_WORDS = frozenset(
    [
        "abs",
        "labs",
        "llabs",
        "div",
        "rand",
        "srand",
        "exit",
        "abort",
        "free",
        "remove",
        "rename",
        "open",
        "kill",
        "raise",
        "signal",
        "connect",
        "bind",
        "listen",
        "accept",
        "truncate",
        "clone",
    ]
)
FUNCTION_VALUE_NAMES = (
    (CUDA_RUNTIME | (LIBC - DATA_IMPORTS) | frozenset(DANGEROUS)) - _COMMON_WORDS - {"stdout", "stderr"}
)


def is_cxx_data(name: str) -> bool:
    """Type information and vtables of the standard exception classes."""
    return bool(_CXX_DATA.match(name))


def allowed_symbol(name: str) -> bool:
    return name in ALLOWED_SYMBOLS or is_cxx_data(name)


def allowed_header(target: str) -> bool:
    return target in STANDARD_HEADERS or target in CUDA_HEADERS or target.startswith(CUDA_HEADER_DIRS)

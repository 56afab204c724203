"""A flag source: CMake's `compile_commands.json` (`CMAKE_EXPORT_COMPILE_COMMANDS=ON`), read the way
clangd reads it, reduced to what matters for diagnostics.

- Finding it: the file's folder and each ancestor up to the workspace root (else the filesystem
  root), looking at `compile_commands.json` there and then in its `build*/` folders; or the one
  path the user names (`compileCommands` / `--compile-commands`: the json or its folder).
- Each entry's `arguments` (or `command`, split like a shell) becomes `CommandFlags`: include
  folders, `-isystem`, defines, `-U`, `-std`, `--expt-relaxed-constexpr`, `--extended-lambda`,
  the target archs (`-gencode`, `-arch`, `--generate-code`, clang's `--cuda-gpu-arch`) and the
  few code-generation flags both backends share (`-maxrregcount`, `--use_fast_math`, ...).
  Everything else (`-o`, `-c`, `-O3`, `-MD -MF x`, host-compiler flags...) is dropped.
  Relative `directory` is relative to the json's folder; relative paths in an entry are
  relative to its `directory`.
- A file without an entry borrows one: a file's in its folder, else the nearest ancestor
  folder's (a file anywhere under it), so headers and new files get the project's flags.
- Parsed databases are cached by (path, mtime, size, inode), parsed entry by entry (other threads
  run meanwhile) and only when a regular file under `compileCommandsMaxBytes`; response files
  likewise (`@/dev/zero` is never read). Nothing here raises: an unreadable, oversized or
  malformed json becomes one `problem` message naming the json and what is wrong.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import threading
import time
from dataclasses import dataclass, field

from ..files import FileProblem, read_regular
from .nvcc_args import macro_name

DATABASE_NAME = "compile_commands.json"


@dataclass(frozen=True)
class CommandFlags:
    """What one database entry says that matters for diagnostics (absolute paths)."""

    include_dirs: tuple[str, ...] = ()
    system_include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    undefines: tuple[str, ...] = ()
    std: str | None = None
    relaxed_constexpr: bool = False
    extended_lambda: bool = False
    archs: tuple[str, ...] = ()  # "sm_80", in the order the command names them
    extra: tuple[str, ...] = ()  # code-generation flags NVRTC and nvcc spell alike
    file: str = ""  # the entry's file (another file's, when borrowed)
    database: str = ""  # the compile_commands.json it came from
    problem: str | None = None  # why the entry cannot be used (a response file that is a FIFO)
    # The compiler the build runs (its program's name, "nvcc", "clang++"; a launcher such as ccache
    # skipped) and what it makes of the file: "object" (-c, -dc, or nvcc compiling and linking:
    # the host pass runs), "cubin", "fatbin", "ptx" (the device pass alone), "" (not said).
    compiler: str = ""
    output: str = ""


@dataclass
class Database:
    path: str
    # normalised file -> its flags, shared between entries with the same flags (so `.file` may
    # be another entry's: ask `flags(file)`)
    entries: dict[str, CommandFlags] = field(default_factory=dict)
    problem: str | None = None  # the whole json is unusable
    bad_entries: dict[str, str] = field(default_factory=dict)  # file -> why its entry was skipped
    borrowed: dict[str, CommandFlags | None] = field(default_factory=dict)  # folder -> entry lent

    def flags(self, file: str) -> CommandFlags | None:
        """The entry for `file` (a normalised absolute path), with `file` set to it."""
        found = self.entries.get(file)
        if found is None or found.file == file:
            return found
        own = copy.copy(found)
        object.__setattr__(own, "file", file)
        return own

    def all_flags(self) -> list[CommandFlags]:
        """Every entry, each with its own `file`."""
        return [f for f in map(self.flags, self.entries) if f is not None]

    def distinct_flags(self) -> list[CommandFlags]:
        """Each set of flags once (include folders for the include graph: no copy per file)."""
        return list({id(f): f for f in self.entries.values()}.values())


@dataclass(frozen=True)
class Lookup:
    """The flags for one file: `flags` None when there are none; `problem` for the user."""

    flags: CommandFlags | None = None
    problem: str | None = None
    database: str | None = None
    borrowed: bool = False


# --- finding the database ---------------------------------------------------------------------


def find_database(path: str, root: str | None = None) -> str | None:
    """The compile_commands.json that governs `path`: searched upward from its folder, in each
    folder first directly, then in `build*/` folders (`build` first, then by name)."""
    d = os.path.dirname(os.path.abspath(path))
    stop = os.path.abspath(root) if root else None
    if stop and not _inside(d, stop):
        stop = None  # a file outside the workspace: search up to the filesystem root
    while True:
        found = _scan(d)
        if found:
            return found
        parent = os.path.dirname(d)
        if d == stop or parent == d:
            return None
        d = parent


# Each folder's scan, kept while the folder and its build* folders keep their mtimes (adding or
# removing a database changes one of them). The search lists every ancestor, and /tmp or a home
# folder hold thousands of names: 0.9 ms a search on the dev box, three searches per check, on
# every save. A folder changed within RACY_NS is scanned again each time (its mtime could change
# again within the filesystem's granularity).
_SCANS: dict[str, tuple[int, tuple[tuple[str, int | None], ...], str | None]] = {}
_SCANS_LOCK = threading.Lock()
_SCANS_MAX = 4096
RACY_NS = 2_000_000_000


def _mtime_ns(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _scan(folder: str) -> str | None:
    """The database directly in `folder`, else in one of its build* folders."""
    mtime = _mtime_ns(folder)
    if mtime is None:
        return None
    with _SCANS_LOCK:
        cached = _SCANS.get(folder)
    if cached is not None and cached[0] == mtime and all(_mtime_ns(p) == m for p, m in cached[1]):
        return cached[2]
    subs = [os.path.join(folder, sub) for sub in _build_dirs(folder)]
    candidates = [os.path.join(d, DATABASE_NAME) for d in (folder, *subs)]
    found = next((c for c in candidates if os.path.isfile(c)), None)
    stamps = tuple((sub, _mtime_ns(sub)) for sub in subs)
    now = time.time_ns()
    if all(m is not None and now - m > RACY_NS for m in (mtime, *(m for _, m in stamps))):
        with _SCANS_LOCK:
            if len(_SCANS) >= _SCANS_MAX:
                _SCANS.clear()
            _SCANS[folder] = (mtime, stamps, found)
    return found


def _build_dirs(folder: str) -> list[str]:
    try:
        names = [n for n in os.listdir(folder) if n.startswith("build")]
    except OSError:
        return []
    return sorted(names, key=lambda n: (n != "build", n))


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def explicit_database(named: str, base_dir: str | None = None) -> tuple[str | None, str | None]:
    """The json a setting names (the file, or a folder holding it): (path, problem)."""
    p = named if os.path.isabs(named) or not base_dir else os.path.join(base_dir, named)
    p = os.path.normpath(os.path.expanduser(p))
    if os.path.isdir(p):
        p = os.path.join(p, DATABASE_NAME)
    if not os.path.isfile(p):
        return None, f"compileCommands names {p}, which does not exist"
    return p, None


# --- reading it -------------------------------------------------------------------------------

# A database over this is not read (a setting: compileCommandsMaxBytes). 300,000 CMake entries of
# nvcc commands are ~190 MB; parsed, the entries share their flag tuples.
MAX_DATABASE_BYTES = 256 * 2**20
MAX_RESPONSE_FILE_BYTES = 2**20

Stamp = tuple[int, int, int]  # (mtime_ns, size, inode): a file replaced by a rename changes inode

_cache: dict[str, tuple[Stamp, int, Database]] = {}
_cache_lock = threading.Lock()
_parse_locks: dict[str, threading.Lock] = {}  # one parse per database at a time


def stamp(path: str) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def load_database(path: str, max_bytes: int = MAX_DATABASE_BYTES) -> Database:
    """The parsed database, from the cache while its stamp is unchanged. Callers on an event
    loop must not call this (a large database takes seconds): the server reads it in its
    threads and workers."""
    path = os.path.abspath(path)
    key = stamp(path)
    with _cache_lock:
        hit = _cache.get(path)
        lock = _parse_locks.setdefault(path, threading.Lock())
    if hit is not None and key is not None and hit[:2] == (key, max_bytes):
        return hit[2]
    with lock:  # a second caller waits for the first parse instead of parsing it again
        with _cache_lock:
            hit = _cache.get(path)
        if hit is not None and key is not None and hit[:2] == (key, max_bytes):
            return hit[2]
        db = _parse_database(path, max_bytes)
        if key is not None:
            with _cache_lock:
                _cache[path] = (key, max_bytes, db)
    return db


def _parse_database(path: str, max_bytes: int = MAX_DATABASE_BYTES) -> Database:
    where = os.path.dirname(path)
    try:
        text = read_regular(path, max_bytes).decode("utf-8")
    except FileProblem as e:
        limit = " (compileCommandsMaxBytes)" if e.size is not None else ""
        return Database(path, problem=f"{path} is {e.reason}{limit}; not read")
    except OSError as e:
        return Database(path, problem=f"cannot read {path}: {e.strerror or e}")
    except UnicodeDecodeError:
        return Database(path, problem=f"{path} is not UTF-8 text")
    db = Database(path)
    reasons: list[str] = []
    shared: dict = {}  # entries with the same flags share one parse
    count = 0
    try:
        for i, entry in enumerate(_entries(text)):
            count += 1
            flags, file, reason = _parse_entry(entry, where, path, shared)
            if reason:
                reasons.append(f"entry {i + 1}: {reason}")
                if file:
                    db.bad_entries.setdefault(file, reason)
                continue
            assert flags is not None
            db.entries.setdefault(file, flags)  # the first entry for a file wins, as in clangd
    except json.JSONDecodeError as e:
        return Database(
            path, problem=f"{path} is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}"
        )
    except _NotAList as e:
        return Database(path, problem=f"{path} must hold a JSON list of entries, not a {e}")
    if count and not db.entries:
        db.problem = f"{path} has no usable entry ({reasons[0]})"
    return db


class _NotAList(ValueError):
    pass


_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _after_whitespace(text: str, i: int) -> int:
    """The index of the first character at or after `i` that is not JSON whitespace."""
    m = _WHITESPACE.match(text, i)  # `*`: it always matches
    return m.end() if m else i


def _entries(text: str):
    """The entries of a JSON list, decoded one at a time: one `json.loads` of a large database
    held the interpreter lock for seconds, stalling every other thread (the server's event loop
    among them); between entries here, other threads run."""
    decoder = json.JSONDecoder()
    i = _after_whitespace(text, 0)
    if not text.startswith("[", i):
        data = json.loads(text)  # not a list: the message names what it is (or why it is no JSON)
        raise _NotAList(type(data).__name__)
    i = _after_whitespace(text, i + 1)
    if text.startswith("]", i):
        return
    while True:
        entry, i = decoder.raw_decode(text, i)
        yield entry
        i = _after_whitespace(text, i)
        if text.startswith("]", i):
            break
        if not text.startswith(",", i):
            raise json.JSONDecodeError("Expecting ',' delimiter", text, i)
        i = _after_whitespace(text, i + 1)
    end = _after_whitespace(text, i + 1)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)


def _parse_entry(
    entry: object, where: str, db_path: str, shared: dict | None = None
) -> tuple[CommandFlags | None, str, str | None]:
    """(flags, file, why it is unusable). With `shared`, entries whose commands differ only in
    their source file and outputs get the same flags object (its `file` is the first entry's:
    `Database.flags` gives each file its own)."""
    if not isinstance(entry, dict):
        return None, "", "not an object"
    file, directory = entry.get("file"), entry.get("directory", "")
    if not isinstance(file, str) or not file:
        return None, "", "has no `file`"
    if not isinstance(directory, str):
        return None, "", "`directory` is not a string"
    written = file
    directory = os.path.normpath(os.path.join(where, directory))
    file = os.path.normpath(os.path.join(directory, file))
    args, command = entry.get("arguments"), entry.get("command")
    key = _flags_key(args, command, directory, (written, file)) if shared is not None else None
    if key is not None and shared is not None and (hit := shared.get(key)) is not None:
        return (None, file, hit.problem) if hit.problem else (hit, file, None)
    if args is None:
        if not isinstance(command, str):
            return None, file, "has neither `arguments` nor `command`"
        try:
            args = split_command(command)
        except ValueError as e:
            return None, file, f"its `command` cannot be split ({e})"
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return None, file, "`arguments` is not a list of strings"
    flags = parse_arguments(args, directory, file, db_path)
    if key is not None and shared is not None:
        shared[key] = flags
    if flags.problem:
        return None, file, flags.problem
    return flags, file, None


# The values of flags whose value differs per entry and is dropped anyway (outputs, depfiles).
_PER_ENTRY_VALUE = re.compile(r" (-o|-MF|-MT|-MQ|-MJ|--output-file|--dependency-output) +[^ ]+")


def _flags_key(args: object, command: object, directory: str, spellings: tuple[str, str]) -> tuple | None:
    """What an entry's flags depend on: its command with the source file (as written, or
    absolute) and the per-entry outputs blanked. CMake's 300,000 entries share a few hundred
    keys, so each set of flags is parsed once (60 s -> seconds; one flags object per key)."""
    if isinstance(command, str) and args is None:
        masked = f" {command} "
        for spelling in spellings:
            masked = masked.replace(f" {spelling} ", " \0f ")
        return directory, _PER_ENTRY_VALUE.sub(r" \1 \0v", masked)  # \0: a NUL, in no real flag
    if isinstance(args, list) and all(isinstance(a, str) for a in args):
        out = ["\0f" if a in spellings else a for a in args]
        for i, a in enumerate(out[:-1]):
            if a in _DROP_WITH_VALUE:
                out[i + 1] = "\0v"
        return directory, tuple(out)
    return None


def split_command(command: str) -> list[str]:
    """A `command` split as a shell would; most have no quotes or backslashes, and a plain
    split is then the same and 50 times faster than shlex."""
    if not any(c in command for c in "'\"\\"):
        return command.split()
    return shlex.split(command)


# --- the flags --------------------------------------------------------------------------------

# Flags whose value follows as the next argument and that do not matter for diagnostics: the
# value must be skipped too, or `-o x.o` would leave `x.o` and `-Xcompiler -DX` a define.
_DROP_WITH_VALUE = frozenset(
    {
        "-o",
        "-MF",
        "-MT",
        "-MQ",
        "-MJ",
        "-x",
        "-ccbin",
        "--compiler-bindir",
        "-Xcompiler",
        "--compiler-options",
        "-Xlinker",
        "--linker-options",
        "-Xptxas",
        "--ptxas-options",
        "-Xnvlink",
        "--nvlink-options",
        "-Xfatbin",
        "--fatbin-options",
        "-Xarchive",
        "--archive-options",
        "-odir",
        "--output-directory",
        "-t",
        "--threads",
        "--output-file",
        "--dependency-output",
        "-L",
        "--library-path",
        "-l",
        "--library",
        "-isysroot",
        "--sysroot",
        "-target",
        "--keep-dir",
        "-Xclang",
        "-Xcudafe",
        "-Xarch_device",
        "-Xarch_host",
        "-MD_file",
        "-ldir",
        "--libdevice-directory",
        "-code",
        "--gpu-code",
    }
)
_OPTIONS_FILE = ("--options-file", "-optf")

# What a build makes of the file, by the flag that says so (nvcc's spellings; clang's -c too).
_OUTPUT_FLAGS = {
    "-c": "object",
    "--compile": "object",
    "-dc": "object",
    "--device-c": "object",
    "-dw": "object",
    "--device-w": "object",
    "-cubin": "cubin",
    "--cubin": "cubin",
    "-fatbin": "fatbin",
    "--fatbin": "fatbin",
    "-ptx": "ptx",
    "--ptx": "ptx",
}
# Programs that run the compiler named after them (`ccache nvcc ...`).
_LAUNCHERS = frozenset({"ccache", "sccache", "distcc", "icecc", "buildcache"})

# `--name[=value]` flags that NVRTC and nvcc both take and that change what ptxas reports.
_SHARED_CODEGEN = {
    "maxrregcount": "--maxrregcount",
    "use_fast_math": "--use_fast_math",
    "ftz": "--ftz",
    "prec-div": "--prec-div",
    "prec-sqrt": "--prec-sqrt",
    "fmad": "--fmad",
    "relocatable-device-code": "--relocatable-device-code",
    "extra-device-vectorization": "--extra-device-vectorization",
}
# Draft names of the standards, as NVRTC and nvcc spell them.
_STD_ALIASES = {"c++0x": "c++11", "c++1y": "c++14", "c++1z": "c++17", "c++2a": "c++20"}
_ARCH_RE = re.compile(r"(?:sm|compute|lto)_(\d+[af]?)")
# The values of -std and the shared code-generation flags: words and numbers (`c++17`, `64`,
# `true`); anything else is dropped, so that no database text reaches nvcc's shell as a value.
_PLAIN_VALUE = re.compile(r"[\w.+-]+")


def parse_arguments(args: list[str], directory: str, file: str = "", db_path: str = "") -> CommandFlags:
    """The flags of one compile command (argv, the compiler first) that matter for diagnostics."""
    inc: list[str] = []
    sys_inc: list[str] = []
    macros: list[tuple[str, str]] = []  # ("D", "X=1") / ("U", "X"), in the command's order
    archs: list[str] = []
    extra: list[str] = []
    std: str | None = None
    relaxed = lam = False
    responses = 0
    output = ""

    def absolute(p: str) -> str:
        return os.path.normpath(os.path.join(directory, os.path.expanduser(p)))

    def add_archs(text: str) -> None:
        # `-gencode arch=compute_80,code=[compute_80,sm_80]`: the real targets are the codes;
        # a code that is only PTX (compute_80) still names the arch to check for.
        _, _, code = text.partition("code=")
        for m in _ARCH_RE.finditer(code or text):
            arch = f"sm_{m.group(1)}"
            if arch not in archs:
                archs.append(arch)

    queue = list(args[1:])  # args[0] is the compiler
    compiler = _compiler_name(args)
    i = 0
    while i < len(queue):
        a = queue[i]
        i += 1

        def value(prefixes: tuple[str, ...], a: str = a) -> str | None:
            """The flag's value: glued (`-Ifoo`, `--x=foo`) or the next argument (`-I foo`)."""
            nonlocal i
            v, used = _flag_value(a, queue[i] if i < len(queue) else None, prefixes)
            i += used
            return v

        if not a.startswith("-") and not a.startswith("@"):
            continue  # the source file, or the value of a flag we drop
        if a.startswith("@") or a in _OPTIONS_FILE or a.startswith(tuple(o + "=" for o in _OPTIONS_FILE)):
            # A response file: its flags count as if written here (CMake puts include folders in one).
            name = a[1:] if a.startswith("@") else value(_OPTIONS_FILE)
            responses += 1
            if name and responses <= 16:  # a response file that names itself must end
                more, problem = _read_response_file(absolute(name))
                if problem:
                    return CommandFlags(file=file, database=db_path, problem=problem)
                queue[i:i] = more
            continue
        if a.startswith("-isystem") or a.startswith("--system-include"):
            v = value(("--system-include", "-isystem"))
            if v:
                sys_inc.append(absolute(v))
        elif a.startswith(("--include-path", "-iquote")) or (a.startswith("-I") and a != "-I-"):
            v = value(("--include-path", "-iquote", "-I"))
            if v:
                inc.append(absolute(v))
        elif a.startswith("--define-macro") or a.startswith("-D"):
            v = value(("--define-macro", "-D"))
            if v:
                macros.append(("D", v))
        elif a.startswith("--undefine-macro") or a.startswith("-U"):
            v = value(("--undefine-macro", "-U"))
            if v:
                macros.append(("U", v))
        elif a in ("-std", "--std") or a.startswith(("-std=", "--std=")):
            v = value(("--std", "-std"))
            if v and _PLAIN_VALUE.fullmatch(v):  # a name nvcc takes, never shell text
                v = v.replace("gnu++", "c++")
                std = _STD_ALIASES.get(v, v)
        elif a in ("--expt-relaxed-constexpr", "-expt-relaxed-constexpr"):
            relaxed = True
        elif a in (
            "--extended-lambda",
            "-extended-lambda",
            "--expt-extended-lambda",
            "-expt-extended-lambda",
        ):
            lam = True
        elif a.startswith(("-gencode", "--generate-code")):
            v = value(("--generate-code", "-gencode"))
            if v:
                add_archs(v)
        elif a.startswith(("-arch", "--gpu-architecture", "--cuda-gpu-arch", "--offload-arch")):
            # `-arch=native`, `all`, `all-major` name no arch: keep the default list.
            v = value(("--gpu-architecture", "--cuda-gpu-arch", "--offload-arch", "-arch"))
            if v:
                add_archs(v)
        elif a in ("-include", "--pre-include") or a.startswith("--pre-include="):
            v = value(("--pre-include", "-include"))
            if v:
                extra.append(f"--pre-include={absolute(v)}")
        elif a in _DROP_WITH_VALUE:
            i += 1
        elif a in _OUTPUT_FLAGS:
            output = _OUTPUT_FLAGS[a]
            if a in ("-dc", "--device-c"):
                extra.append("--relocatable-device-code=true")
        elif (flag := _shared_codegen(a, queue, i)) is not None:
            text, used = flag
            i += used
            if text:
                extra.append(text)
        # anything else (-c, -O3, -g, -MD, -fPIC, -Wall, -forward-unknown-to-host-compiler...) is
        # dropped: it changes neither what is an error nor what ptxas reports.
    defines, undefines = net_macros(macros)
    return CommandFlags(
        include_dirs=tuple(dict.fromkeys(inc)),
        system_include_dirs=tuple(dict.fromkeys(sys_inc)),
        defines=tuple(defines),
        undefines=tuple(undefines),
        std=std,
        relaxed_constexpr=relaxed,
        extended_lambda=lam,
        archs=tuple(archs),
        extra=tuple(dict.fromkeys(extra)),
        file=file,
        database=db_path,
        compiler=compiler,
        # nvcc without a flag that stops it compiles and links: its host pass runs.
        output=output or ("object" if compiler == "nvcc" else ""),
    )


def _compiler_name(args: list[str]) -> str:
    """The name of the compiler a command runs (`/usr/local/cuda/bin/nvcc` -> `nvcc`), past a
    launcher (`ccache nvcc`)."""
    for a in args[:2]:
        name = os.path.basename(a)
        if name.endswith(".exe"):
            name = name[: -len(".exe")]
        if name not in _LAUNCHERS:
            return name
    return ""


def net_macros(macros: list[tuple[str, str]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(defines, undefines) with the effect of the -D's and -U's in their command-line order, as
    the preprocessor applies them: `-UX -DX` leaves X defined, `-DX -UX` undefined. The backends
    pass every -D before every -U (`nvrtc_flags`, `NvccArgs.macros`), so a name ends up in one of
    the two lists only: a -U drops the defines of its name before it, a -D the -U before it.
    (A -U before a -D of a predefined macro is left out with it: nvcc then warns of the
    redefinition, and means the same.)"""
    defines: list[str] = []
    undefines: list[str] = []
    for kind, text in macros:
        name = macro_name(text)
        undefines = [u for u in undefines if u != name]
        if kind == "U":
            defines = [d for d in defines if macro_name(d) != name]
        (undefines if kind == "U" else defines).append(text)
    return tuple(defines), tuple(undefines)


def _flag_value(a: str, following: str | None, prefixes: tuple[str, ...]) -> tuple[str | None, int]:
    """(value, arguments used after `a`) of a flag spelled with one of `prefixes`."""
    for p in prefixes:
        if a == p:
            return (following, 1) if following is not None else (None, 0)
        if p.startswith("--") and a.startswith(p + "="):
            return a[len(p) + 1 :], 0
        if not p.startswith("--") and a.startswith(p):
            return a[len(p) :].removeprefix("="), 0
    return None, 0


def _shared_codegen(a: str, queue: list[str], i: int) -> tuple[str, int] | None:
    """`-maxrregcount 64`, `--maxrregcount=64`, `-use_fast_math`, `-rdc=true`... in the spelling
    both backends take, with how many following arguments it used."""
    name, eq, v = a.lstrip("-").partition("=")
    if name == "rdc":
        name = "relocatable-device-code"
    canonical = _SHARED_CODEGEN.get(name)
    if canonical is None:
        return None
    if name in ("use_fast_math", "extra-device-vectorization"):
        return canonical, 0
    if eq:
        return (f"{canonical}={v}", 0) if _PLAIN_VALUE.fullmatch(v) else None
    if i < len(queue):
        return (f"{canonical}={queue[i]}", 1) if _PLAIN_VALUE.fullmatch(queue[i]) else ("", 1)
    return None


def _read_response_file(path: str) -> tuple[list[str], str | None]:
    """The arguments of a response file (`@file`, `--options-file`), or the problem that makes
    the entry unusable: a FIFO or a device (`@/dev/zero`) is never opened for reading."""
    try:
        text = read_regular(path, MAX_RESPONSE_FILE_BYTES).decode("utf-8", "replace")
    except FileProblem as e:
        return [], f"names the response file {path}, which is {e.reason}"
    except OSError:
        return [], None  # missing or unreadable: its flags are missing, as if it were dropped
    try:
        return split_command(text), None
    except ValueError:
        return [], None


# --- the flags for one file -------------------------------------------------------------------


def flags_for(
    path: str, root: str | None = None, named: str | None = None, max_bytes: int = MAX_DATABASE_BYTES
) -> Lookup:
    """The database flags for `path` (the file's own entry, else a borrowed one). The database is
    searched upward from the file, past the workspace `root` (an editor opened in `src/` must find
    `../build/compile_commands.json` as the CLI does); `named`: the json (or its folder) a setting
    names, relative to `root`; `max_bytes`: a larger database is not read. Never raises."""
    try:
        return _flags_for(path, root, named, max_bytes)
    except Exception as e:  # a database must never stop a check
        return Lookup(problem=f"compile_commands.json could not be used: {type(e).__name__}: {e}")


def _flags_for(path: str, root: str | None, named: str | None, max_bytes: int) -> Lookup:
    if named:
        db_path, problem = explicit_database(named, root)
        if problem:
            return Lookup(problem=problem)
    else:
        db_path = find_database(path)
    if db_path is None:
        return Lookup()
    db = load_database(db_path, max_bytes)
    if db.problem:
        return Lookup(problem=db.problem, database=db_path)
    key = os.path.normpath(os.path.abspath(path))
    if key in db.entries:
        return Lookup(db.flags(key), database=db_path)
    if key in db.bad_entries:
        return Lookup(problem=f"{db_path}: the entry for this file {db.bad_entries[key]}", database=db_path)
    borrowed = _borrow(key, db)
    return Lookup(borrowed, database=db_path, borrowed=borrowed is not None)


def _borrow(path: str, db: Database) -> CommandFlags | None:
    """A file's entry in the same folder, else under the nearest ancestor folder (the shallowest
    such file, then by name, so the choice does not depend on the json's order)."""
    start = os.path.dirname(path)
    if start in db.borrowed:
        return db.borrowed[start]
    db.borrowed[start] = _nearest_entry(start, db)
    return db.borrowed[start]


def _nearest_entry(folder: str, db: Database) -> CommandFlags | None:
    while True:
        prefix = folder.rstrip(os.sep) + os.sep
        under = [f for f in db.entries if f.startswith(prefix)]
        if under:
            best = min(under, key=lambda f: (f.count(os.sep), f))
            return db.flags(best)
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def database_stamp(path: str, root: str | None = None, named: str | None = None) -> tuple | None:
    """(json, mtime, size) of the database that governs `path`, for cache keys."""
    try:
        db = explicit_database(named, root)[0] if named else find_database(path)
    except Exception:
        return None
    return (db, stamp(db)) if db else None

"""The fence's look at a candidate's own host object (`nvcc -c`, before it is linked with cudart):
every symbol it imports must be on the allowlist, the only code run at load time must be
nvcc's registration constructor, and its host code must hold no system-call instruction."""

from __future__ import annotations

import re
import shutil
import subprocess

from ..elf import STT_FUNC, Elf, ElfError
from .allowlists import DANGEROUS, allowed_symbol
from .findings import Finding

# nvcc's generated registration of the file's kernels and variables (a static constructor).
REGISTRATION = re.compile(r"^_ZL\d+__sti____cudaRegisterAllv$")
LOAD_TIME_SECTIONS = (".preinit_array", ".ctors", ".dtors", ".fini_array", ".init", ".fini")
_SYSCALL_INSN = re.compile(r"\t(syscall|sysenter|int\s+\$0x80)\b")
OBJDUMP_TIMEOUT_S = 30.0


def _plain(symbol: str) -> str:
    """`_ZL4evilv` -> `evil`, `_Z6systemPKc` -> `system`, a C name as it is."""
    m = re.match(r"^_ZL?(\d+)", symbol)
    if not m:
        return symbol
    size = int(m.group(1))
    return symbol[m.end() : m.end() + size]


def _constructor_finding(name: str) -> Finding:
    if name.startswith("_GLOBAL__sub_I"):
        return Finding(
            "constructor",
            "a static initializer: a global object with a constructor or a global initialised by a "
            "call (e.g. `static Foo f;`, `std::vector<int> v(10);`, or <iostream> with GCC < 13) runs "
            "code when the library loads",
            symbol=name,
        )
    return Finding(
        "constructor", f"`{_plain(name)}` runs when the library loads (a constructor)", symbol=name
    )


def check_imports(elf: Elf) -> list[Finding]:
    out = []
    seen: set[str] = set()
    for sym in elf.symbols():
        if not sym.undefined or sym.name in seen or allowed_symbol(sym.name):
            continue
        seen.add(sym.name)
        plain = _plain(sym.name)
        why = DANGEROUS.get(plain) or DANGEROUS.get(sym.name)
        message = (
            f"imports `{plain}`, which {why}"
            if why
            else f"imports `{plain}`, which is not on the allowlist (CUDA runtime launches, memory, "
            "events, streams, occupancy and errors; libc memory, math and printing)"
        )
        out.append(Finding("symbol", message, symbol=plain))
    return out


def check_load_time_code(elf: Elf) -> list[Finding]:
    out = []
    symbols = elf.symbols()
    for name in LOAD_TIME_SECTIONS:
        section = elf.section(name)
        if section is not None and section.size:
            out.append(Finding("constructor", f"a `{name}` section: code run at load or exit", symbol=name))
    init = elf.section(".init_array")
    if init is None:
        return out
    relocations = elf.relocations(".init_array")
    if len(relocations) != init.size // 8:
        out.append(Finding("constructor", ".init_array entries that are not plain function addresses"))
    functions = [s for s in symbols if s.type == STT_FUNC]
    for r in relocations:
        target = symbols[r.symbol] if 0 <= r.symbol < len(symbols) else None
        if target is None:
            out.append(Finding("constructor", "an .init_array entry this reader cannot follow"))
            continue
        if target.name and target.type == STT_FUNC:
            name = target.name
        else:  # section-relative: the function at that offset of the section
            address = target.value + r.addend
            name = next(
                (f.name for f in functions if f.shndx == target.shndx and f.value == address),
                f"<offset {address:#x}>",
            )
        if not REGISTRATION.match(name):
            out.append(_constructor_finding(name))
    return out


def check_instructions(object_path: str) -> list[Finding]:
    """No raw system call in the host code (a libc call goes through its import instead)."""
    objdump = shutil.which("objdump")
    if objdump is None:
        return [Finding("object", "objdump (binutils) is not installed: the host code cannot be inspected")]
    try:
        proc = subprocess.run(
            [objdump, "-d", "--no-show-raw-insn", object_path],
            capture_output=True,
            text=True,
            timeout=OBJDUMP_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return [Finding("object", f"objdump could not read the object: {e}")]
    if proc.returncode != 0:
        return [Finding("object", f"objdump could not read the object: {proc.stderr.strip()[:200]}")]
    out, function = [], ""
    for line in proc.stdout.splitlines():
        head = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if head:
            function = head.group(1)
            continue
        m = _SYSCALL_INSN.search(line)
        if m:
            out.append(
                Finding(
                    "instruction", f"a `{m.group(1)}` instruction in `{_plain(function)}` (a raw system call)"
                )
            )
    return out


def check_object(object_path: str) -> list[Finding]:
    """Findings in a candidate's host object. An object this cannot read is a finding itself."""
    try:
        with open(object_path, "rb") as f:
            elf = Elf(f.read())
        return check_imports(elf) + check_load_time_code(elf) + check_instructions(object_path)
    except (OSError, ElfError, ValueError) as e:
        return [Finding("object", f"the host object cannot be read: {e}")]

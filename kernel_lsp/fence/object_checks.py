"""The fence's look at a candidate's own host object (`nvcc -c`, before it is linked with cudart):
every symbol it imports must be on the allowlist, the only code run at load time must be
nvcc's registration constructor, an imported function is only ever called (never has its
address taken), and no executable section holds a system-call instruction."""

from __future__ import annotations

import re
import shutil
import subprocess

from ..elf import SHT_RELA, STT_FUNC, Elf, ElfError
from .allowlists import COMPILER_FUNCTION_DATA, DANGEROUS, DATA_IMPORTS, allowed_symbol, is_cxx_data
from .findings import Finding

# nvcc's generated registration of the file's kernels and variables (a static constructor).
REGISTRATION = re.compile(r"^_ZL\d+__sti____cudaRegisterAllv$")
LOAD_TIME_SECTIONS = (".preinit_array", ".ctors", ".dtors", ".fini_array", ".init", ".fini")
_SYSCALL_INSN = re.compile(r"\t(syscall|sysenter|int\s+\$0x80)\b")
OBJDUMP_TIMEOUT_S = 30.0
SHF_EXECINSTR = 0x4
# x86-64 relocations: a call or jump through the PLT is how an import is called; every other
# kind against an imported function (GOTPCREL loads, absolute or PC-relative addresses) stores
# its address as data.
R_X86_64_PLT32 = 4
EM_X86_64 = 62


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


def _executable_sections(elf: Elf) -> list[str]:
    return [s.name for s in elf.sections if s.flags & SHF_EXECINSTR and s.size and s.name]


def check_addresses(elf: Elf) -> list[Finding]:
    """An imported function's address taken anywhere but in a call: `&printf`, `(void*)printf`,
    `printf + 0x...` all load it through the GOT, and from libc's `printf` its `system` is a fixed
    distance away. nvcc's own registration takes only the addresses of the file's own stubs
    (defined here), so an import's address is never needed; the exceptions are data imports
    (`stdout`, typeinfo) and the functions the compiler keeps as data (the C++ personality
    routine, `__cxa_pure_virtual` in vtables)."""
    if int.from_bytes(elf.image[18:20], "little" if elf.endian == "<" else "big") != EM_X86_64:
        return [Finding("object", "the host object is not x86-64: its relocations cannot be read")]
    symbols = elf.symbols()
    executable = set(_executable_sections(elf))
    out, seen = [], set()
    for rela in elf.sections:
        if rela.type != SHT_RELA or not 0 <= rela.info < len(elf.sections):
            continue
        target = elf.sections[rela.info].name
        for r in elf.relocations(target):
            sym = symbols[r.symbol] if 0 <= r.symbol < len(symbols) else None
            if sym is None or not sym.undefined:
                continue  # the object's own code and data: its kernels' stubs, its sections
            name = sym.name
            if name in DATA_IMPORTS or is_cxx_data(name) or name in seen:
                continue
            if r.type == R_X86_64_PLT32 and target in executable:
                continue  # a call
            if name in COMPILER_FUNCTION_DATA and target not in executable:
                continue
            seen.add(name)
            out.append(
                Finding(
                    "address",
                    f"takes the address of the library function `{_plain(name)}` (in {target}), not "
                    "only calling it",
                    symbol=_plain(name),
                )
            )
    return out


def check_instructions(object_path: str, sections: list[str] | None = None) -> list[Finding]:
    """No raw system call in the host code (a libc call goes through its import instead).
    `sections`: the object's executable sections, each disassembled by name (objdump's `-d` picks
    sections by its own flags; naming them makes sure none is skipped)."""
    objdump = shutil.which("objdump")
    if objdump is None:
        return [Finding("object", "objdump (binutils) is not installed: the host code cannot be inspected")]
    named = [f"--section={name}" for name in sections or []]
    try:
        proc = subprocess.run(
            [objdump, "-d", "--no-show-raw-insn", *named, object_path],
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
    shown = set(re.findall(r"^Disassembly of section (.+):$", proc.stdout, re.M))
    for name in sections or []:
        if name not in shown:
            out.append(Finding("instruction", f"the executable section `{name}` could not be disassembled"))
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
        return (
            check_imports(elf)
            + check_load_time_code(elf)
            + check_addresses(elf)
            + check_instructions(object_path, _executable_sections(elf))
        )
    except (OSError, ElfError, ValueError) as e:
        return [Finding("object", f"the host object cannot be read: {e}")]

"""A small reader of 64-bit ELF images (CUBINs, host objects, shared libraries): sections,
symbols and RELA relocations, in pure Python. Readers of CUBIN globals (runner/isolation.py) and
of a candidate's host object (fence/objects.py) share it. Malformed images raise ElfError."""

from __future__ import annotations

import struct
from dataclasses import dataclass

SHT_SYMTAB = 2
SHT_RELA = 4
SHT_DYNSYM = 11
SHN_UNDEF = 0
STT_OBJECT = 1
STT_FUNC = 2
PT_LOAD = 1
PT_GNU_RELRO = 0x6474E552
PF_W = 2


class ElfError(ValueError):
    """Not a 64-bit ELF image, or a broken one."""


@dataclass(frozen=True)
class Section:
    index: int
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


@dataclass(frozen=True)
class Symbol:
    name: str
    value: int
    size: int
    type: int  # STT_*
    bind: int  # STB_*
    shndx: int  # SHN_UNDEF for an import

    @property
    def undefined(self) -> bool:
        return self.shndx == SHN_UNDEF and bool(self.name)


@dataclass(frozen=True)
class Relocation:
    offset: int
    symbol: int  # index into the section's symbol table
    type: int
    addend: int


@dataclass(frozen=True)
class Segment:
    type: int
    flags: int
    vaddr: int
    filesz: int
    memsz: int


class Elf:
    def __init__(self, image: bytes):
        if image[:4] != b"\x7fELF" or len(image) < 64 or image[4] != 2:
            raise ElfError("not a 64-bit ELF image")
        self.image = image
        self.endian = "<" if image[5] == 1 else ">"
        try:
            (shoff,) = struct.unpack_from(self.endian + "Q", image, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from(self.endian + "HHH", image, 0x3A)
            raw = [
                struct.unpack_from(self.endian + "IIQQQQIIQQ", image, shoff + i * shentsize)
                for i in range(shnum)
            ]
            names = raw[shstrndx][4] if shnum else 0
            self.sections = [
                Section(i, self._string(names, r[0]), r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[9])
                for i, r in enumerate(raw)
            ]
        except (struct.error, IndexError, UnicodeDecodeError) as e:
            raise ElfError(f"broken ELF section table: {e}") from None

    def _string(self, table_offset: int, offset: int) -> str:
        start = table_offset + offset
        end = self.image.index(b"\0", start)
        return self.image[start:end].decode()

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def symbols(self, dynamic: bool = False) -> list[Symbol]:
        """The entries of .symtab (or .dynsym), index 0 included (so relocations index them)."""
        kind = SHT_DYNSYM if dynamic else SHT_SYMTAB
        table = next((s for s in self.sections if s.type == kind), None)
        if table is None:
            return []
        strings = self.sections[table.link].offset
        out = []
        try:
            for i in range(table.size // (table.entsize or 24)):
                name, info, _other, shndx, value, size = struct.unpack_from(
                    self.endian + "IBBHQQ", self.image, table.offset + i * (table.entsize or 24)
                )
                out.append(Symbol(self._string(strings, name), value, size, info & 0xF, info >> 4, shndx))
        except (struct.error, IndexError, ValueError, UnicodeDecodeError) as e:
            raise ElfError(f"broken symbol table: {e}") from None
        return out

    def relocations(self, target: str) -> list[Relocation]:
        """The RELA entries that patch section `target` (e.g. `.init_array`)."""
        out = []
        for s in self.sections:
            if s.type != SHT_RELA or not 0 <= s.info < len(self.sections):
                continue
            if self.sections[s.info].name != target:
                continue
            for i in range(s.size // (s.entsize or 24)):
                offset, info, addend = struct.unpack_from(self.endian + "QQq", self.image, s.offset + i * 24)
                out.append(Relocation(offset, info >> 32, info & 0xFFFFFFFF, addend))
        return out

    def segments(self) -> list[Segment]:
        """The program headers (a shared library's loadable segments)."""
        try:
            (phoff,) = struct.unpack_from(self.endian + "Q", self.image, 0x20)
            phentsize, phnum = struct.unpack_from(self.endian + "HH", self.image, 0x36)
            out = []
            for i in range(phnum):
                p_type, p_flags, _off, vaddr, _paddr, filesz, memsz, _align = struct.unpack_from(
                    self.endian + "IIQQQQQQ", self.image, phoff + i * phentsize
                )
                out.append(Segment(p_type, p_flags, vaddr, filesz, memsz))
            return out
        except struct.error as e:
            raise ElfError(f"broken program headers: {e}") from None

    def data(self, section: Section) -> bytes:
        return self.image[section.offset : section.offset + section.size]

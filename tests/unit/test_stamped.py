"""kernel_lsp.compile.stamped: a file's function is computed once per version of the file."""

from __future__ import annotations

from kernel_lsp.compile.stamped import by_stamp


def test_a_file_is_read_once_per_version_and_a_missing_one_gives_the_callers_value(tmp_path):
    reads: list[str] = []

    @by_stamp(maxsize=4, missing="gone")
    def first_line(path: str) -> str:
        reads.append(path)
        with open(path) as f:
            return f.readline().strip()

    header = tmp_path / "h.cuh"
    header.write_text("one\n")
    assert first_line(str(header)) == first_line(str(header)) == "one"
    assert len(reads) == 1
    header.write_text("three\n")  # another size: another version
    assert first_line(str(header)) == "three" and len(reads) == 2
    assert first_line(str(tmp_path / "none.cuh")) == "gone" and len(reads) == 2

"""A template instance's resources name the template's definition in the header that holds it,
and the line of the instance file that leads there (its explicit instantiation, else its
#include), on both backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_lsp.check import check_path
from kernel_lsp.compile import find_toolchain
from kernel_lsp.config import Settings

HERE = Path(__file__).parents[1] / "fixtures" / "template_instances"
HEADER = str(HERE / "kernels.cuh")
SETTINGS = Settings(arch=("sm_90",))


def test_an_explicit_instantiation_points_at_the_template_in_the_header():
    check = check_path(str(HERE / "inst_int_4.cu"), SETTINGS)
    assert check.results[0].compiler == "nvrtc" and check.errors == 0
    (k,) = check.kernels
    assert (k.name, k.function, k.line, k.defined_in, k.defined_at) == (
        "scale<int, 4>",
        "scale",
        2,
        HEADER,
        4,
    )


@pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc backend unavailable")
def test_an_instance_made_by_a_launch_points_at_its_include():
    check = check_path(str(HERE / "launch_double.cu"), SETTINGS)
    assert check.results[0].compiler == "nvcc" and check.errors == 0
    (k,) = check.kernels
    assert (k.name, k.line, k.defined_in, k.defined_at) == ("scale<double, 4>", 2, HEADER, 4)


def test_the_header_checked_alone_defines_no_instance():
    check = check_path(HEADER, SETTINGS)
    assert check.errors == 0 and check.kernels == []


@pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc backend unavailable")
def test_a_librarys_kernels_sit_on_the_include_that_brings_the_library_in(tmp_path):
    path = tmp_path / "sums.cu"
    path.write_text(
        "#include <cstdio>\n#include <cub/cub.cuh>\n"
        "size_t bytes(float* in, float* out, int n) {\n"
        "  size_t b = 0; cub::DeviceReduce::Sum(nullptr, b, in, out, n); return b;\n}\n"
    )
    check = check_path(str(path), SETTINGS)
    assert check.errors == 0
    reduce_kernels = [k for k in check.kernels if k.function.startswith("DeviceReduce")]
    assert reduce_kernels and all(k.line == 2 and not k.defined_in for k in reduce_kernels)

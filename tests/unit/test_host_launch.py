"""Launches read from host code (kernel_lsp.host_launch) on a corpus written in the styles of
cuda-samples, llm.c, vLLM's csrc, benchmark-suite launchers, cooperative launches and
cudaLaunchKernelEx: resolved values, expressions over the launcher's parameters, and a reason
for each launch that cannot be resolved."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kernel_lsp.host_launch import HostLaunch, parse_host

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "host_launch"


def launches(name: str) -> list[HostLaunch]:
    host = parse_host((CORPUS / name).read_text())
    assert host.problems == []
    return host.launches


def by_line(name: str) -> dict[int, HostLaunch]:
    return {x.line: x for x in launches(name)}


def test_cuda_samples_main_with_dim3_configurations():
    found = by_line("matrix_samples.cu")
    mm = found[56]
    assert (mm.instance, mm.function, mm.kind) == ("MatrixMulCUDA<16>", "main", "<<<>>>")
    # dim3 threads(block_size, block_size); dim3 grid(dimsB.x / threads.x, dimsA.y / threads.y)
    assert mm.block.value == (16, 16, 1) and mm.grid.value == (20, 10, 1) and mm.smem.value == (0,)
    add = found[63]
    assert add.kernel == "vectorAdd" and add.grid.value == (196, 1, 1) and add.block.total == 256
    # Over the kernel's parameters the grid follows numElements, which the kernel receives.
    assert add.in_kernel_terms.grid.python() == "cdiv(numElements, 256)"
    rows = found[70]  # dim3 rowGrid(...) spread over two lines, from argv
    assert rows.block.value is None and rows.grid.value is None
    assert rows.block.reason == (
        "block size `rowBlock` depends on a runtime value read from argv "
        "(line 66: `int rowThreads = argc > 1 ? atoi(argv[1]) : 32`)"
    )
    assert [a.param for a in rows.arguments] == ["data", "width", "height", "factor"]
    assert rows.arguments[3].value.value is None and rows.arguments[3].value.reason == ""  # 0.5f


def test_llmc_style_ceil_div_templates_and_block_size_parameters():
    found = by_line("llmc_style.cu")
    gelu = found[53]
    # const int grid_size = CEIL_DIV(N, block_size), block_size a parameter of the launcher.
    assert gelu.grid.python() == "cdiv(N, block_size)" and gelu.block.python() == "block_size"
    assert gelu.block.symbols == ["block_size"] and gelu.block.total is None
    residual = found[59]
    assert residual.template_args == ("floatX", "floatX") and residual.block.total == 512
    assert residual.grid.python() == "cdiv(N, 512)"
    assert found[64].instance == "softmax_forward_kernel<128>"  # constexpr block_size = 128
    assert found[64].block.total == 128 and found[64].grid.python() == "N"
    assert found[65].instance == "softmax_forward_kernel<512>"
    stats = found[73]  # 2 * WARP_SIZE (32U) and the ceil_div<T> helper, inside a template launcher
    assert stats.block.total == 64 and stats.grid.python() == "cdiv(B * T_, 64)"
    assert stats.in_kernel_terms.grid.python() == "cdiv(N, 64)"  # N = B * T_ is what the kernel gets
    bounds = parse_host((CORPUS / "llmc_style.cu").read_text()).bounds
    assert (bounds["residual_forward_kernel"].max_threads, bounds["residual_forward_kernel"].min_blocks) == (
        "512",
        "2",
    )
    assert bounds["softmax_forward_kernel"].template_params == ("BLOCK_SIZE",)


def test_vllm_style_macros_lambdas_and_tensor_sizes():
    found = by_line("vllm_style.cu")
    gate = found[66]  # the launch is in LAUNCH_ACTIVATION_GATE_KERNEL's body, inside a lambda
    assert gate.macro == "LAUNCH_ACTIVATION_GATE_KERNEL" and gate.function == "silu_and_mul"
    assert gate.template_args == ("scalar_t", "vllm::silu_kernel<scalar_t>", "true")
    assert gate.stream == "stream"
    assert gate.block.reason.startswith(
        "block size `block` depends on `input.size(-1)`, a size known only at run time"
    )
    assert "in macro `LAUNCH_ACTIVATION_GATE_KERNEL`" in gate.block.reason
    assert gate.grid.reason.startswith("grid `grid` depends on `input.numel()`")
    norm = found[77]
    assert norm.instance == "rms_norm_kernel<scalar_t>" and norm.function == "rms_norm"
    assert "line 70: `int hidden_size = input.size(-1)`" in norm.block.reason
    assert [a.source for a in norm.arguments[:3]] == ["out", "input", "weight"]
    assert all(a.launcher_param for a in norm.arguments[:4]) and not norm.arguments[4].launcher_param
    small = found[89]
    assert small.block.total == 256 and small.grid.value is None  # dim3 block(256): known


def test_benchmark_launchers_extern_c():
    host = parse_host((CORPUS / "bench_launchers.cu").read_text())
    found = {x.line: x for x in host.launches}
    add = found[50]
    assert (add.grid.python(), add.block.python(), add.smem.python()) == ("cdiv(n, 256)", "256", "0")
    mm = found[57]
    assert mm.grid.python() == "(cdiv(N, 16), cdiv(M, 16))" and mm.block.value == (16, 16, 1)
    partial = found[66]
    assert partial.smem.value == (1024,)  # BLOCK_SIZE * sizeof(float)
    final = found[67]
    assert final.grid.value == (1, 1, 1) and final.block.total == 1024
    assert final.arguments[2].value.python() == "cdiv(size, 256)"  # `blocks` passed as count
    scale = found[72]
    assert (
        scale.grid.python() == "cdiv(length, 256)" and scale.in_kernel_terms.grid.python() == "cdiv(n, 256)"
    )
    adaptive = found[79]
    assert adaptive.block.reason == (
        "block size `threads` depends on `threads`, set in several places before the launch "
        "(line 77: `int threads = 256`, line 78: `threads = 64`)"
    )
    # The launcher as data, for host-entry specs and skeletons.
    reduce = host.function("reduce_sum")
    assert reduce.extern_c and reduce.kernels == ["partial_sums_kernel", "final_sum_kernel"]
    assert [(p.type, p.name) for p in reduce.params] == [
        ("const float*", "input"),
        ("float*", "result"),
        ("int", "size"),
    ]
    assert reduce.temporaries == ["d_partial"]
    (alloc,) = reduce.allocations
    assert alloc.bytes.python() == "cdiv(size, 256) * 4"
    (memset,) = reduce.memsets
    assert memset.target == "result" and memset.bytes.value == (4,)
    args = {a.param: a for a in partial.arguments}
    assert args["x"].source == "input" and args["x"].launcher_param
    assert args["partial"].source == "d_partial" and args["partial"].temporary
    assert {f.name for f in host.launchers} == {
        "vector_add",
        "matmul",
        "reduce_sum",
        "scale",
        "scale_adaptive",
    }
    # One buffer, two kernels: `d_partial` is `partial` of both; `blocks` is the second's `count`.
    assert reduce.buffers == {
        "input": [(0, "x")],
        "d_partial": [(0, "partial"), (1, "partial")],
        "size": [(0, "n")],
        "result": [(1, "out")],
        "blocks": [(1, "count")],
    }
    assert (
        host.function("vector_add").signature
        == 'extern "C" void vector_add(const float* a, const float* b, float* c, int n)'
    )


def test_cooperative_and_api_launches():
    found = by_line("cooperative.cu")
    coop = found[38]
    assert coop.kind == "cudaLaunchCooperativeKernel" and coop.cooperative
    assert coop.block.total == 128
    assert coop.grid.reason == (
        "grid `dimGrid` depends on `prop`, set at run time by `cudaGetDeviceProperties(...)` "
        "(line 30: `cudaGetDeviceProperties(&prop, device)`)"
    )
    # The kernel's arguments come from the `void* kernelArgs[]` array.
    assert [(a.param, a.source) for a in coop.arguments] == [
        ("x", "x"),
        ("partial", "partial"),
        ("out", "out"),
        ("n", "n"),
    ]
    assert coop.arguments[1].temporary
    fixed = found[44]
    assert fixed.grid.value == (132, 1, 1) and fixed.stream == "nullptr"
    axpy = found[50]
    assert axpy.kind == "cudaLaunchKernel" and axpy.grid.python() == "cdiv(n, 512)"
    assert [a.param for a in axpy.arguments] == ["a", "x", "y", "n"]


def test_launch_kernel_ex_config_fields():
    found = by_line("launch_ex.cu")
    rows = found[27]
    assert rows.kind == "cudaLaunchKernelEx"
    assert (rows.grid.python(), rows.block.total, rows.smem.value) == ("rows", 256, (2048,))
    assert [a.param for a in rows.arguments] == ["out", "in", "rows", "cols"]
    clustered = found[39]  # designated initializer
    assert (clustered.grid.python(), clustered.block.total, clustered.smem.value) == (
        "cdiv(n, 128)",
        128,
        (0,),
    )


def test_template_heavy_macro_in_a_switch_and_the_environment():
    found = launches("template_heavy.cu")
    reduce = [x for x in found if x.kernel == "block_reduce"]
    assert [(x.instance, x.block.total, x.grid.python()) for x in reduce] == [
        ("block_reduce<float, 128>", 128, "cdiv(n, 128)"),
        ("block_reduce<float, 512>", 512, "cdiv(n, 512)"),
        ("block_reduce<float, 256>", 256, "cdiv(n, 256)"),
    ]
    assert {x.macro for x in reduce} == {"LAUNCH_REDUCE"}
    env = next(x for x in found if x.kernel == "env_sized")
    assert env.block.reason == (
        "block size `threads` depends on an environment variable "
        '(line 53: `const char* v = getenv("THREADS")`)'
    )


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (
            "template <int B> void f(float* x) { k<<<1, B>>>(x); }",
            "block size `B` depends on `B`, a template parameter of `f`",
        ),
        (
            "void f(float* x) { for (int t = 32; t <= 1024; t *= 2) k<<<1, t>>>(x); }",
            "block size `t` depends on `t`, the variable of the loop at line 2",
        ),
        (
            "void f(float* x) { int bs, g; cudaOccupancyMaxPotentialBlockSize(&g, &bs, k, 0, 0); k<<<g, bs>>>(x); }",
            "block size `bs` depends on `bs`, set at run time by `cudaOccupancyMaxPotentialBlockSize(...)`",
        ),
        (
            "void f(float* x) { k<<<1, threads>>>(x); }",
            "block size `threads` depends on `threads`, which is neither",
        ),
        ("void f(float* x, Cfg c) { k<<<1, c.block>>>(x); }", "a member of the parameter `c` of `f`"),
        ("void f(float* x, int n) { k<<<1, n * 0.5>>>(x); }", "a floating-point value"),
    ],
)
def test_each_unresolved_block_says_why(code, reason):
    (launch,) = parse_host("__global__ void k(float* x) {}\n" + code).launches
    assert launch.block.total is None and reason in launch.block.reason, launch.block.reason


def test_launches_the_c_way():
    code = """
__global__ void k(float* x, int n) {}
#define GRID(n) ((n) + 127) / 128
void f(float* x, int n) {
    int threads = 64;
    int blocks = (n + threads - 1) / threads;   // read before threads changes
    threads = 128;
    k<<<blocks, threads, threads * sizeof(float)>>>(x, n);
    dim3 g; g.x = GRID(n); g.y = 2;
    k<<<g, dim3(32, 4)>>>(x, n);
    k <<< dim3{4, 4}, 256 >>> (x, n);
    if (n > 10) { int threads = 512; k<<<1, threads>>>(x, n); }
}
"""
    found = parse_host(code).launches
    assert [x.grid.python() for x in found] == ["cdiv(n, 64)", "(cdiv(n, 128), 2)", "(4, 4)", "1"]
    assert [x.block.total for x in found] == [128, 128, 256, 512]
    assert found[0].smem.value == (512,)


def test_parsing_never_fails():
    rng = random.Random(7)
    texts = [p.read_text() for p in sorted(CORPUS.glob("*.cu"))]
    for text in texts:
        for _ in range(40):
            a, b = sorted(rng.randrange(len(text)) for _ in range(2))
            mangled = (
                text[:a] + rng.choice(["", "{", "}", "(", "<<<", ">>>", ";", "#define X(", '"']) + text[b:]
            )
            host = parse_host(mangled)  # never raises; what it cannot read is a problem or a reason
            for launch in host.launches:
                assert launch.block.resolved or launch.block.reason

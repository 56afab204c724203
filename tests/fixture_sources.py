"""CUDA sources several test modules share."""

VADD = """\
// kernel-lsp: launch vadd grid=cdiv(n, 256) block=256
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""


# The fake GPU's vector add (runner/fake.py): a spec and the one launch step the worker takes.
FAKE_VADD_SPEC = """\
from kernel_lsp.spec import In, Out, Scalar, Spec
SPEC = Spec(
    kernel="vadd",
    sizes=[{"n": 1}, {"n": 1000}],
    timing_sizes=[{"n": 4096}],
    args={"a": In("float32"), "b": In("float32"), "c": Out("float32"), "n": Scalar("int32")},
    reference=lambda a, b: {"c": a + b},
)
"""
FAKE_VADD_STEPS = [
    {"kernel": "vadd", "symbol": "k", "params": ["a", "b", "c", "n"], "grid": "1", "block": "1", "smem": "0"}
]


def flags_project(root) -> str:
    """A vadd whose operator comes from a header in include/ and a define, both found only
    through build/compile_commands.json; with its spec. Returns the .cu's path."""
    import json
    from pathlib import Path

    root = Path(root)
    (root / "include").mkdir()
    (root / "include" / "vadd_op.cuh").write_text("#define VADD_OP(x, y) (((x) + (y)) * ONE)\n")
    (root / "src").mkdir()
    kernel = root / "src" / "vadd.cu"
    kernel.write_text('#include "vadd_op.cuh"\n' + VADD.replace("a[i] + b[i]", "VADD_OP(a[i], b[i])"))
    (root / "src" / "vadd.spec.py").write_text(
        "from kernel_lsp.spec import In, Out, Scalar, Spec\n"
        "SPEC = Spec(kernel='vadd', sizes=[{'n': 1}, {'n': 1000}, {'n': 1 << 20}],\n"
        "    args={'a': In('float32'), 'b': In('float32'), 'c': Out('float32', atol=1e-6), 'n': Scalar('int32')},\n"
        "    reference=lambda a, b, **_: {'c': a + b}, work=lambda n: {'bytes': 12 * n, 'flops': n})\n"
    )
    (root / "build").mkdir()
    command = "nvcc -I../include -DONE=1.0f -c ../src/vadd.cu -o vadd.o"
    (root / "build" / "compile_commands.json").write_text(
        json.dumps([{"directory": ".", "command": command, "file": "../src/vadd.cu"}])
    )
    return str(kernel)


def cookbook() -> dict[str, tuple[str, str]]:
    """{section title: (.cu text, spec text)} from docs/specs.md's `## Cookbook` section."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "specs.md").read_text()
    book = text.split("\n## Cookbook\n", 1)[1].split("\n## ", 1)[0]
    out = {}
    for section in book.split("\n### ")[1:]:
        title = section.splitlines()[0].strip()
        cuda = re.findall(r"```cuda\n(.*?)```", section, re.S)
        python = re.findall(r"```python\n(.*?)```", section, re.S)
        assert len(cuda) == 1 and len(python) == 1, f"{title}: one ```cuda and one ```python block each"
        out[title] = (cuda[0], python[0])
    return out


def write_example(folder, title: str, examples: dict[str, tuple[str, str]]):
    """The example's `.cu` and spec written into `folder`; returns the `.cu`'s path."""
    import re

    cu_text, spec_text = examples[title]
    stem = re.sub(r"\W+", "_", title.lower()).strip("_")
    cu = folder / f"{stem}.cu"
    cu.write_text(cu_text)
    (folder / f"{stem}.spec.py").write_text(spec_text)
    return cu


def narrow_tune(path, narrowed: str) -> None:
    """Replace the file's `// kernel-lsp: tune ...` line with a smaller space (`BLOCK=256 ITEMS=1,2`)
    whose every value is one of the original's: a GPU test then searches it to the end in
    seconds, and stops being meaningful loudly if the sample's space changes."""
    import re
    from pathlib import Path

    path = Path(path)
    text = path.read_text()
    [line] = re.findall(r"^// kernel-lsp: tune .*$", text, re.MULTILINE)

    def space(spec: str) -> dict[str, set[str]]:
        return {name: set(values.split(",")) for name, values in (t.split("=") for t in spec.split())}

    original, smaller = space(line.removeprefix("// kernel-lsp: tune ")), space(narrowed)
    assert all(name in original and values <= original[name] for name, values in smaller.items()), (
        f"{path.name}: {narrowed!r} is not inside its tune line {line!r}: update this test"
    )
    path.write_text(text.replace(line, f"// kernel-lsp: tune {narrowed}"))

"""The pure-Python demangler against c++filt on the entry symbols nvcc gives real kernels, and on
any input it neither raises nor hangs."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_lsp.compile.demangle import demangle

# Entry symbols nvcc 13 wrote for the kernels of tests/fixtures/real_projects and of a file with
# namespaces, nested class types, packs, negative literals, bools, an anonymous namespace and a
# lambda as template argument; with the instance names kernel-lsp shows for them.
SYMBOLS = {
    "_Z9vectorAddPKfS0_Pfi": "vectorAdd",
    "_Z24layernorm_forward_kernelIfEvPT_PfPKS0_ii": "layernorm_forward_kernel<float>",
    "_Z5totalI4PairEvPKT_Pfi": "total<Pair>",
    "_ZN4vllm19silu_and_mul_kernelIdLi4EEEvPT_PKS1_i": "silu_and_mul_kernel<double, 4>",
    "_ZN4vllm4reluEPdi": "relu",
    "_ZN4vllm3twoI4PairS1_EEvPT_PT0_PKS2_PKS4_": "two<Pair, Pair>",
    "_ZN4vllm3twoIf4PairEEvPT_PT0_PKS2_PKS4_": "two<float, Pair>",
    "_ZN4vllm5totalIN5outer5inner3VecEEEvPKT_PS4_i": "total<outer::inner::Vec>",
    "_ZN4vllm8rms_normIdLi128ELb0EEEvPT_PKS1_fi": "rms_norm<double, 128, false>",
    "_ZN4vllm3vecEPN5outer5inner3VecEPKS2_PS3_": "vec",
    "_ZN37_GLOBAL__N__240c0fbb_5_dm_cu_6861ba6c4anonEPlhx": "anon",
    "_Z4packIJiPf4PairEEvDpT_": "pack<int, float*, Pair>",
    "_Z3negILin3EEvPi": "neg<-3>",
    "_Z5plainPfPKfjcs": "plain",
    "_Z5applyIZ3runPfEUlfE_EvS0_T_": "apply<run(float*)::{lambda(float)#1}>",
    "_ZSt3fooIiEvPiS_": "foo<int>",  # an unscoped template name in std:: is a substitution
}


@pytest.mark.parametrize("symbol", sorted(SYMBOLS))
def test_instance_names(symbol):
    d = demangle(symbol)
    assert d is not None and d.instance == SYMBOLS[symbol]


def _east_const(t: str) -> str:
    """c++filt writes `float const*`; kernel-lsp writes `const float*`."""
    return re.sub(r"^(.+?) const(\*|&|$)", r"const \1\2", t)


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt (binutils) not installed")
@pytest.mark.parametrize("symbol", sorted(SYMBOLS))
def test_agrees_with_cxxfilt(symbol):
    d = demangle(symbol)
    assert d is not None
    theirs = subprocess.run(["c++filt", symbol], capture_output=True, text=True, check=True).stdout.strip()
    theirs = theirs.removeprefix("void ")
    # c++filt: `ns::name<args>(params)`; the parameter list is the group closed by the last `)`.
    depth, split = 0, -1
    for i in range(len(theirs) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(theirs[i], 0)
        if depth == 0:
            split = i
            break
    head, params = theirs[:split], theirs[split + 1 : -1]
    qualified = d.qualified + (f"<{', '.join(d.template_args)}>" if d.template_args else "")
    assert head == qualified
    assert ", ".join(d.params) == ", ".join(_east_const(p) for p in _split_top(params))


def _split_top(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"<": 1, "(": 1, "{": 1, ">": -1, ")": -1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def test_extern_c_and_garbage_are_none():
    assert demangle("vector_add") is None
    assert demangle("_Z") is None
    assert demangle("_ZN3ops") is None
    assert demangle("_Z" + "9" * 5000) is None
    assert demangle("_Z3fooIT_EvS9999_") is None


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="_ZNIJELSTKPRVrOvifdlmjbcDpUlKz0123456789abcxyz", max_size=60))
def test_never_raises(text):
    for symbol in (text, "_Z" + text, "_ZN" + text):
        d = demangle(symbol)
        assert d is None or isinstance(d.instance, str)

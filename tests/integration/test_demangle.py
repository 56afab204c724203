"""The pure-Python demangler against c++filt on the entry symbols nvcc gives real kernels, and on
any input it neither raises nor hangs."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_lsp.compile.demangle import demangle, demangle_full, fallback_name

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


CORPUS = Path(__file__).parents[1] / "fixtures" / "mangled"
# Every entry symbol nvcc 13.5 gave the kernels of tests/fixtures/mangled/*.cu (collect.py):
# CUB reductions, scans and sorts, thrust::transform, __device__ function and member pointers as
# template arguments, lambdas, packs, enums, half types, decltype parameters.
CORPUS_SYMBOLS = (CORPUS / "symbols.txt").read_text().split()
_CXXFILT = shutil.which("c++filt")


def cxxfilt(symbol: str) -> str:
    assert _CXXFILT
    return subprocess.run([_CXXFILT, symbol], capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.skipif(_CXXFILT is None, reason="c++filt (binutils) not installed")
@pytest.mark.parametrize("symbol", sorted(set(SYMBOLS) | set(CORPUS_SYMBOLS)))
def test_agrees_with_cxxfilt(symbol):
    theirs = cxxfilt(symbol)
    if theirs == symbol:  # c++filt cannot read it (decltype of a parameter): see below
        assert symbol in BEYOND_CXXFILT
        return
    assert demangle_full(symbol) == theirs


# Symbols binutils' c++filt leaves as they are, with what they mean.
BEYOND_CXXFILT = {
    "_Z5widenIsEvT_PDTplfL0p_Li1EE": "void widen<short>(short, decltype(({parm#1}) + (1))*)",
}


@pytest.mark.parametrize("symbol", sorted(BEYOND_CXXFILT))
def test_symbols_cxxfilt_cannot_read(symbol):
    assert demangle_full(symbol) == BEYOND_CXXFILT[symbol]


@pytest.mark.parametrize("symbol", CORPUS_SYMBOLS)
def test_every_corpus_kernel_gets_a_readable_name(symbol):
    d = demangle(symbol)
    assert d is not None, symbol
    assert "_Z" not in d.instance and "<?>" not in d.instance
    # ABI-versioning inline namespaces are not what a user writes.
    assert "_V_" not in d.instance and "::__4::" not in d.instance


READABLE = {
    # The CUB kernel once shown as `plus<...>`: its own name, then what it was instantiated with.
    "_ZN3cub16_V_300500_SM_9006detail6reduce28DeviceReduceSingleTileKernelINS2_26policy_selector_from_typesIfj"
    "N4cuda3std3__44plusIvEELNS5_9execution3__411determinism15__determinism_tE1EEEPfSF_iS9_ffNS7_8identityEEE"
    "vT0_T1_T2_T3_T4_T6_": (
        "cub::detail::reduce::DeviceReduceSingleTileKernel",
        "DeviceReduceSingleTileKernel<cub::detail::reduce::policy_selector_from_types<float, unsigned int, "
        "cuda::std::plus<void>, (cuda::execution::determinism::__determinism_t)1>, float*, float*, int, "
        "cuda::std::plus<void>, float, float, cuda::std::identity>",
    ),
    "_Z5applyIXadL_ZN3ops6squareEfEEEvPfi": ("apply", "apply<&ops::square>"),
    "_Z4foldIfXadL_ZN3ops3addIfEET_S2_S2_EEEvPKS2_PS2_i": ("fold", "fold<float, &ops::add<float>>"),
    "_Z6methodIN3ops8ParticleEXadL_ZNKS1_4normEvEEEvPKT_Pf": (
        "method",
        "method<ops::Particle, &ops::Particle::norm>",
    ),
    "_Z10read_tableIXadL_ZN3ops5tableEEEEvPi": ("read_table", "read_table<&ops::table>"),
    "_Z5each2IZN3app5scaleEPfifEUlT_iE_EvS1_S2_": (
        "each2",
        "each2<app::scale(float*, int, float)::{lambda(auto:1, int)#1}>",
    ),
    "_Z8literalsILb1ELc120ELy18446744073709551615ELl5EEvPi": (
        "literals",
        "literals<true, 'x', 18446744073709551615ull, 5l>",
    ),
    "_Z4manyIJEEvDpPT_": ("many", "many<>"),
}


@pytest.mark.parametrize("symbol", sorted(READABLE))
def test_readable_names(symbol):
    d = demangle(symbol)
    assert d is not None and (d.qualified, d.instance) == READABLE[symbol]


def test_parameters_read_as_written():
    d = demangle("_Z4foldIfXadL_ZN3ops3addIfEET_S2_S2_EEEvPKS2_PS2_i")
    assert d is not None and d.params == ("const float*", "float*", "int")
    d = demangle("_Z5fixedIfLi4EEvPAT0__T_")
    assert d is not None and d.params == ("float (*) [4]",)
    d = demangle("_Z4manyIJfi6__halfEEvDpPT_")
    assert d is not None and d.params == ("float*", "int*", "__half*")


def test_a_symbol_it_cannot_read_is_named_without_the_symbol():
    assert fallback_name("_ZN3cub6detail10SomeKernelIXszQ1E") == "SomeKernel<?>"
    assert fallback_name("_Z") == "<?>"
    assert fallback_name("vector_add") == "vector_add"


def _base36(n: int) -> str:
    digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return digits[n] if n < 36 else _base36(n // 36) + digits[n % 36]


def test_output_of_a_symbol_built_to_explode_is_capped():
    # Pair<S, S> where S is the previous Pair: the text doubles with each one, 2**40 characters
    # if nothing stopped it; ten are still shown whole.
    pairs = ["4PairIiiE"] + [f"4PairIS{_base36(2 * k - 1)}_S{_base36(2 * k - 1)}_E" for k in range(1, 41)]
    ten = demangle("_Z1fIJ" + "".join(pairs[:10]) + "EEvv")
    assert ten is not None and len(ten.instance) > 20_000
    start = time.monotonic()
    assert demangle("_Z1fIJ" + "".join(pairs) + "EEvv") is None
    assert time.monotonic() - start < 1


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

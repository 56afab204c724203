// Device helpers shared by the project's kernels. Its configuration comes from the build
// (CMakeLists.txt's target_compile_definitions), so it compiles only with the project's flags:
// kernel-lsp finds them in build/compile_commands.json, borrowing the entry of a source file
// for this header, which has none of its own.
#pragma once

#ifndef BLUR_RADIUS
#error "BLUR_RADIUS comes from CMakeLists.txt (target_compile_definitions)"
#endif

namespace vec_math {

// A plain constexpr function: host-only to the compiler, callable from device code with
// --expt-relaxed-constexpr (which CMakeLists.txt sets for CUDA sources).
constexpr int window() { return 2 * BLUR_RADIUS + 1; }

__device__ __forceinline__ int clamp_index(int i, int n)
{
    return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

}  // namespace vec_math

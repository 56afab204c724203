// The host API of the blur library.
#pragma once

#include <cuda_runtime.h>

// out[i] = mean of in[i - BLUR_RADIUS .. i + BLUR_RADIUS], clamped at the ends.
cudaError_t box_blur(const float* in, float* out, int n, cudaStream_t stream);

// A PyTorch CUDA extension shaped like vLLM's csrc/activation_kernels.cu: a templated kernel,
// a host function taking torch::Tensor, TORCH_CHECK, AT_DISPATCH_FLOATING_TYPES and the
// PYBIND11_MODULE that `torch.utils.cpp_extension.load` builds. kernel-lsp adds torch's include
// folders and the Python headers when torch is importable in its interpreter, and says what to
// install when it is not.
#include <torch/extension.h>

#include <algorithm>

template <typename scalar_t>
__device__ __forceinline__ scalar_t silu(const scalar_t& x)
{
    return x / (static_cast<scalar_t>(1) + exp(-x));
}

// out[token, i] = silu(input[token, i]) * input[token, d + i]
template <typename scalar_t>
__global__ void silu_and_mul_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ input, const int d)
{
    const int64_t token = blockIdx.x;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
        const scalar_t x = input[token * 2 * d + i];
        const scalar_t y = input[token * 2 * d + d + i];
        out[token * d + i] = silu(x) * y;
    }
}

void silu_and_mul(torch::Tensor& out, torch::Tensor& input)
{
    TORCH_CHECK(input.is_cuda() && out.is_cuda(), "silu_and_mul: tensors must be on a CUDA device");
    TORCH_CHECK(input.size(-1) % 2 == 0, "silu_and_mul: the last dimension must be even, got ", input.size(-1));
    const int d = static_cast<int>(input.size(-1) / 2);
    const int64_t num_tokens = input.numel() / input.size(-1);
    const dim3 grid(num_tokens);
    const dim3 block(std::min(d, 1024));
    // vLLM takes at::cuda::getCurrentCUDAStream() from <ATen/cuda/CUDAContext.h>; that header
    // needs a CUDA build of torch (the CPU wheel lacks c10/cuda's generated headers), so this
    // sample launches on the default stream and checks with either build.
    const cudaStream_t stream = nullptr;
    AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "silu_and_mul_kernel", [&] {
        silu_and_mul_kernel<scalar_t><<<grid, block, 0, stream>>>(
            out.data_ptr<scalar_t>(), input.data_ptr<scalar_t>(), d);
    });
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
    m.def("silu_and_mul", &silu_and_mul, "out = silu(x[..., :d]) * x[..., d:]");
}

import * as assert from 'node:assert/strict';
import { findKernelAtCursor, findKernels, maskNonCode } from '../../common/kernels';

/** The offset of the first `|` in `marked`, and the text without it. */
function withCursor(marked: string): [string, number] {
    const offset = marked.indexOf('|');
    assert.ok(offset >= 0, 'test text needs a | cursor');
    return [marked.slice(0, offset) + marked.slice(offset + 1), offset];
}

const SOURCE = `#include <cuda_runtime.h>
// __global__ void commented_out(int* x) {}

__device__ float square(float x) { return x * x; }

__global__ void add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) scale(T* x, T factor, int n) {
    const char* s = "__global__ void in_string(";
    x[0] *= factor;
}

extern "C" __global__
void
reduce_sum(float* out, const float* in) {}
`;

describe('findKernels', () => {
    it('finds every kernel, skipping comments, strings and __launch_bounds__', () => {
        assert.deepEqual(
            findKernels(SOURCE).map((kernel) => kernel.name),
            ['add', 'scale', 'reduce_sum'],
        );
    });

    it('starts a template kernel at its template line', () => {
        const scale = findKernels(SOURCE).find((kernel) => kernel.name === 'scale');
        assert.equal(SOURCE.slice(scale?.start).split('\n')[0], 'template <typename T, int BLOCK>');
    });

    it('handles specifiers before __global__ and other attributes', () => {
        const source = 'static __global__ void __maxnreg__(32) __cluster_dims__(2, 1, 1) k1(int* p) {}\n' +
            'void __global__ k2() {}\n';
        assert.deepEqual(findKernels(source).map((kernel) => kernel.name), ['k1', 'k2']);
    });

    it('ignores __global__ in a macro definition', () => {
        assert.deepEqual(findKernels('#define KERNEL __global__ \\\n  void\nint x;\n'), []);
    });

    it('ignores a __global__ with no name before the statement ends', () => {
        assert.deepEqual(findKernels('__global__ ;\nint f(int);\n'), []);
    });
});

describe('findKernelAtCursor', () => {
    it('names the kernel whose body holds the cursor', () => {
        const [text, offset] = withCursor(SOURCE.replace('if (i < n)', 'if (i |< n)'));
        assert.equal(findKernelAtCursor(text, offset), 'add');
    });

    it('names the kernel on the cursor line, even left of __global__', () => {
        const [text, offset] = withCursor(SOURCE.replace('__global__ void add', '|__global__ void add'));
        assert.equal(findKernelAtCursor(text, offset), 'add');
    });

    it('counts the template line as part of the kernel', () => {
        const [text, offset] = withCursor(SOURCE.replace('template <typename T', 'template <|typename T'));
        assert.equal(findKernelAtCursor(text, offset), 'scale');
    });

    it('takes the nearest kernel above when the cursor is between kernels', () => {
        const [text, offset] = withCursor(SOURCE.replace('extern "C"', '|\nextern "C"'));
        assert.equal(findKernelAtCursor(text, offset), 'scale');
    });

    it('finds the last kernel at the end of the file', () => {
        assert.equal(findKernelAtCursor(SOURCE, SOURCE.length), 'reduce_sum');
    });

    it('has no answer above the first kernel', () => {
        const [text, offset] = withCursor(SOURCE.replace('__device__ float', '|__device__ float'));
        assert.equal(findKernelAtCursor(text, offset), undefined);
        assert.equal(findKernelAtCursor('', 0), undefined);
    });
});

describe('maskNonCode', () => {
    it('keeps the length and the newlines', () => {
        const source = 'a /* b\nc */ "d\\"e" \'f\' // g\n#if X\nh';
        const masked = maskNonCode(source);
        assert.equal(masked.length, source.length);
        assert.equal(masked.split('\n').length, source.split('\n').length);
        assert.equal(masked.replace(/\s+/g, ' ').trim(), 'a h');
    });
});

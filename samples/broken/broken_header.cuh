// A helper header with a mistake on purpose: the return type `flaot` does not exist.
// Included by header_error.cu; the error belongs to this file, line 6, and should also be shown
// at the #include line of header_error.cu.
#pragma once

__device__ flaot squared(float v)
{
    return v * v;
}

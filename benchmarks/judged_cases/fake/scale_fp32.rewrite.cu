// y = 2 x, four elements a step (the fake GPU's rewrite).
extern "C" void scale_fp32(const float* x, float* y, int n)
{
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        y[i] = 2.0f * x[i];
        y[i + 1] = 2.0f * x[i + 1];
        y[i + 2] = 2.0f * x[i + 2];
        y[i + 3] = 2.0f * x[i + 3];
    }
    for (; i < n; ++i) y[i] = 2.0f * x[i];
}

// The fake GPU's null entry: one element written.
extern "C" void null_entry(float* out, int n)
{
    out[0] = 1.0f;
}

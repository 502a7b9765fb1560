// Deterministic math (rule N3): every function is a fixed sequence of IEEE-754 operations with
// explicit FMA, so its result is the same bits on every machine, compiler and SIMD width. No
// libm. Accuracy targets are stated per function and tested against libm in tests/core.
// SIMD kernels re-implement the same sequences lane-wise (same constants, same op order).
#pragma once

#include <cstdint>

namespace invar {

float det_exp(float x);       // e^x, ≤ 2 ulp on [-87.3, 88.7]; 0 below, +inf above, NaN→NaN
float det_log(float x);       // ln x, ≤ 2 ulp for x > 0; -inf at 0, NaN below
float det_log1p(float x);     // ln(1+x), accurate near 0
float det_sigmoid(float x);   // 1/(1+e^-x)
float det_silu(float x);      // x·sigmoid(x), computed as x/(1+e^-x)
float det_softplus(float x);  // x > 20 ? x : ln(1 + e^x)   (ggml threshold)
float det_erf(float x);       // erf x: its series in double (≤ 72 terms), ±1 for |x| ≥ 4
float det_rsqrt(float x);  // 1/sqrt(x) = 1.0f / std::sqrt(x) (sqrt is a correctly rounded IEEE op)
// Measured (tests/core): exp 1.0 ulp, log 0.8, log1p 2.4, sigmoid 2.2, silu 2.0, softplus 2.5,
// rsqrt 1.5, erf 0.5. A NaN result's sign and payload are unspecified.
// sin and cos in double for RoPE tables: ≤ 1.5 ulp (double) for |x| ≤ 1e7, computed with a fixed
// Cody–Waite range reduction and fixed polynomials.
void det_sincos(double x, double* s, double* c);
double det_pow(double base, double e);  // base^e for base > 0 (RoPE frequencies), ≤ 64 ulp
double det_log_d(double x);             // ln x in double (RoPE scaling's ranges), ≤ 2 ulp

}  // namespace invar

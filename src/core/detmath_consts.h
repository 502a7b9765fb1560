// Constants of the deterministic float functions, shared by the scalar code (detmath.cpp) and the
// lane-wise SIMD copies (detmath_simd.h) so both run the same IEEE operation sequence.
#pragma once

namespace invar::detmath {

// exp: e^x = 2^n · e^r, n = round(x·log2 e), r = x − n·ln2 (two-part ln 2, FMA), |r| ≤ ln2/2.
// e^r = 1 + r + r²·P(r), P of degree 5 (Cephes expf minimax coefficients).
inline constexpr float kExpHi = 88.72283935546875f;   // above: +inf
inline constexpr float kExpLo = -87.33654022216797f;  // below: 0 (results would be subnormal)
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kRoundMagic = 12582912.0f;  // 1.5·2^23: t + M − M rounds t to nearest
inline constexpr float kLn2Hi = 0.693147182464599609375f;  // float(ln 2)
inline constexpr float kLn2Lo = -1.904654323148236e-09f;   // ln 2 − kLn2Hi
inline constexpr float kExpP5 = 1.9875691500e-4f;
inline constexpr float kExpP4 = 1.3981999507e-3f;
inline constexpr float kExpP3 = 8.3334519073e-3f;
inline constexpr float kExpP2 = 4.1665795894e-2f;
inline constexpr float kExpP1 = 1.6666665459e-1f;
inline constexpr float kExpP0 = 5.0000001201e-1f;

// log: x = m·2^e with m in [√½, √2); ln x = f − f²/2 + f³·P(f) + e·ln2, f = m − 1 (Cephes logf).
inline constexpr float kSqrt2 = 1.41421356237309505f;
inline constexpr float kLogP8 = 7.0376836292e-2f;
inline constexpr float kLogP7 = -1.1514610310e-1f;
inline constexpr float kLogP6 = 1.1676998740e-1f;
inline constexpr float kLogP5 = -1.2420140846e-1f;
inline constexpr float kLogP4 = 1.4249322787e-1f;
inline constexpr float kLogP3 = -1.6668057665e-1f;
inline constexpr float kLogP2 = 2.0000714765e-1f;
inline constexpr float kLogP1 = -2.4999993993e-1f;
inline constexpr float kLogP0 = 3.3333331174e-1f;
inline constexpr float kLogLn2Hi = 0.693359375f;     // 355/512: e·hi exact
inline constexpr float kLogLn2Lo = -2.12194440e-4f;  // ln 2 − hi

}  // namespace invar::detmath

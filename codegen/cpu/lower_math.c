/*
 * lower_math.c — exp, erf, tanh and log as LLVM IR arithmetic, for every kernel that needs
 * them (the elementwise ops exp, erf, tanh, log, sigmoid and gelu with their gradients, the
 * softmax family).
 *
 * A call to libm (erff, tanhf, or llvm.exp / llvm.log, which become calls to expf and logf) in
 * a loop keeps LLVM from vectorising it: each element pays a call and the loop runs one element
 * at a time. Written as plain arithmetic, the same text vectorises, and the vector body and the
 * scalar remainder compute the same bits, so a result does not depend on where an element falls
 * in the loop.
 */
#include "codegen/cpu/cg.h"

#include <math.h>
#include <string.h>

#define TWO_OVER_SQRT_PI 1.1283791670955126
/* ln2 in two parts for float, hi + lo: k * hi is exact for the exponents k of a float */
#define LN2_HI_F 0.693359375
#define LN2_LO_F -2.12194440e-4

static bool is_dbl(const char *ty) {
  return !strcmp(ty, "double");
}

/* exp(z) = 2^k * exp(r) with k = round(z / ln2) and r = z - k ln2, |r| <= ln2 / 2; exp(r) by
 * its Taylor series, to degree 7 in float (truncation error 5e-9 relative) and 13 in double
 * (4e-18), so the result is within a few ulps. z is clamped first to where the result is 0 or
 * inf anyway (the clamp's ordered compares leave NaN alone, and NaN stays NaN throughout). */
cg_val cg_exp(cg_fn *f, const char *ty, cg_val z) {
  bool dbl = is_dbl(ty);
  const char *it = dbl ? "i64" : "i32";
  double lo = dbl ? -746.0 : -105.0, hi = dbl ? 710.0 : 89.0;
  cg_val z1 = cg_sel(f, cg_op2(f, "fcmp olt", ty, z, cg_fconst(ty, lo)), ty, cg_fconst(ty, lo), z);
  cg_val z2 =
      cg_sel(f, cg_op2(f, "fcmp ogt", ty, z1, cg_fconst(ty, hi)), ty, cg_fconst(ty, hi), z1);
  /* k: adding 1.5 * 2^(mantissa bits) rounds to an integer, which then sits in the low bits.
   * No fast-math flags here, or LLVM could fold (t + M) - M back to t. */
  double magic = dbl ? 6755399441055744.0 : 12582912.0;
  cg_val t = cg_op2(f, "fmul", ty, z2, cg_fconst(ty, 1.4426950408889634));
  cg_val tm = cg_op2(f, "fadd", ty, t, cg_fconst(ty, magic));
  cg_val kf = cg_op2(f, "fsub", ty, tm, cg_fconst(ty, magic));
  cg_val bits = cg_conv(f, "bitcast", ty, tm, it);
  cg_val ki = cg_op2(f, "sub", it, bits,
                     dbl ? cg_const_i64(0x4338000000000000LL) : cg_const_i64(0x4B400000));
  /* r = z - k ln2 with ln2 in two parts: k * hi is exact, so only k * lo rounds */
  double ln2_hi = dbl ? 6.93147180369123816490e-01 : LN2_HI_F;
  double ln2_lo = dbl ? 1.90821492927058770002e-10 : LN2_LO_F;
  cg_val r = cg_op2(f, "fsub", ty, z2, cg_op2(f, "fmul", ty, kf, cg_fconst(ty, ln2_hi)));
  r = cg_op2(f, "fsub", ty, r, cg_op2(f, "fmul", ty, kf, cg_fconst(ty, ln2_lo)));
  int deg = dbl ? 13 : 7;
  double fact = 1;
  for (int i = 2; i <= deg; i++) fact *= i;
  cg_val p = cg_fconst(ty, 1 / fact);
  for (int i = deg - 1; i >= 0; i--) {
    fact = i > 0 ? fact / (i + 1) : 1;
    cg_val pr = cg_op2(f, "fmul contract", ty, p, r);
    p = cg_op2(f, "fadd contract", ty, pr, cg_fconst(ty, 1 / fact));
  }
  /* 2^k as 2^k1 * 2^k2 (k1 = floor(k/2)), each a normal number even where 2^k is not, so
   * results that are subnormal round once, and ones that overflow become inf */
  int mant = dbl ? 52 : 23, bias = dbl ? 1023 : 127;
  cg_val k1 = cg_op2(f, "ashr", it, ki, cg_const_i64(1));
  cg_val k2 = cg_op2(f, "sub", it, ki, k1);
  cg_val res = p;
  cg_val ks[2] = {k1, k2};
  for (int i = 0; i < 2; i++) {
    cg_val e = cg_op2(f, "add", it, ks[i], cg_const_i64(bias));
    cg_val sh = cg_op2(f, "shl", it, e, cg_const_i64(mant));
    res = cg_op2(f, "fmul", ty, res, cg_conv(f, "bitcast", it, sh, ty));
  }
  return res;
}

/* erf in float. |x| < 1: x times the Taylor series of erf(x) / x in x^2 to degree 10 (the
 * next term is 1e-9 of the sum at |x| = 1). |x| >= 1: 1 - t (a1 + a2 t + ... + a5 t^4) e^(-x^2)
 * with t = 1 / (1 + p |x|), Abramowitz and Stegun's 7.1.26 (absolute error at most 1.5e-7,
 * under 2e-7 relative there since erf(1) > 0.84). Both are computed and one selected, and the
 * sign put back; NaN fails the |x| < 1 test and propagates through the second form. */
cg_val cg_erf(cg_fn *f, cg_val x) {
  const char *ty = "float";
  cg_val a = cg_tmp(f);
  cg_line(f, "%s = call float @llvm.fabs.f32(float %s)", a.s, x.s);
  cg_val x2 = cg_op2(f, "fmul", ty, a, a);
  /* near 0: 2/sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n+1)), by Horner in x^2 */
  double fact[11] = {1};
  for (int n = 1; n <= 10; n++) fact[n] = fact[n - 1] * n;
  cg_val p = cg_fconst(ty, TWO_OVER_SQRT_PI / (fact[10] * 21));
  for (int n = 9; n >= 0; n--) {
    double c = TWO_OVER_SQRT_PI * (n % 2 ? -1 : 1) / (fact[n] * (2 * n + 1));
    p = cg_op2(f, "fadd", ty, cg_op2(f, "fmul", ty, p, x2), cg_fconst(ty, c));
  }
  cg_val near = cg_op2(f, "fmul", ty, a, p);
  /* away from 0: 1 - t q(t) e^(-x^2) */
  static const double as[5] = {0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429};
  cg_val den =
      cg_op2(f, "fadd", ty, cg_fconst(ty, 1), cg_op2(f, "fmul", ty, a, cg_fconst(ty, 0.3275911)));
  cg_val t = cg_op2(f, "fdiv", ty, cg_fconst(ty, 1), den);
  cg_val q = cg_fconst(ty, as[4]);
  for (int k = 3; k >= 0; k--)
    q = cg_op2(f, "fadd", ty, cg_op2(f, "fmul", ty, q, t), cg_fconst(ty, as[k]));
  cg_val e = cg_exp(f, ty, cg_op2(f, "fsub", ty, cg_fconst(ty, 0), x2));
  cg_val far = cg_op2(f, "fsub", ty, cg_fconst(ty, 1),
                      cg_op2(f, "fmul", ty, cg_op2(f, "fmul", ty, t, q), e));
  cg_val r = cg_sel(f, cg_op2(f, "fcmp olt", ty, a, cg_fconst(ty, 1)), ty, near, far);
  cg_val neg = cg_tmp(f);
  cg_line(f, "%s = fneg float %s", neg.s, r.s);
  return cg_sel(f, cg_op2(f, "fcmp olt", ty, x, cg_fconst(ty, 0)), ty, neg, r);
}

/* tanh in float. |x| < 0.625: x times its Taylor series in x^2 to degree 8 (the next term is
 * 2e-9 of the sum there); above, 1 - 2 / (e^(2|x|) + 1), which has no cancellation there, with
 * 2|x| capped at 88 (tanh is 1 in float long before). The sign is put back with copysign, so
 * -0 stays -0; NaN fails the first test and propagates through the second form. */
cg_val cg_tanh(cg_fn *f, cg_val x) {
  const char *ty = "float";
  static const double c[9] = {1,
                              -1.0 / 3,
                              2.0 / 15,
                              -17.0 / 315,
                              62.0 / 2835,
                              -1382.0 / 155925,
                              21844.0 / 6081075,
                              -929569.0 / 638512875,
                              6404582.0 / 10854718875};
  cg_val a = cg_tmp(f);
  cg_line(f, "%s = call float @llvm.fabs.f32(float %s)", a.s, x.s);
  cg_val x2 = cg_op2(f, "fmul", ty, a, a);
  cg_val p = cg_fconst(ty, c[8]);
  for (int k = 7; k >= 0; k--)
    p = cg_op2(f, "fadd", ty, cg_op2(f, "fmul", ty, p, x2), cg_fconst(ty, c[k]));
  cg_val near = cg_op2(f, "fmul", ty, a, p);
  cg_val two_a = cg_op2(f, "fmul", ty, a, cg_fconst(ty, 2));
  two_a =
      cg_sel(f, cg_op2(f, "fcmp ogt", ty, two_a, cg_fconst(ty, 88)), ty, cg_fconst(ty, 88), two_a);
  cg_val e = cg_exp(f, ty, two_a);
  cg_val q = cg_op2(f, "fdiv", ty, cg_fconst(ty, 2), cg_op2(f, "fadd", ty, e, cg_fconst(ty, 1)));
  cg_val far = cg_op2(f, "fsub", ty, cg_fconst(ty, 1), q);
  cg_val r = cg_sel(f, cg_op2(f, "fcmp olt", ty, a, cg_fconst(ty, 0.625)), ty, near, far);
  cg_val out = cg_tmp(f);
  cg_line(f, "%s = call float @llvm.copysign.f32(float %s, float %s)", out.s, r.s, x.s);
  return out;
}

/* log in float: x = 2^e m with m in [sqrt(1/2), sqrt(2)) taken from the bits (subnormals scaled
 * up by 2^23 first), log m = 2 atanh(s) with s = (m - 1) / (m + 1), |s| < 0.172, its series to
 * s^11 (the next term is 3e-10 of it), and e ln2 added with ln2 in two parts. 0 gives -inf,
 * below 0 NaN, inf inf, NaN NaN. */
cg_val cg_log(cg_fn *f, cg_val x) {
  const char *ty = "float";
  cg_val sub = cg_op2(f, "fcmp olt", ty, x, cg_fconst(ty, 1.17549435e-38));
  cg_val xs = cg_sel(f, sub, ty, cg_op2(f, "fmul", ty, x, cg_fconst(ty, 8388608.0)), x);
  cg_val bits = cg_conv(f, "bitcast", ty, xs, "i32");
  cg_val ex =
      cg_op2(f, "and", "i32", cg_op2(f, "lshr", "i32", bits, cg_const_i64(23)), cg_const_i64(255));
  ex = cg_op2(f, "sub", "i32", ex, cg_sel(f, sub, "i32", cg_const_i64(150), cg_const_i64(127)));
  cg_val mb = cg_op2(f, "or", "i32", cg_op2(f, "and", "i32", bits, cg_const_i64(0x7FFFFF)),
                     cg_const_i64(0x3F800000));
  cg_val m = cg_conv(f, "bitcast", "i32", mb, ty);
  cg_val big = cg_op2(f, "fcmp ogt", ty, m, cg_fconst(ty, 1.41421356));
  m = cg_sel(f, big, ty, cg_op2(f, "fmul", ty, m, cg_fconst(ty, 0.5)), m);
  ex = cg_op2(f, "add", "i32", ex, cg_sel(f, big, "i32", cg_const_i64(1), cg_const_i64(0)));
  cg_val s = cg_op2(f, "fdiv", ty, cg_op2(f, "fsub", ty, m, cg_fconst(ty, 1)),
                    cg_op2(f, "fadd", ty, m, cg_fconst(ty, 1)));
  cg_val s2 = cg_op2(f, "fmul", ty, s, s);
  cg_val q = cg_fconst(ty, 1.0 / 11);
  for (int k = 9; k >= 1; k -= 2)
    q = cg_op2(f, "fadd", ty, cg_op2(f, "fmul", ty, q, s2), cg_fconst(ty, 1.0 / k));
  cg_val lm = cg_op2(f, "fmul", ty, cg_op2(f, "fmul", ty, s, cg_fconst(ty, 2)), q);
  cg_val ef = cg_conv(f, "sitofp", "i32", ex, ty);
  cg_val lo = cg_op2(f, "fadd", ty, lm, cg_op2(f, "fmul", ty, ef, cg_fconst(ty, LN2_LO_F)));
  cg_val r = cg_op2(f, "fadd", ty, cg_op2(f, "fmul", ty, ef, cg_fconst(ty, LN2_HI_F)), lo);
  r = cg_sel(f, cg_op2(f, "fcmp oeq", ty, x, cg_fconst(ty, 0)), ty, cg_fconst(ty, -INFINITY), r);
  r = cg_sel(f, cg_op2(f, "fcmp olt", ty, x, cg_fconst(ty, 0)), ty, cg_fconst(ty, NAN), r);
  r = cg_sel(f, cg_op2(f, "fcmp oeq", ty, x, cg_fconst(ty, INFINITY)), ty, x, r);
  return cg_sel(f, cg_op2(f, "fcmp uno", ty, x, x), ty, x, r);
}

/* nc_surrogate.h — surrogate derivatives of the spike (Heaviside) function
 * for BPTT, shared by the trainer's options (nc_train.h) and the backward
 * kernels (nc_grad_ops.h, which implements them).  Kept apart so that the
 * pipeline's public headers do not pull in the kernel headers. */
#ifndef NC_SURROGATE_H
#define NC_SURROGATE_H

/* Surrogate derivative of the Heaviside step H(x), x = m − θ
 * (conversion.md §4.3, SpikingJelly's formulas):
 *   TRIANGLE  (1/α²)·max(0, α − |x|)          α = γ, default 1
 *   SIGMOID   α·σ(αx)(1 − σ(αx))              default α = 4
 *   ATAN      α / (2(1 + (π/2·αx)²))          default α = 2
 *   RECT      (1/α)·1[|x| < α/2]              default α = 1 */
typedef enum nc_surrogate {
    NC_SURROGATE_TRIANGLE,
    NC_SURROGATE_SIGMOID,
    NC_SURROGATE_ATAN,
    NC_SURROGATE_RECT
} nc_surrogate;

float nc_surrogate_grad(nc_surrogate kind, float alpha, float x);
float nc_surrogate_default_alpha(nc_surrogate kind);
/* "triangle", "sigmoid", "atan", "rect" ("unknown" out of range); parse
 * takes those names, case-insensitively. */
const char *nc_surrogate_name(nc_surrogate kind);
int nc_surrogate_parse(const char *text, nc_surrogate *out);  /* 0 ok, -1 bad    */

#endif

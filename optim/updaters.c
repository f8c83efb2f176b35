/* optim/updaters.c: the built-in updaters, each written in the updater text
 * format that optim/spec.c reads (the same one a user's updater uses):
 *
 *   [defaults]  name = number ...         hyperparameters' default values
 *   [scalars]   expression-language statements run once per step in f64 on
 *               0-d tensors (bias corrections from the run-time step t)
 *   [update]    the update, run over every parameter group
 *   [apply]     an optional second pass, after [update]'s per-group sums
 *
 * Reserved names: p (the parameter), g (its gradient), t (the step, 1 on the
 * first), gscale (the factor the gradient is multiplied by: 1, or the loss
 * scale's inverse times the clip coefficient, see optim/amp.c). The rules
 * are PyTorch's (torch.optim documentation, version 2) written element by
 * element, with weight decay `wd`; state tensors start at zero, as torch
 * creates them. */
#include <string.h>

#include "optim.h"

/* The gradient a step follows: maximize (0 or 1) steps up it, as torch's
 * option of that name; the factor (1 - 2*maximize)*gscale is computed in
 * f64 once and is exactly +-gscale. */
#define STEP_GRAD "(1 - 2*maximize)*gscale*g"
/* ... with L2 weight decay added, as _g. */
#define L2_GRAD "_g = " STEP_GRAD " + wd*p\n"

/* torch.optim.SGD with momentum = 0: no state. */
static const char sgd[] =
    "[defaults]\n"
    "lr = 0.001; wd = 0; maximize = 0\n"
    "[update]\n"
    "p = p - lr*(" STEP_GRAD " + wd*p)\n";

/* torch.optim.SGD with momentum: buf = g on the first step, then
 * momentum*buf + (1 - dampening)*g; Nesterov steps along g + momentum*buf.
 * torch starts the buffer at a copy of the first gradient, not at zero: it
 * takes that value on the step t = 1 inside the rule. */
static const char sgd_momentum[] =
    "[defaults]\n"
    "lr = 0.001; momentum = 0.9; dampening = 0; nesterov = 0; wd = 0; maximize = 0\n"
    "[update]\n"
    "_d = " STEP_GRAD " + wd*p\n"
    "buf = where(t > 1, momentum*buf + (1 - dampening)*_d, _d)\n"
    "p = p - lr*where(nesterov != 0, _d + momentum*buf, buf)\n";

/* The Adam family up to [update] (wd: weight decay's default), and its
 * moments of _g; amsgrad's running maximum of v. */
#define ADAM_HEAD(wd)                                                         \
  "[defaults]\n"                                                              \
  "lr = 0.001; b1 = 0.9; b2 = 0.999; eps = 1e-8; wd = " wd "; maximize = 0\n" \
  "[scalars]\n"                                                               \
  "bc1 = 1 - b1**t; bc2s = sqrt(1 - b2**t)\n"                                 \
  "[update]\n"
#define ADAM_MOMENTS         \
  "m = b1*m + (1 - b1)*_g\n" \
  "v = b2*v + (1 - b2)*_g*_g\n"
#define AMSGRAD "vmax = max(vmax, v)\n"

/* torch.optim.Adam: L2 weight decay added to the gradient. */
static const char adam[] =
    ADAM_HEAD("0")
    L2_GRAD
    ADAM_MOMENTS
    "p = p - (lr/bc1)*m/(sqrt(v)/bc2s + eps)\n";

/* Adam with amsgrad: the denominator uses the running maximum of v.
 * Options torch spells as booleans that change which state exists
 * (amsgrad, centered, momentum) are separate updaters, so that none moves a
 * tensor it does not need; nesterov, which does not, is a hyperparameter
 * (0 or 1). */
static const char adam_amsgrad[] =
    ADAM_HEAD("0")
    L2_GRAD
    ADAM_MOMENTS
    AMSGRAD
    "p = p - (lr/bc1)*m/(sqrt(vmax)/bc2s + eps)\n";

/* torch.optim.AdamW: decoupled weight decay, p shrinks by lr*wd first. */
static const char adamw[] =
    ADAM_HEAD("0.01")
    "_g = " STEP_GRAD "\n"
    ADAM_MOMENTS
    "p = p*(1 - lr*wd) - (lr/bc1)*m/(sqrt(v)/bc2s + eps)\n";

static const char adamw_amsgrad[] =
    ADAM_HEAD("0.01")
    "_g = " STEP_GRAD "\n"
    ADAM_MOMENTS
    AMSGRAD
    "p = p*(1 - lr*wd) - (lr/bc1)*m/(sqrt(vmax)/bc2s + eps)\n";

/* torch.optim.Adagrad: the learning rate decays as lr / (1 + (t-1)*lr_decay);
 * the accumulator starts at initial_accumulator_value = 0. */
static const char adagrad[] =
    "[defaults]\n"
    "lr = 0.01; lr_decay = 0; eps = 1e-10; wd = 0; maximize = 0\n"
    "[scalars]\n"
    "clr = lr/(1 + (t - 1)*lr_decay)\n"
    "[update]\n"
    L2_GRAD
    "acc = acc + _g*_g\n"
    "p = p - clr*_g/(sqrt(acc) + eps)\n";

/* torch.optim.RMSprop, in its four shapes (centered: the variance about the
 * running mean ga; momentum: a buffer of the scaled steps). RMSPROP_HEAD
 * is every shape's up to v (momentum: its default, or nothing). */
#define RMSPROP_HEAD(momentum)                                              \
  "[defaults]\n"                                                            \
  "lr = 0.01; alpha = 0.99; eps = 1e-8; " momentum "wd = 0; maximize = 0\n" \
  "[update]\n"                                                              \
  L2_GRAD                                                                   \
  "v = alpha*v + (1 - alpha)*_g*_g\n"
#define RMSPROP_MEAN "ga = alpha*ga + (1 - alpha)*_g\n"

static const char rmsprop[] =
    RMSPROP_HEAD("")
    "p = p - lr*_g/(sqrt(v) + eps)\n";

static const char rmsprop_centered[] =
    RMSPROP_HEAD("")
    RMSPROP_MEAN
    "p = p - lr*_g/(sqrt(v - ga*ga) + eps)\n";

static const char rmsprop_momentum[] =
    RMSPROP_HEAD("momentum = 0.9; ")
    "buf = momentum*buf + _g/(sqrt(v) + eps)\n"
    "p = p - lr*buf\n";

static const char rmsprop_centered_momentum[] =
    RMSPROP_HEAD("momentum = 0.9; ")
    RMSPROP_MEAN
    "buf = momentum*buf + _g/(sqrt(v - ga*ga) + eps)\n"
    "p = p - lr*buf\n";

/* Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms",
 * Algorithm 2): the sign of an interpolation of m and g; m moves after.
 * sign keeps NaN (c != c), as torch.sign does. */
static const char lion[] =
    "[defaults]\n"
    "lr = 0.0001; b1 = 0.9; b2 = 0.99; wd = 0\n"
    "[update]\n"
    "_g = gscale*g\n"
    "_c = b1*m + (1 - b1)*_g\n"
    "_s = where(_c != _c, _c, (_c > 0) - (_c < 0))\n"
    "p = p*(1 - lr*wd) - lr*_s\n"
    "m = b2*m + (1 - b2)*_g\n";

/* LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning",
 * Algorithm 2 with bias correction and the trust ratio ||p|| / ||update||,
 * 1 when either norm is 0): [update] moves m and v and sums p*p and u*u per group; [apply]
 * recomputes u from them (cheaper than storing it) and steps by the trust
 * ratio. The sums are taken in f64 (their terms are names declared f64):
 * an f32 sum over a 38M-element embedding is off by up to 1e-3, and the
 * trust ratio with it. */
static const char lamb[] =
    "[defaults]\n"
    "lr = 0.001; b1 = 0.9; b2 = 0.999; eps = 1e-6; wd = 0.01\n"
    "[scalars]\n"
    "bc1 = 1 - b1**t; bc2 = 1 - b2**t\n"
    "[update]\n"
    "_pw: f64; _uw: f64\n"
    "_g = gscale*g\n"
    ADAM_MOMENTS
    "_u = (m/bc1)/(sqrt(v/bc2) + eps) + wd*p\n"
    "_pw = p; _uw = _u\n"
    "wn = sum(_pw*_pw); un = sum(_uw*_uw)\n"
    "[apply]\n"
    "_u = (m/bc1)/(sqrt(v/bc2) + eps) + wd*p\n"
    "_r = where(wn > 0, where(un > 0, sqrt(wn)/sqrt(un), 1), 1)\n"
    "p = p - lr*_r*_u\n";

static const optim_builtin_t builtins[] = {
    {"sgd", sgd},
    {"sgd_momentum", sgd_momentum},
    {"adam", adam},
    {"adam_amsgrad", adam_amsgrad},
    {"adamw", adamw},
    {"adamw_amsgrad", adamw_amsgrad},
    {"adagrad", adagrad},
    {"rmsprop", rmsprop},
    {"rmsprop_centered", rmsprop_centered},
    {"rmsprop_momentum", rmsprop_momentum},
    {"rmsprop_centered_momentum", rmsprop_centered_momentum},
    {"lion", lion},
    {"lamb", lamb},
};

int optim_builtin_count(void) { return (int)(sizeof builtins / sizeof builtins[0]); }

const optim_builtin_t* optim_builtin_at(int i) {
  return i >= 0 && i < optim_builtin_count() ? &builtins[i] : NULL;
}

const optim_builtin_t* optim_builtin_find(const char* name) {
  if (!name) return NULL;
  for (int i = 0; i < optim_builtin_count(); i++)
    if (strcmp(builtins[i].name, name) == 0) return &builtins[i];
  return NULL;
}

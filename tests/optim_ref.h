/* tests/optim_ref.h: the built-in updaters' rules written plainly in
 * double precision, one parameter group at a time, as the published rules
 * state them (torch.optim's documentation; Lion: Chen et al. 2023; LAMB: You
 * et al. 2019 with bias correction), for the optimizer tests to compare
 * with. What the kernels see is modelled exactly: hyperparameters reach
 * them in f64, and every value computed from scalars alone (1 - b2, lr /
 * bc1, 1 - lr*wd, the gradient factor (1 - 2*maximize)*gs) is computed in
 * f64 and rounded to f32 once, where it meets a tensor (F()), as torch
 * computes its scalars in double; the arithmetic here is then f64
 * throughout, but for one sum: the gradient with L2 weight decay, g +
 * wd*p, which torch materializes as a tensor of the parameter's dtype, is
 * rounded to f32 (coupled_grad). A kernel forms it with one rounding too
 * when gs*g and wd*p are exact (gs = 1, wd a power of two, as the tests
 * choose); otherwise, near g = -wd*p, the sum cancels and its rounding
 * error is no longer small relative to it.
 *
 * ref_step updates p and the state arrays (in the updater's state order,
 * which ref_state_names gives and the tests check against the library's)
 * in place; 0 for an updater it does not know. */
#ifndef UJ_TESTS_OPTIM_REF_H
#define UJ_TESTS_OPTIM_REF_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline double F(double x) { return (double)(float)x; }

typedef struct {
  double lr, wd, momentum, dampening, nesterov, b1, b2, eps, lr_decay, alpha, maximize;
} ref_hparams_t;

/* The field of h holding the hyperparameter the updaters call `name`, or
 * NULL for a name the reference does not know. */
static inline double* ref_hparam(ref_hparams_t* h, const char* name) {
  static const struct { const char* name; size_t offset; } table[] = {
      {"lr", offsetof(ref_hparams_t, lr)},         {"wd", offsetof(ref_hparams_t, wd)},
      {"momentum", offsetof(ref_hparams_t, momentum)}, {"dampening", offsetof(ref_hparams_t, dampening)},
      {"nesterov", offsetof(ref_hparams_t, nesterov)}, {"b1", offsetof(ref_hparams_t, b1)},
      {"b2", offsetof(ref_hparams_t, b2)},         {"eps", offsetof(ref_hparams_t, eps)},
      {"lr_decay", offsetof(ref_hparams_t, lr_decay)}, {"alpha", offsetof(ref_hparams_t, alpha)},
      {"maximize", offsetof(ref_hparams_t, maximize)}};
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strcmp(table[i].name, name) == 0) return (double*)(void*)((char*)h + table[i].offset);
  return NULL;
}

/* The state tensors of each built-in, in the order the library lists them. */
static inline const char* ref_state_names(const char* u) {
  static const struct { const char *name, *states; } table[] = {
      {"sgd", ""},           {"sgd_momentum", "buf"},      {"adam", "m v"},
      {"adam_amsgrad", "m v vmax"}, {"adamw", "m v"},      {"adamw_amsgrad", "m v vmax"},
      {"adagrad", "acc"},    {"rmsprop", "v"},             {"rmsprop_centered", "v ga"},
      {"rmsprop_momentum", "v buf"}, {"rmsprop_centered_momentum", "v ga buf"},
      {"lion", "m"},         {"lamb", "m v"}};
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strcmp(table[i].name, u) == 0) return table[i].states;
  return NULL;
}

static inline double coupled_grad(double gs, double g, double wd, double p) { return F(gs * g + wd * p); }

/* An engine's new value `got` against the reference `ref`, `before` being
 * the value the step started from: a few roundings of the new value plus a
 * relative error tol of the change the step made. Both NaN, or the same
 * infinity, agree. */
static inline int ref_agrees(double got, double ref, double before, double tol) {
  if (isnan(ref) || isnan(got)) return isnan(ref) && isnan(got);
  if (isinf(ref) || isinf(got)) return got == ref;
  return fabs(got - ref) <= 8 * 0x1p-24 * fabs(ref) + tol * fabs(ref - before);
}

static inline double ref_sign(double c) { return c != c ? c : (double)((c > 0) - (c < 0)); }

/* One step of updater u on one group of n elements. gs: the gradient factor. */
static inline int ref_step(const char* u, const ref_hparams_t* h, int64_t t, double gs, int64_t n, double* p,
                           const double* g, double** s) {
  double lr = F(h->lr), wd = F(h->wd), mom = F(h->momentum), b1 = F(h->b1), b2 = F(h->b2);
  double eps = F(h->eps), alpha = F(h->alpha);
  double one_b1 = F(1 - h->b1), one_b2 = F(1 - h->b2), one_damp = F(1 - h->dampening), one_alpha = F(1 - h->alpha);
  double decay = F(1 - h->lr * h->wd); /* p*(1 - lr*wd) */
  /* the gradient factor: -gs under maximize, in the rules torch gives it */
  int signed_rule = strcmp(u, "lion") != 0 && strcmp(u, "lamb") != 0;
  gs = F((signed_rule ? 1 - 2 * h->maximize : 1) * gs);
  if (strcmp(u, "sgd") == 0) {
    for (int64_t i = 0; i < n; i++) p[i] -= lr * coupled_grad(gs, g[i], wd, p[i]);
  } else if (strcmp(u, "sgd_momentum") == 0) {
    for (int64_t i = 0; i < n; i++) {
      double d = coupled_grad(gs, g[i], wd, p[i]);
      s[0][i] = t > 1 ? mom * s[0][i] + one_damp * d : d;
      p[i] -= lr * (h->nesterov != 0 ? d + mom * s[0][i] : s[0][i]);
    }
  } else if (strncmp(u, "adam", 4) == 0) {
    int decoupled = strncmp(u, "adamw", 5) == 0, ams = strstr(u, "amsgrad") != NULL;
    double bc1 = 1 - pow(h->b1, (double)t), bc2s = F(sqrt(1 - pow(h->b2, (double)t)));
    double step_size = F(h->lr / bc1);
    for (int64_t i = 0; i < n; i++) {
      double gi = decoupled ? gs * g[i] : coupled_grad(gs, g[i], wd, p[i]);
      s[0][i] = b1 * s[0][i] + one_b1 * gi;
      s[1][i] = b2 * s[1][i] + one_b2 * gi * gi;
      double v = s[1][i];
      if (ams) v = s[2][i] = fmax(s[2][i], s[1][i]);
      double step = step_size * s[0][i] / (sqrt(v) / bc2s + eps);
      p[i] = (decoupled ? p[i] * decay : p[i]) - step;
    }
  } else if (strcmp(u, "adagrad") == 0) {
    double clr = F(h->lr / (1 + (double)(t - 1) * h->lr_decay));
    for (int64_t i = 0; i < n; i++) {
      double gi = coupled_grad(gs, g[i], wd, p[i]);
      s[0][i] += gi * gi;
      p[i] -= clr * gi / (sqrt(s[0][i]) + eps);
    }
  } else if (strncmp(u, "rmsprop", 7) == 0) {
    int centered = strstr(u, "centered") != NULL, with_momentum = strstr(u, "momentum") != NULL;
    for (int64_t i = 0; i < n; i++) {
      double gi = coupled_grad(gs, g[i], wd, p[i]);
      double avg;
      if (centered) {
        /* v - ga*ga cancels: modelled in f32, as the kernel computes it */
        s[0][i] = F(F(alpha * s[0][i]) + F(F(one_alpha * gi) * gi));
        s[1][i] = F(F(alpha * s[1][i]) + F(one_alpha * gi));
        avg = F(F(sqrt(F(s[0][i] - F(s[1][i] * s[1][i])))) + eps);
        if (with_momentum) { /* and so, after it, is what the momentum carries */
          double* buf = s[2];
          buf[i] = F(F(mom * buf[i]) + F(gi / avg));
          p[i] = F(p[i] - F(lr * buf[i]));
          continue;
        }
      } else {
        s[0][i] = alpha * s[0][i] + one_alpha * gi * gi;
        avg = sqrt(s[0][i]) + eps;
      }
      if (with_momentum) {
        double* buf = s[centered ? 2 : 1];
        buf[i] = mom * buf[i] + gi / avg;
        p[i] -= lr * buf[i];
      } else {
        p[i] -= lr * gi / avg;
      }
    }
  } else if (strcmp(u, "lion") == 0) {
    for (int64_t i = 0; i < n; i++) {
      double gi = gs * g[i];
      double c = b1 * s[0][i] + one_b1 * gi;
      p[i] = p[i] * decay - lr * ref_sign(c);
      s[0][i] = b2 * s[0][i] + F(1 - h->b2) * gi;
    }
  } else if (strcmp(u, "lamb") == 0) {
    double bc1 = F(1 - pow(h->b1, (double)t)), bc2 = F(1 - pow(h->b2, (double)t));
    double wn = 0, un = 0;
    for (int64_t i = 0; i < n; i++) {
      double gi = gs * g[i];
      s[0][i] = b1 * s[0][i] + one_b1 * gi;
      s[1][i] = b2 * s[1][i] + one_b2 * gi * gi;
      double ui = (s[0][i] / bc1) / (sqrt(s[1][i] / bc2) + eps) + wd * p[i];
      wn += p[i] * p[i], un += ui * ui;
    }
    /* the trust ratio is a scalar: f64, rounded with lr where it meets u */
    double r = F(h->lr * (wn > 0 && un > 0 ? sqrt(wn) / sqrt(un) : 1));
    for (int64_t i = 0; i < n; i++) {
      double ui = (s[0][i] / bc1) / (sqrt(s[1][i] / bc2) + eps) + wd * p[i];
      p[i] -= r * ui;
    }
  } else {
    return 0;
  }
  return 1;
}

#endif

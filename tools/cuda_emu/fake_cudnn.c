/* A stand-in libcudnn for the CPU emulation (tools/cuda_emu): exactly the cuDNN functions
 * fiamma/_backend/xp/cudnn_api.py binds, with naive reference convolutions over host memory
 * (device memory is host memory under the emulation). It checks what a real cuDNN would
 * refuse or silently misread: descriptor kinds in each argument position, dims/strides,
 * group counts, data/compute types, the forward output size, the algorithm and the workspace
 * pointer and size it reported (the workspace is written over, so a short one is caught).
 * Cross-correlation only; float, double, half (_Float16) and bfloat16 data; alpha/beta read
 * as double for double data and float otherwise, as cuDNN does.
 *
 *     cc -O2 -shared -fPIC -o libfake_cudnn.so fake_cudnn.c     (tools/cuda_emu/build.py)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { OK = 0, NOT_INITIALIZED = 1001, BAD_PARAM = 2000, NULL_POINTER = 2002,
       NOT_SUPPORTED = 3000 };
enum { T_MAGIC = 0x7e45, F_MAGIC = 0xf117, C_MAGIC = 0xc0e7, H_MAGIC = 0x4a4d };
enum { D_FLOAT = 0, D_DOUBLE = 1, D_HALF = 2, D_BF16 = 9 };

typedef struct { int magic; int set; int dtype; int nd; int dims[8]; long strides[8]; } Desc;
typedef struct { int magic; int set; int nd; int pad[3], stride[3], dil[3]; int mode, compute,
                 groups, math; } Conv;
typedef struct { int magic; void *stream; } Handle;
typedef struct { int algo, status; float time; size_t memory; int determinism, mathType,
                 reserved[3]; } Perf;

static long g_calls[8];  /* fwd, bwd data, bwd filter, add tensor, algo queries */
long fake_cudnn_calls(int i) { return i >= 0 && i < 8 ? g_calls[i] : -1; }

size_t cudnnGetVersion(void) { return 90100; }

const char *cudnnGetErrorString(int s) {
    switch (s) {
    case OK: return "CUDNN_STATUS_SUCCESS";
    case NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
    case NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    default: return "CUDNN_STATUS_UNKNOWN";
    }
}

int cudnnCreate(void **h) {
    if (!h) return NULL_POINTER;
    Handle *p = calloc(1, sizeof(Handle));
    p->magic = H_MAGIC;
    *h = p;
    return OK;
}
static int bad_handle(void *h) { return !h || ((Handle *)h)->magic != H_MAGIC; }
int cudnnDestroy(void *h) { if (bad_handle(h)) return BAD_PARAM; free(h); return OK; }
int cudnnSetStream(void *h, void *s) {
    if (bad_handle(h)) return BAD_PARAM;
    ((Handle *)h)->stream = s;
    return OK;
}

static int create(void **d, size_t size, int magic) {
    if (!d) return NULL_POINTER;
    int *p = calloc(1, size);
    *p = magic;
    *d = p;
    return OK;
}
static int destroy(void *d, int magic) {
    if (!d || *(int *)d != magic) return BAD_PARAM;
    free(d);
    return OK;
}
int cudnnCreateTensorDescriptor(void **d) { return create(d, sizeof(Desc), T_MAGIC); }
int cudnnDestroyTensorDescriptor(void *d) { return destroy(d, T_MAGIC); }
int cudnnCreateFilterDescriptor(void **d) { return create(d, sizeof(Desc), F_MAGIC); }
int cudnnDestroyFilterDescriptor(void *d) { return destroy(d, F_MAGIC); }
int cudnnCreateConvolutionDescriptor(void **d) { return create(d, sizeof(Conv), C_MAGIC); }
int cudnnDestroyConvolutionDescriptor(void *d) { return destroy(d, C_MAGIC); }

static int dtype_ok(int t) { return t == D_FLOAT || t == D_DOUBLE || t == D_HALF || t == D_BF16; }

int cudnnSetTensorNdDescriptor(void *d, int dtype, int nd, const int *dims, const int *st) {
    Desc *t = d;
    if (!t || t->magic != T_MAGIC || !dtype_ok(dtype) || nd < 3 || nd > 8) return BAD_PARAM;
    for (int i = 0; i < nd; ++i)
        if (dims[i] <= 0 || st[i] <= 0) return BAD_PARAM;
    t->dtype = dtype; t->nd = nd; t->set = 1;
    for (int i = 0; i < nd; ++i) { t->dims[i] = dims[i]; t->strides[i] = st[i]; }
    return OK;
}

int cudnnSetFilterNdDescriptor(void *d, int dtype, int format, int nd, const int *dims) {
    Desc *t = d;
    if (!t || t->magic != F_MAGIC || !dtype_ok(dtype) || format != 0 || nd < 3 || nd > 8)
        return BAD_PARAM;
    long acc = 1;
    for (int i = nd - 1; i >= 0; --i) {
        if (dims[i] <= 0) return BAD_PARAM;
        t->dims[i] = dims[i]; t->strides[i] = acc; acc *= dims[i];
    }
    t->dtype = dtype; t->nd = nd; t->set = 1;
    return OK;
}

int cudnnSetConvolutionNdDescriptor(void *d, int n, const int *pad, const int *stride,
                                    const int *dil, int mode, int compute) {
    Conv *c = d;
    if (!c || c->magic != C_MAGIC || n < 1 || n > 3 || (mode != 0 && mode != 1) ||
        !dtype_ok(compute)) return BAD_PARAM;
    for (int i = 0; i < n; ++i) {
        if (pad[i] < 0 || stride[i] <= 0 || dil[i] <= 0) return BAD_PARAM;
        c->pad[i] = pad[i]; c->stride[i] = stride[i]; c->dil[i] = dil[i];
    }
    c->nd = n; c->mode = mode; c->compute = compute; c->set = 1;
    if (!c->groups) c->groups = 1;
    return OK;
}
int cudnnSetConvolutionGroupCount(void *d, int g) {
    Conv *c = d;
    if (!c || c->magic != C_MAGIC || g < 1) return BAD_PARAM;
    c->groups = g;
    return OK;
}
int cudnnSetConvolutionMathType(void *d, int m) {
    Conv *c = d;
    if (!c || c->magic != C_MAGIC || m < 0 || m > 3) return BAD_PARAM;
    c->math = m;
    return OK;
}

/* x (N, C, *S), w (K, C / groups, *R), y (N, K, *O): the checks cuDNN makes */
static int geometry(const Desc *x, const Desc *w, const Conv *c, const Desc *y) {
    if (!x || !w || !c || !y) return NULL_POINTER;
    if (x->magic != T_MAGIC || w->magic != F_MAGIC || c->magic != C_MAGIC || y->magic != T_MAGIC)
        return BAD_PARAM;
    if (!x->set || !w->set || !c->set || !y->set) return BAD_PARAM;
    int nd = x->nd;
    if (nd < 4 || nd > 5 || w->nd != nd || y->nd != nd || c->nd != nd - 2) return BAD_PARAM;
    if (x->dtype != w->dtype || y->dtype != x->dtype) return BAD_PARAM;
    if ((x->dtype == D_DOUBLE) != (c->compute == D_DOUBLE) || c->compute == D_BF16)
        return NOT_SUPPORTED;
    if (c->mode != 1) return NOT_SUPPORTED;  /* this stand-in does cross-correlation only */
    int g = c->groups;
    if (x->dims[0] != y->dims[0] || x->dims[1] != w->dims[1] * g || y->dims[1] != w->dims[0] ||
        w->dims[0] % g) return BAD_PARAM;
    for (int i = 0; i < nd - 2; ++i) {
        long span = (long)c->dil[i] * (w->dims[2 + i] - 1) + 1;
        long room = x->dims[2 + i] + 2L * c->pad[i];
        if (room < span || (room - span) / c->stride[i] + 1 != y->dims[2 + i]) return BAD_PARAM;
    }
    return OK;
}

static double ld(const void *p, int dt, long i) {
    switch (dt) {
    case D_FLOAT: return ((const float *)p)[i];
    case D_DOUBLE: return ((const double *)p)[i];
    case D_HALF: return (double)((const _Float16 *)p)[i];
    default: {
        uint32_t b = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    }
}

static void st(void *p, int dt, long i, double v) {
    switch (dt) {
    case D_FLOAT: ((float *)p)[i] = (float)v; break;
    case D_DOUBLE: ((double *)p)[i] = v; break;
    case D_HALF: ((_Float16 *)p)[i] = (_Float16)(float)v; break;
    default: {
        float f = (float)v;
        uint32_t b;
        memcpy(&b, &f, 4);
        if ((b & 0x7fffffffu) > 0x7f800000u) b |= 0x00400000u;  /* NaN stays NaN */
        else b += 0x7fffu + ((b >> 16) & 1u);                    /* round to nearest even */
        ((uint16_t *)p)[i] = (uint16_t)(b >> 16);
    }
    }
}

static double scalar(const void *p, int dt) {
    return dt == D_DOUBLE ? *(const double *)p : (double)*(const float *)p;
}

static long off(const Desc *t, const long *idx) {
    long o = 0;
    for (int i = 0; i < t->nd; ++i) o += idx[i] * t->strides[i];
    return o;
}

static long count(const Desc *t) {
    long n = 1;
    for (int i = 0; i < t->nd; ++i) n *= t->dims[i];
    return n;
}

/* the index (row-major over dims) of flat position f */
static void unflat(const Desc *t, long f, long *idx) {
    for (int i = t->nd - 1; i >= 0; --i) { idx[i] = f % t->dims[i]; f /= t->dims[i]; }
}

/* acc[flat index of the result] of the three products; which says which is accumulated */
enum { FWD, BWD_DATA, BWD_FILTER };
static void reference(int which, const Desc *x, const void *X, const Desc *w, const void *W,
                      const Conv *c, const Desc *y, const void *Y, double *acc) {
    int nd = x->nd, ns = nd - 2, g = c->groups;
    int cg = w->dims[1], kg = w->dims[0] / g;
    long ny = count(y), nr = 1;
    for (int i = 0; i < ns; ++i) nr *= w->dims[2 + i];
    long yi[8], xi[8], wi[8], ri[8];
    Desc kern = *w;  /* the kernel taps as a packed (R...) walk */
    kern.nd = ns;
    for (int i = 0; i < ns; ++i) kern.dims[i] = w->dims[2 + i];
    for (long f = 0; f < ny; ++f) {
        unflat(y, f, yi);
        long n = yi[0], k = yi[1], gr = k / kg;
        double dy = which == FWD ? 0.0 : ld(Y, y->dtype, off(y, yi));
        double sum = 0.0;
        for (int ci = 0; ci < cg; ++ci)
            for (long r = 0; r < nr; ++r) {
                unflat(&kern, r, ri);
                int inside = 1;
                xi[0] = n; xi[1] = (long)gr * cg + ci;
                wi[0] = k; wi[1] = ci;
                for (int i = 0; i < ns; ++i) {
                    long p = yi[2 + i] * c->stride[i] - c->pad[i] + ri[i] * c->dil[i];
                    if (p < 0 || p >= x->dims[2 + i]) inside = 0;
                    xi[2 + i] = p;
                    wi[2 + i] = ri[i];
                }
                if (!inside) continue;
                long wo = off(w, wi);
                if (which == FWD) {
                    sum += ld(X, x->dtype, off(x, xi)) * ld(W, w->dtype, wo);
                } else if (which == BWD_DATA) {
                    long xf = 0;
                    for (int i = 0; i < nd; ++i) xf = xf * x->dims[i] + xi[i];
                    acc[xf] += dy * ld(W, w->dtype, wo);
                } else {
                    long wf = 0;
                    for (int i = 0; i < nd; ++i) wf = wf * w->dims[i] + wi[i];
                    acc[wf] += dy * ld(X, x->dtype, off(x, xi));
                }
            }
        if (which == FWD) acc[f] = sum;
    }
}

static void store(const Desc *t, void *T, const double *acc, double alpha, double beta) {
    long n = count(t), idx[8];
    for (long f = 0; f < n; ++f) {
        unflat(t, f, idx);
        long o = off(t, idx);
        double v = alpha * acc[f];
        if (beta != 0.0) v += beta * ld(T, t->dtype, o);  /* beta 0: the old value is unread */
        st(T, t->dtype, o, v);
    }
}

/* the algorithms offered: 1 (needs workspace, deterministic), 0 (none, non-deterministic),
 * 2 (not supported here) */
static size_t ws_need(int algo, const Desc *x) { return algo == 1 ? 4096 + 8 * (size_t)x->dims[1] : 0; }

static int query(void *h, const Desc *x, const Desc *w, const Conv *c, const Desc *y, int req,
                 int *got, Perf *p) {
    if (bad_handle(h) || !got || !p) return BAD_PARAM;
    int rc = geometry(x, w, c, y);
    if (rc) return rc;
    g_calls[4]++;
    int algos[3] = {1, 0, 2};
    int n = req < 3 ? req : 3;
    for (int i = 0; i < n; ++i) {
        memset(&p[i], 0, sizeof(Perf));
        p[i].algo = algos[i];
        p[i].status = algos[i] == 2 ? NOT_SUPPORTED : OK;
        p[i].time = (float)(i + 1);
        p[i].memory = ws_need(algos[i], x);
        p[i].determinism = algos[i] == 1;
        p[i].mathType = c->math;
    }
    *got = n;
    return OK;
}

int cudnnGetConvolutionForwardAlgorithm_v7(void *h, void *x, void *w, void *c, void *y, int r,
                                           int *got, Perf *p) { return query(h, x, w, c, y, r, got, p); }
int cudnnFindConvolutionForwardAlgorithm(void *h, void *x, void *w, void *c, void *y, int r,
                                         int *got, Perf *p) { return query(h, x, w, c, y, r, got, p); }
int cudnnGetConvolutionBackwardDataAlgorithm_v7(void *h, void *w, void *dy, void *c, void *dx,
                                                int r, int *got, Perf *p) {
    return query(h, dx, w, c, dy, r, got, p);
}
int cudnnFindConvolutionBackwardDataAlgorithm(void *h, void *w, void *dy, void *c, void *dx,
                                              int r, int *got, Perf *p) {
    return query(h, dx, w, c, dy, r, got, p);
}
int cudnnGetConvolutionBackwardFilterAlgorithm_v7(void *h, void *x, void *dy, void *c, void *dw,
                                                  int r, int *got, Perf *p) {
    return query(h, x, dw, c, dy, r, got, p);
}
int cudnnFindConvolutionBackwardFilterAlgorithm(void *h, void *x, void *dy, void *c, void *dw,
                                                int r, int *got, Perf *p) {
    return query(h, x, dw, c, dy, r, got, p);
}

static int ws_query(void *h, const Desc *x, const Desc *w, const Conv *c, const Desc *y,
                    int algo, size_t *size) {
    if (bad_handle(h) || !size) return BAD_PARAM;
    int rc = geometry(x, w, c, y);
    if (rc) return rc;
    if (algo != 0 && algo != 1) return NOT_SUPPORTED;
    *size = ws_need(algo, x);
    return OK;
}
int cudnnGetConvolutionForwardWorkspaceSize(void *h, void *x, void *w, void *c, void *y, int a,
                                            size_t *s) { return ws_query(h, x, w, c, y, a, s); }
int cudnnGetConvolutionBackwardDataWorkspaceSize(void *h, void *w, void *dy, void *c, void *dx,
                                                 int a, size_t *s) {
    return ws_query(h, dx, w, c, dy, a, s);
}
int cudnnGetConvolutionBackwardFilterWorkspaceSize(void *h, void *x, void *dy, void *c, void *dw,
                                                   int a, size_t *s) {
    return ws_query(h, x, dw, c, dy, a, s);
}

static int run(int which, void *h, const void *alpha, const Desc *x, const void *X, const Desc *w,
               const void *W, const Conv *c, int algo, void *ws, size_t wsize, const void *beta,
               const Desc *y, const void *Y, const Desc *out, void *O) {
    if (bad_handle(h) || !alpha || !beta || !X || !W || !Y || !O) return NULL_POINTER;
    int rc = geometry(x, w, c, y);
    if (rc) return rc;
    if (algo != 0 && algo != 1) return NOT_SUPPORTED;
    size_t need = ws_need(algo, x);
    if (need && (!ws || wsize < need)) return BAD_PARAM;
    if (need) memset(ws, 0xab, need);
    long n = count(out);
    double *acc = calloc((size_t)n, sizeof(double));
    if (!acc) return 4000;
    reference(which, x, X, w, W, c, y, Y, acc);
    store(out, O, acc, scalar(alpha, out->dtype), scalar(beta, out->dtype));
    free(acc);
    g_calls[which]++;
    return OK;
}

int cudnnConvolutionForward(void *h, const void *alpha, void *xd, const void *x, void *wd,
                            const void *w, void *cd, int algo, void *ws, size_t wsize,
                            const void *beta, void *yd, void *y) {
    return run(FWD, h, alpha, xd, x, wd, w, cd, algo, ws, wsize, beta, yd, y, yd, y);
}
int cudnnConvolutionBackwardData(void *h, const void *alpha, void *wd, const void *w, void *dyd,
                                 const void *dy, void *cd, int algo, void *ws, size_t wsize,
                                 const void *beta, void *dxd, void *dx) {
    return run(BWD_DATA, h, alpha, dxd, dx, wd, w, cd, algo, ws, wsize, beta, dyd, dy, dxd, dx);
}
int cudnnConvolutionBackwardFilter(void *h, const void *alpha, void *xd, const void *x,
                                   void *dyd, const void *dy, void *cd, int algo, void *ws,
                                   size_t wsize, const void *beta, void *dwd, void *dw) {
    return run(BWD_FILTER, h, alpha, xd, x, dwd, dw, cd, algo, ws, wsize, beta, dyd, dy, dwd, dw);
}

/* C = alpha * A + beta * C, A broadcast over C where its dims are 1 */
int cudnnAddTensor(void *h, const void *alpha, void *ad, const void *A, const void *beta,
                   void *cd, void *Cp) {
    const Desc *a = ad, *c = cd;
    if (bad_handle(h) || !a || !c || !A || !Cp || !alpha || !beta) return NULL_POINTER;
    if (a->magic != T_MAGIC || c->magic != T_MAGIC || a->nd != c->nd || a->dtype != c->dtype)
        return BAD_PARAM;
    for (int i = 0; i < c->nd; ++i)
        if (a->dims[i] != c->dims[i] && a->dims[i] != 1) return BAD_PARAM;
    double al = scalar(alpha, c->dtype), be = scalar(beta, c->dtype);
    long n = count(c), ci[8], ai[8];
    for (long f = 0; f < n; ++f) {
        unflat(c, f, ci);
        for (int i = 0; i < c->nd; ++i) ai[i] = a->dims[i] == 1 ? 0 : ci[i];
        long o = off(c, ci);
        st(Cp, c->dtype, o, al * ld(A, a->dtype, off(a, ai)) + be * ld(Cp, c->dtype, o));
    }
    g_calls[3]++;
    return OK;
}

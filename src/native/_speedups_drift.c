/*
 * tracehound._speedups: drift functions (see _speedups.h).
 *
 * - round_float16 is `vector.astype(np.float16).astype(np.float64)` (the float16 copy of an
 *   embedding a baseline keeps for each recent run): each element rounded to the nearest
 *   binary16 value, ties to even, as numpy. That rounding has one right answer, so the results
 *   are the same bits.
 * - embedding_distance and ring_distances are tracehound.drift._score's embedding_distance and
 *   block_distances (for the two targets the scorer compares the recent runs with: the
 *   baseline centroid and the run). They compute the same formulas, but their dot products and
 *   norms are four running sums over the indices modulo 4, added pairwise, where numpy's are
 *   BLAS and einsum kernels that sum in their own order (SIMD lanes, blocks): so the results
 *   may differ from numpy's in the last bits.
 * - complexity_scores, complexity_distances and tool_mixes are the scorer's complexity
 *   arithmetic (sigmas, z-scores: the same bits; the component's sum of squares in index
 *   order), the recent runs' complexity distances (sums in index order) and tool-mix distances
 *   (over the run's tools, then the others', where Python iterates the union set of both: an
 *   order that even changes with the process's string hashing).
 * - recent_divergences is the scorer's whole comparison with the recent runs (_recent_runs):
 *   the three distances above for each RunSummary, read from its attributes, their composite,
 *   the ranking and the mean distance to the centroid, in one call (the same kernels).
 * - merge_moments (Chan's merge of weighted moments), any_nonzero (numpy's any),
 *   joined_words (" ".join(text[:stop].split())) and divide_block (numpy's in-place division
 *   of a block) give exactly what the Python code gives.
 * - drift_explanation is the text of a scored run's explanation (the scorer's _explain,
 *   _recommendation and DriftExplanation.text) without its objects: the same string, its floats
 *   formatted as float.__format__ formats them.
 * - score_run is the scorer's score_text in one call: the kernels above in a row (the run's
 *   components, composite, primary driver and severity, then recent_divergences and
 *   drift_explanation), the same values as those calls one by one.
 *
 * Over unit vectors, centroid sums, shares and capped z-scores these differences are far below
 * 1e-12 (the test suite checks that bound on random inputs, and that severities, labels,
 * primary drivers and explanations do not change), but they are not bit for bit.
 *
 * Input they do not handle (not a 1-D C-contiguous float64 buffer of the right length, blocks
 * that are not (int, int, float) tuples within the vector, non-finite values to round, values
 * that are not exact floats, tool names that are not exact strs) gets None (NotImplemented
 * from embedding_distance, whose result may be None): the caller then runs the Python code.
 * Only a wrong number of arguments raises. The GIL is held throughout.
 *
 * C99, ordinary CPython API only (arrays are read through the buffer protocol).
 */
#include "_speedups.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* A block of the embedding: [start, stop) with its weight. */
typedef struct {
    Py_ssize_t start, stop;
    double weight;
} block_t;

#define MAX_BLOCKS 16

/* A 1-D C-contiguous float64 buffer of `n` elements (any length if n < 0). 1: `view` holds it
 * (release it); 0: not such a buffer (no exception set). */
static int
get_vector(PyObject *obj, Py_buffer *view, Py_ssize_t n)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (view->ndim != 1 || view->itemsize != (Py_ssize_t)sizeof(double) ||
        view->format == NULL || strcmp(view->format, "d") != 0 ||
        (n >= 0 && view->shape[0] != n)) {
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

/* The blocks (a tuple or list of (start, stop, weight) tuples: exact ints within [0, dim],
 * start <= stop, and an exact float) into `out`; their count, or -1 for anything else. */
static Py_ssize_t
get_blocks(PyObject *blocks, Py_ssize_t dim, block_t *out)
{
    Py_ssize_t n, i;

    if (!PyTuple_CheckExact(blocks) && !PyList_CheckExact(blocks)) {
        return -1;
    }
    n = PySequence_Fast_GET_SIZE(blocks);
    if (n > MAX_BLOCKS) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        PyObject *block = PySequence_Fast_GET_ITEM(blocks, i);
        PyObject *start, *stop, *weight;

        if (!PyTuple_CheckExact(block) || PyTuple_GET_SIZE(block) != 3) {
            return -1;
        }
        start = PyTuple_GET_ITEM(block, 0);
        stop = PyTuple_GET_ITEM(block, 1);
        weight = PyTuple_GET_ITEM(block, 2);
        if (!PyLong_CheckExact(start) || !PyLong_CheckExact(stop) || !PyFloat_CheckExact(weight)) {
            return -1;
        }
        out[i].start = PyLong_AsSsize_t(start);
        out[i].stop = PyLong_AsSsize_t(stop);
        if (PyErr_Occurred()) {
            PyErr_Clear(); /* beyond Py_ssize_t */
            return -1;
        }
        if (out[i].start < 0 || out[i].start > out[i].stop || out[i].stop > dim) {
            return -1; /* numpy would clamp or count from the end */
        }
        out[i].weight = PyFloat_AS_DOUBLE(weight);
    }
    return n;
}

/* Sum of x[i] * y[i] over [start, stop): four running sums over the indices modulo 4, added
 * pairwise at the end (then the rest), whatever the compiler makes of it (no reassociation
 * without -ffast-math). With GCC or Clang, the four sums are the lanes of a 4-double vector:
 * the same sums, in fewer instructions (two SSE2 halves, or one AVX register where the CPU has
 * AVX: GCC builds both and picks one when the module loads; the same operations, lane by lane,
 * so the same bits either way, and no fused multiply-add). */
#if defined(__GNUC__)
typedef double v4d __attribute__((vector_size(32)));

/* The four doubles at p (unaligned) into the v4d v: a macro, as a v4d is no function's argument
 * or result (their ABI depends on AVX). */
#define LOAD4(v, p) memcpy(&(v), (p), sizeof(v4d))
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(TRACEHOUND_PORTABLE)
#define VECTOR_CLONES __attribute__((target_clones("avx", "default")))
#else
#define VECTOR_CLONES
#endif

VECTOR_CLONES static double
dot(const double *x, const double *y, Py_ssize_t start, Py_ssize_t stop)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    Py_ssize_t i = start;

#if defined(__GNUC__)
    v4d s = {0.0, 0.0, 0.0, 0.0};

    for (; i + 4 <= stop; i += 4) {
        v4d xi, yi;

        LOAD4(xi, x + i);
        LOAD4(yi, y + i);
        s += xi * yi;
    }
    s0 = s[0];
    s1 = s[1];
    s2 = s[2];
    s3 = s[3];
#else
    for (; i + 4 <= stop; i += 4) {
        s0 += x[i] * y[i];
        s1 += x[i + 1] * y[i + 1];
        s2 += x[i + 2] * y[i + 2];
        s3 += x[i + 3] * y[i + 3];
    }
#endif
    for (; i < stop; i++) {
        s0 += x[i] * y[i];
    }
    return (s0 + s1) + (s2 + s3);
}

/* dot(x, x), dot(x, c) and dot(x, r) (r may be NULL: 0) in one pass, the same sums. */
VECTOR_CLONES static void
dot3(const double *x, const double *c, const double *r, Py_ssize_t start, Py_ssize_t stop,
     double *xx, double *xc, double *xr)
{
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    double b0 = 0.0, b1 = 0.0, b2 = 0.0, b3 = 0.0;
    double d0 = 0.0, d1 = 0.0, d2 = 0.0, d3 = 0.0;
    Py_ssize_t i = start;

    if (r == NULL) {
        *xx = dot(x, x, start, stop);
        *xc = dot(x, c, start, stop);
        *xr = 0.0;
        return;
    }
#if defined(__GNUC__)
    {
        v4d a = {0.0, 0.0, 0.0, 0.0}, b = {0.0, 0.0, 0.0, 0.0}, d = {0.0, 0.0, 0.0, 0.0};

        for (; i + 4 <= stop; i += 4) {
            v4d xi, ci, ri;

            LOAD4(xi, x + i);
            LOAD4(ci, c + i);
            LOAD4(ri, r + i);
            a += xi * xi;
            b += xi * ci;
            d += xi * ri;
        }
        a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
        b0 = b[0], b1 = b[1], b2 = b[2], b3 = b[3];
        d0 = d[0], d1 = d[1], d2 = d[2], d3 = d[3];
    }
#else
    for (; i + 4 <= stop; i += 4) {
        a0 += x[i] * x[i];
        a1 += x[i + 1] * x[i + 1];
        a2 += x[i + 2] * x[i + 2];
        a3 += x[i + 3] * x[i + 3];
        b0 += x[i] * c[i];
        b1 += x[i + 1] * c[i + 1];
        b2 += x[i + 2] * c[i + 2];
        b3 += x[i + 3] * c[i + 3];
        d0 += x[i] * r[i];
        d1 += x[i + 1] * r[i + 1];
        d2 += x[i + 2] * r[i + 2];
        d3 += x[i + 3] * r[i + 3];
    }
#endif
    for (; i < stop; i++) {
        a0 += x[i] * x[i];
        b0 += x[i] * c[i];
        d0 += x[i] * r[i];
    }
    *xx = (a0 + a1) + (a2 + a3);
    *xc = (b0 + b1) + (b2 + b3);
    *xr = (d0 + d1) + (d2 + d3);
}

/* dot(a, a), dot(b, b) and dot(a, b) in one pass, the same sums. */
VECTOR_CLONES static void
dot_pair(const double *a, const double *b, Py_ssize_t start, Py_ssize_t stop, double *aa,
         double *bb, double *ab)
{
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    double b0 = 0.0, b1 = 0.0, b2 = 0.0, b3 = 0.0;
    double d0 = 0.0, d1 = 0.0, d2 = 0.0, d3 = 0.0;
    Py_ssize_t i = start;

#if defined(__GNUC__)
    {
        v4d sa = {0.0, 0.0, 0.0, 0.0}, sb = {0.0, 0.0, 0.0, 0.0}, sd = {0.0, 0.0, 0.0, 0.0};

        for (; i + 4 <= stop; i += 4) {
            v4d ai, bi;

            LOAD4(ai, a + i);
            LOAD4(bi, b + i);
            sa += ai * ai;
            sb += bi * bi;
            sd += ai * bi;
        }
        a0 = sa[0], a1 = sa[1], a2 = sa[2], a3 = sa[3];
        b0 = sb[0], b1 = sb[1], b2 = sb[2], b3 = sb[3];
        d0 = sd[0], d1 = sd[1], d2 = sd[2], d3 = sd[3];
    }
#else
    for (; i + 4 <= stop; i += 4) {
        a0 += a[i] * a[i];
        a1 += a[i + 1] * a[i + 1];
        a2 += a[i + 2] * a[i + 2];
        a3 += a[i + 3] * a[i + 3];
        b0 += b[i] * b[i];
        b1 += b[i + 1] * b[i + 1];
        b2 += b[i + 2] * b[i + 2];
        b3 += b[i + 3] * b[i + 3];
        d0 += a[i] * b[i];
        d1 += a[i + 1] * b[i + 1];
        d2 += a[i + 2] * b[i + 2];
        d3 += a[i + 3] * b[i + 3];
    }
#endif
    for (; i < stop; i++) {
        a0 += a[i] * a[i];
        b0 += b[i] * b[i];
        d0 += a[i] * b[i];
    }
    *aa = (a0 + a1) + (a2 + a3);
    *bb = (b0 + b1) + (b2 + b3);
    *ab = (d0 + d1) + (d2 + d3);
}

/* dot(x, c) and dot(x, r) in one pass, the same sums (dot3 without dot(x, x)). */
VECTOR_CLONES static void
dot2(const double *x, const double *c, const double *r, Py_ssize_t start, Py_ssize_t stop,
     double *xc, double *xr)
{
    double b0 = 0.0, b1 = 0.0, b2 = 0.0, b3 = 0.0;
    double d0 = 0.0, d1 = 0.0, d2 = 0.0, d3 = 0.0;
    Py_ssize_t i = start;

    if (r == NULL) {
        *xc = dot(x, c, start, stop);
        *xr = 0.0;
        return;
    }
#if defined(__GNUC__)
    {
        v4d b = {0.0, 0.0, 0.0, 0.0}, d = {0.0, 0.0, 0.0, 0.0};

        for (; i + 4 <= stop; i += 4) {
            v4d xi, ci, ri;

            LOAD4(xi, x + i);
            LOAD4(ci, c + i);
            LOAD4(ri, r + i);
            b += xi * ci;
            d += xi * ri;
        }
        b0 = b[0], b1 = b[1], b2 = b[2], b3 = b[3];
        d0 = d[0], d1 = d[1], d2 = d[2], d3 = d[3];
    }
#else
    for (; i + 4 <= stop; i += 4) {
        b0 += x[i] * c[i];
        b1 += x[i + 1] * c[i + 1];
        b2 += x[i + 2] * c[i + 2];
        b3 += x[i + 3] * c[i + 3];
        d0 += x[i] * r[i];
        d1 += x[i + 1] * r[i + 1];
        d2 += x[i + 2] * r[i + 2];
        d3 += x[i + 3] * r[i + 3];
    }
#endif
    for (; i < stop; i++) {
        b0 += x[i] * c[i];
        d0 += x[i] * r[i];
    }
    *xc = (b0 + b1) + (b2 + b3);
    *xr = (d0 + d1) + (d2 + d3);
}

/* --- round_float16 ----------------------------------------------------------------------- */

/* x (finite) rounded to the nearest binary16 value, ties to even, as a double: adding and
 * subtracting 1.5 * 2^(s + 52) rounds x to a multiple of 2^s, ties to even (s: the binary16
 * spacing at x, 2^(e - 11) for 2^(e - 1) <= |x| < 2^e, 2^-24 for its subnormals), the
 * subtraction being exact; beyond the largest binary16 (65504) it is infinite; the sign of a
 * zero is kept. The exponents come from the bits (frexp and ldexp cost more than the rest). */
static inline double round_to_float16_slow(double x);

/* round_to_float16, quicker for zeros and the binary16 normal range (2^-14 <= |x| < 2^16),
 * where the value keeps 10 bits of mantissa: adding half a unit of the last kept bit (less one,
 * plus that bit: ties to even) and clearing the 42 dropped bits rounds the double's bits
 * directly, a carry moving into the exponent as it should. */
static inline double
round_to_float16(double x)
{
    uint64_t bits, exponent;
    double r;

    memcpy(&bits, &x, sizeof bits);
    exponent = (bits >> 52) & 0x7ff;
    if (exponent >= 1023 - 14 && exponent <= 1023 + 15) {
        bits += (UINT64_C(1) << 41) - 1 + ((bits >> 42) & 1);
        bits &= ~((UINT64_C(1) << 42) - 1);
        memcpy(&r, &bits, sizeof r);
        return fabs(r) > 65504.0 ? copysign(HUGE_VAL, x) : r;
    }
    if (x == 0.0) {
        return x; /* the sign of a zero is kept */
    }
    return round_to_float16_slow(x);
}

static inline double
round_to_float16_slow(double x)
{
    uint64_t bits;
    int e, s;
    double c, r;

    memcpy(&bits, &x, sizeof bits);
    e = (int)((bits >> 52) & 0x7ff) - 1022; /* |x| < 2^e (subnormal doubles: far below) */
    if (e > 16) {
        return copysign(HUGE_VAL, x);
    }
    s = e - 11 < -24 ? -24 : e - 11;
    bits = (uint64_t)(s + 52 + 1023) << 52 | (UINT64_C(1) << 51); /* 1.5 * 2^(s + 52) */
    memcpy(&c, &bits, sizeof c);
    r = (x + c) - c; /* not simplified away without -ffast-math; evaluated in double (see
                      * round_float16's FLT_EVAL_METHOD check) */
    if (fabs(r) > 65504.0) {
        return copysign(HUGE_VAL, x);
    }
    return r == 0.0 ? copysign(0.0, x) : r;
}

/* round_to_float16's quick case for x[0:n] into y, four elements at a time while all four are
 * zeros or in the binary16 normal range below 2^15 (where no result can exceed 65504): the
 * number of elements done (a multiple of 4), the rest left to the caller. Lane by lane, the
 * same integer operations as the scalar code, so the same bits. */
#if defined(__GNUC__)
typedef uint64_t v4u __attribute__((vector_size(32)));
typedef int64_t v4i __attribute__((vector_size(32)));

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(TRACEHOUND_PORTABLE)
#define INTEGER_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define INTEGER_VECTOR_CLONES
#endif

INTEGER_VECTOR_CLONES static Py_ssize_t
round_float16_quick(const double *x, double *y, Py_ssize_t n)
{
    Py_ssize_t i = 0;

    for (; i + 4 <= n; i += 4) {
        v4u bits, exponent;
        v4i outside;

        memcpy(&bits, x + i, sizeof bits);
        exponent = (bits >> 52) & 0x7ff;
        /* zeros round to themselves by the same steps (the sign bit kept) */
        outside = (v4i)(exponent - (1023 - 14) >= 29) & (v4i)((bits << 1) != 0);
        if (outside[0] | outside[1] | outside[2] | outside[3]) {
            break;
        }
        bits += ((UINT64_C(1) << 41) - 1) + ((bits >> 42) & 1);
        bits &= ~((UINT64_C(1) << 42) - 1);
        memcpy(y + i, &bits, sizeof bits);
    }
    return i;
}
#else
static Py_ssize_t
round_float16_quick(const double *x, double *y, Py_ssize_t n)
{
    (void)x;
    (void)y;
    (void)n;
    return 0;
}
#endif

PyDoc_STRVAR(round_float16_doc,
"round_float16($module, vector, out, /)\n"
"--\n"
"\n"
"`out[:] = vector.astype(np.float16).astype(np.float64)`: each element rounded to the nearest\n"
"binary16 value (ties to even), the same bits as numpy.\n"
"\n"
"`vector` and `out`: 1-D C-contiguous float64 buffers of the same length, `out` writable.\n"
"Returns True, or None (out unspecified) for anything else and for non-finite elements.");

static PyObject *
round_float16(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer src, dst;
    const double *x;
    double *y;
    Py_ssize_t i, n;
    int ok = 1;

    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "round_float16() takes exactly 2 arguments (%zd given)",
                     nargs);
        return NULL;
    }
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
    Py_RETURN_NONE; /* the rounding trick needs double arithmetic in double precision */
#endif
    if (!get_vector(args[0], &src, -1)) {
        Py_RETURN_NONE;
    }
    if (PyObject_GetBuffer(args[1], &dst, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) <
        0) {
        PyErr_Clear();
        PyBuffer_Release(&src);
        Py_RETURN_NONE;
    }
    n = src.shape[0];
    if (dst.ndim != 1 || dst.itemsize != (Py_ssize_t)sizeof(double) || dst.format == NULL ||
        strcmp(dst.format, "d") != 0 || dst.shape[0] != n) {
        ok = 0;
    }
    else {
        Py_ssize_t scalar_stop = 0;

        x = (const double *)src.buf;
        y = (double *)dst.buf;
        for (i = 0; i < n; i++) {
            uint64_t bits, exponent;

            if (i >= scalar_stop) {
                /* the quick case four at a time, then the next four (or the rest) one by one */
                i += round_float16_quick(x + i, y + i, n - i);
                scalar_stop = i + 4;
                if (i >= n) {
                    break;
                }
            }

            memcpy(&bits, &x[i], sizeof bits);
            exponent = (bits >> 52) & 0x7ff;
            /* round_to_float16's quick case inline, for the binary16 normal range below 2^15,
             * where no result can exceed 65504 */
            if (exponent - (1023 - 14) < 29) {
                bits += (UINT64_C(1) << 41) - 1 + ((bits >> 42) & 1);
                bits &= ~((UINT64_C(1) << 42) - 1);
                memcpy(&y[i], &bits, sizeof bits);
                continue;
            }
            if (exponent == 0x7ff) {
                ok = 0; /* not finite */
                break;
            }
            y[i] = round_to_float16(x[i]);
        }
    }
    PyBuffer_Release(&dst);
    PyBuffer_Release(&src);
    if (!ok) {
        Py_RETURN_NONE;
    }
    Py_RETURN_TRUE;
}

/* --- joined_words ---------------------------------------------------------------------------- */

PyDoc_STRVAR(joined_words_doc,
"joined_words($module, text, stop, /)\n"
"--\n"
"\n"
"`\" \".join(text[:stop].split())`: the words of the text's first `stop` characters (runs of\n"
"characters that are not whitespace, as str.split() finds them) joined by single spaces; the\n"
"same string. `text`: an exact str; `stop`: an int (the slice's rules: clamped, negative from\n"
"the end). None for anything else.");

static PyObject *
joined_words(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *text, *out;
    Py_ssize_t n, stop, i, length = 0;
    const void *data;
    void *buffer;
    int kind;

    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "joined_words() takes exactly 2 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    text = args[0];
    if (!PyUnicode_CheckExact(text) || !PyLong_CheckExact(args[1])) {
        Py_RETURN_NONE;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) {
        return NULL;
    }
#endif
    stop = PyLong_AsSsize_t(args[1]);
    if (stop == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    n = PyUnicode_GET_LENGTH(text);
    if (stop < 0) {
        stop = stop + n < 0 ? 0 : stop + n;
    }
    if (stop > n) {
        stop = n;
    }
    kind = PyUnicode_KIND(text);
    data = PyUnicode_DATA(text);
    /* the result is never longer than the slice, and of its kind at most */
    buffer = PyMem_Malloc(stop > 0 ? (size_t)stop * (size_t)kind : 1);
    if (buffer == NULL) {
        return PyErr_NoMemory();
    }
    for (i = 0; i < stop;) {
        Py_ssize_t start;

        while (i < stop && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i))) {
            i++;
        }
        if (i == stop) {
            break;
        }
        if (length > 0) {
            PyUnicode_WRITE(kind, buffer, length, ' ');
            length++;
        }
        start = i;
        while (i < stop && !Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i))) {
            i++;
        }
        memcpy((char *)buffer + length * kind, (const char *)data + start * kind,
               (size_t)(i - start) * (size_t)kind);
        length += i - start;
    }
    out = PyUnicode_FromKindAndData(kind, buffer, length);
    PyMem_Free(buffer);
    return out;
}

/* --- any_nonzero --------------------------------------------------------------------------- */

PyDoc_STRVAR(any_nonzero_doc,
"any_nonzero($module, vector, /)\n"
"--\n"
"\n"
"`bool(vector.any())` for a 1-D C-contiguous float64 buffer (NaN counts as non-zero, as in\n"
"numpy); None for anything else.");

static PyObject *
any_nonzero(PyObject *module, PyObject *vector)
{
    Py_buffer view;
    const double *x;
    Py_ssize_t i, n;
    int found = 0;

    (void)module;
    if (!get_vector(vector, &view, -1)) {
        Py_RETURN_NONE;
    }
    x = (const double *)view.buf;
    n = view.shape[0];
    for (i = 0; i < n; i++) {
        if (x[i] != 0.0) {
            found = 1;
            break;
        }
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(found);
}

/* --- embedding_distance ------------------------------------------------------------------ */

PyDoc_STRVAR(embedding_distance_doc,
"embedding_distance($module, a, b, blocks, /)\n"
"--\n"
"\n"
"tracehound.drift._score.embedding_distance(a, b, blocks): the weighted mean of the blocks'\n"
"cosine distances over the blocks non-zero on both sides (None when there is none), clipped\n"
"to [0, 1], NaN as 0. Sums in index order (see the file's comment).\n"
"\n"
"`a`, `b`: 1-D C-contiguous float64 buffers of the same length; `blocks`: a tuple or list\n"
"of (start, stop, weight) tuples (ints within the vectors, a float). NotImplemented for\n"
"anything else.");

static PyObject *
embedding_distance(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer va, vb;
    block_t blocks[MAX_BLOCKS];
    Py_ssize_t n_blocks, k;
    const double *a, *b;
    double total = 0.0, weight_sum = 0.0, value;

    (void)module;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError,
                     "embedding_distance() takes exactly 3 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!get_vector(args[0], &va, -1)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    if (!get_vector(args[1], &vb, va.shape[0])) {
        PyBuffer_Release(&va);
        Py_RETURN_NOTIMPLEMENTED;
    }
    n_blocks = get_blocks(args[2], va.shape[0], blocks);
    if (n_blocks < 0) {
        PyBuffer_Release(&vb);
        PyBuffer_Release(&va);
        Py_RETURN_NOTIMPLEMENTED;
    }
    a = (const double *)va.buf;
    b = (const double *)vb.buf;
    for (k = 0; k < n_blocks; k++) {
        const block_t *block = &blocks[k];
        double nx = sqrt(dot(a, a, block->start, block->stop));
        double ny = sqrt(dot(b, b, block->start, block->stop));

        if (nx == 0.0 || ny == 0.0 || block->weight <= 0.0) {
            continue;
        }
        total += block->weight * (1.0 - dot(a, b, block->start, block->stop) / (nx * ny));
        weight_sum += block->weight;
    }
    PyBuffer_Release(&vb);
    PyBuffer_Release(&va);
    if (weight_sum == 0.0) {
        Py_RETURN_NONE;
    }
    value = total / weight_sum;
    if (isnan(value) || value < 0.0) {
        value = 0.0;
    }
    else if (value > 1.0) {
        value = 1.0;
    }
    return PyFloat_FromDouble(value);
}

/* --- ring_distances ---------------------------------------------------------------------- */

/* One target's sums for a row, added to the row's total and weight as block_distances does:
 * weight * (1 - cosine) and the weight where both sides are non-zero, else 0 * weight. */
static inline void
add_block(double weight, double x_norm, double y_norm, double xy, double *total,
          double *weights)
{
    double denominator = x_norm * y_norm;

    if (denominator > 0.0) {
        *total += weight * (1.0 - xy / denominator);
        *weights += weight;
    }
    else {
        *total += weight * 0.0 * (1.0 - xy);
        *weights += weight * 0.0;
    }
}

/* total / weight clipped to [0, 1] as np.clip (NaN stays NaN), NaN where the weight is 0. */
static PyObject *
clipped_ratio(double total, double weight)
{
    double value;

    if (weight == 0.0) {
        return PyFloat_FromDouble(Py_NAN);
    }
    value = total / weight;
    if (!isnan(value)) {
        value = value > 0.0 ? value : 0.0;
        value = value < 1.0 ? value : 1.0;
    }
    return PyFloat_FromDouble(value);
}

PyDoc_STRVAR(ring_distances_doc,
"ring_distances($module, rows, centroid, run, blocks, /)\n"
"--\n"
"\n"
"The two columns of tracehound.drift._score.block_distances(matrix, [centroid, run], blocks),\n"
"as two lists: matrix has a row per item of `rows` (zeros for None), `run` None is zeros.\n"
"Each value is the weighted mean, over the blocks of positive weight non-zero on both sides,\n"
"of the cosine distances, clipped to [0, 1]; NaN where no block is. Sums in index order (see\n"
"the file's comment).\n"
"\n"
"`rows`: a list or tuple of None or 1-D C-contiguous float64 buffers as long as `centroid`\n"
"(one too); `run`: None or such a buffer; `blocks`: a tuple or list of (start, stop, weight)\n"
"tuples (ints within the vectors, a float). None for anything else.");

static PyObject *
ring_distances(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *rows, *out = NULL, *to_centroid = NULL, *to_run = NULL;
    Py_buffer vc, vr;
    block_t blocks[MAX_BLOCKS];
    double centroid_norms[MAX_BLOCKS], run_norms[MAX_BLOCKS];
    Py_ssize_t n_blocks, n_rows, dim, i, k;
    const double *c, *r = NULL;
    int has_run, handled = 1;

    (void)module;
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "ring_distances() takes exactly 4 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    rows = args[0];
    if (!PyList_CheckExact(rows) && !PyTuple_CheckExact(rows)) {
        Py_RETURN_NONE;
    }
    if (!get_vector(args[1], &vc, -1)) {
        Py_RETURN_NONE;
    }
    dim = vc.shape[0];
    has_run = args[2] != Py_None;
    if (has_run && !get_vector(args[2], &vr, dim)) {
        PyBuffer_Release(&vc);
        Py_RETURN_NONE;
    }
    n_blocks = get_blocks(args[3], dim, blocks);
    if (n_blocks < 0) {
        handled = 0;
        goto done;
    }
    c = (const double *)vc.buf;
    if (has_run) {
        r = (const double *)vr.buf;
    }
    for (k = 0; k < n_blocks; k++) {
        centroid_norms[k] = sqrt(dot(c, c, blocks[k].start, blocks[k].stop));
        run_norms[k] = has_run ? sqrt(dot(r, r, blocks[k].start, blocks[k].stop)) : 0.0;
    }
    /* held: the buffers below are read from its items */
    Py_INCREF(rows);
    n_rows = PySequence_Fast_GET_SIZE(rows);
    to_centroid = PyList_New(n_rows);
    to_run = PyList_New(n_rows);
    if (to_centroid == NULL || to_run == NULL) {
        Py_DECREF(rows);
        goto done;
    }
    for (i = 0; i < n_rows; i++) {
        PyObject *row;
        double total_c = 0.0, weights_c = 0.0, total_r = 0.0, weights_r = 0.0;
        const double *x = NULL;
        Py_buffer vx;
        PyObject *value;

        if (i >= PySequence_Fast_GET_SIZE(rows)) {
            handled = 0; /* shrunk by Python code run by a buffer request */
            break;
        }
        row = PySequence_Fast_GET_ITEM(rows, i);
        Py_INCREF(row);
        if (row != Py_None) {
            if (!get_vector(row, &vx, dim)) {
                Py_DECREF(row);
                handled = 0;
                break;
            }
            x = (const double *)vx.buf;
        }
        for (k = 0; k < n_blocks; k++) {
            const block_t *block = &blocks[k];
            double x_norm = 0.0, xc = 0.0, xr = 0.0;

            if (block->weight <= 0.0) {
                continue;
            }
            if (x != NULL) {
                dot3(x, c, r, block->start, block->stop, &x_norm, &xc, &xr);
                x_norm = sqrt(x_norm);
            }
            add_block(block->weight, x_norm, centroid_norms[k], xc, &total_c, &weights_c);
            add_block(block->weight, x_norm, run_norms[k], xr, &total_r, &weights_r);
        }
        if (x != NULL) {
            PyBuffer_Release(&vx);
        }
        Py_DECREF(row);
        value = clipped_ratio(total_c, weights_c);
        if (value == NULL) {
            Py_DECREF(rows);
            goto done;
        }
        PyList_SET_ITEM(to_centroid, i, value);
        value = clipped_ratio(total_r, weights_r);
        if (value == NULL) {
            Py_DECREF(rows);
            goto done;
        }
        PyList_SET_ITEM(to_run, i, value);
    }
    Py_DECREF(rows);
    if (handled) {
        out = PyTuple_Pack(2, to_centroid, to_run);
    }
done:
    Py_XDECREF(to_centroid);
    Py_XDECREF(to_run);
    if (has_run) {
        PyBuffer_Release(&vr);
    }
    PyBuffer_Release(&vc);
    if (!handled) {
        Py_RETURN_NONE;
    }
    return out;
}

/* --- complexity ------------------------------------------------------------------------- */

/* np.maximum / np.minimum of two doubles (NaN wins). */
static inline double
max_nan(double a, double b)
{
    return (a >= b || isnan(a)) ? a : b;
}

static inline double
min_nan(double a, double b)
{
    return (a <= b || isnan(a)) ? a : b;
}

/* The n exact floats of a list or tuple into out; 0 for anything else. */
static int
get_floats(PyObject *seq, Py_ssize_t n, double *out)
{
    Py_ssize_t i;

    if ((!PyList_CheckExact(seq) && !PyTuple_CheckExact(seq)) ||
        PySequence_Fast_GET_SIZE(seq) != n) {
        return 0;
    }
    for (i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);

        if (!PyFloat_CheckExact(item)) {
            return 0;
        }
        out[i] = PyFloat_AS_DOUBLE(item);
    }
    return 1;
}

/* A new list of the n doubles, or NULL with an exception set. */
static PyObject *
float_list(const double *values, Py_ssize_t n)
{
    PyObject *out = PyList_New(n);
    Py_ssize_t i;

    if (out == NULL) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        PyObject *value = PyFloat_FromDouble(values[i]);

        if (value == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, value);
    }
    return out;
}

#define MAX_DIMS 64

PyDoc_STRVAR(complexity_scores_doc,
"complexity_scores($module, x, mean, m2, weight, absolute, relative, cap, /)\n"
"--\n"
"\n"
"The drift scorer's complexity arithmetic (tracehound.drift._score.DriftScorer._sigma_list\n"
"and _complexity_of) for a run's values `x` (a list or tuple of floats) against the baseline's\n"
"weighted `mean` and `m2` of total `weight`, with the scorer's `absolute` and `relative`\n"
"floors and z cap: (sigmas, z, component); `mean`, `m2` and the floors are 1-D float64\n"
"buffers or lists or tuples of floats, all of one length. The elementwise\n"
"steps are numpy's, the same bits; the component's sum of squares runs in index order.\n"
"None for anything else (other lengths, more than 64 dimensions, non-float values).");

/* The values of a list or tuple of exact floats, or of a 1-D C-contiguous float64 buffer (a
 * numpy array: asking it for a buffer costs more than copying a short list), into out: *n of
 * them (*n < 0: as many as there are, at most MAX_DIMS, and *n set). 0 for anything else. */
static int
get_values(PyObject *obj, Py_ssize_t *n, double *out)
{
    Py_buffer view;

    if (PyList_CheckExact(obj) || PyTuple_CheckExact(obj)) {
        if (*n < 0) {
            *n = PySequence_Fast_GET_SIZE(obj);
        }
        return *n <= MAX_DIMS && get_floats(obj, *n, out);
    }
    if (!get_vector(obj, &view, *n)) {
        return 0;
    }
    if (*n < 0) {
        *n = view.shape[0];
    }
    if (*n <= MAX_DIMS) {
        memcpy(out, view.buf, (size_t)*n * sizeof(double));
    }
    PyBuffer_Release(&view);
    return *n <= MAX_DIMS;
}

static PyObject *
complexity_scores(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    double x[MAX_DIMS], sigma[MAX_DIMS], z[MAX_DIMS];
    double mean[MAX_DIMS], m2[MAX_DIMS], absolute[MAX_DIMS], relative[MAX_DIMS];
    double weight, cap, sum = 0.0, component = 0.0;
    Py_ssize_t n = -1, i, n_active = 0;
    PyObject *sigmas = NULL, *zs = NULL, *out = NULL;

    (void)module;
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError,
                     "complexity_scores() takes exactly 7 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PyFloat_CheckExact(args[3]) || !PyFloat_CheckExact(args[6])) {
        Py_RETURN_NONE;
    }
    weight = PyFloat_AS_DOUBLE(args[3]);
    cap = PyFloat_AS_DOUBLE(args[6]);
    if (!get_values(args[1], &n, mean) || !get_floats(args[0], n, x) ||
        !get_values(args[2], &n, m2) || !get_values(args[4], &n, absolute) ||
        !get_values(args[5], &n, relative)) {
        Py_RETURN_NONE;
    }
    for (i = 0; i < n; i++) {
        double std = 0.0, capped;

        if (weight > 1.0) {
            std = sqrt(max_nan(m2[i] / (weight - 1.0), 0.0));
        }
        else if (weight > 0.0) {
            std = sqrt(max_nan(m2[i] / weight, 0.0));
        }
        sigma[i] = max_nan(std, max_nan(absolute[i], relative[i] * fabs(mean[i])));
        z[i] = (x[i] - mean[i]) / sigma[i];
        /* dimensions the agent never uses are left out */
        if (x[i] != 0.0 || mean[i] != 0.0 || m2[i] > 0.0) {
            capped = min_nan(fabs(z[i]), cap) / cap;
            sum += capped * capped;
            n_active++;
        }
    }
    if (n_active > 0) {
        component = sqrt(sum / (double)n_active);
        if (isnan(component) || component < 0.0) {
            component = 0.0;
        }
        else if (component > 1.0) {
            component = 1.0;
        }
    }
    sigmas = float_list(sigma, n);
    zs = sigmas == NULL ? NULL : float_list(z, n);
    if (zs != NULL) {
        PyObject *c = PyFloat_FromDouble(component);

        if (c != NULL) {
            out = PyTuple_Pack(3, sigmas, zs, c);
            Py_DECREF(c);
        }
    }
    Py_XDECREF(sigmas);
    Py_XDECREF(zs);
    return out;
}

PyDoc_STRVAR(complexity_distances_doc,
"complexity_distances($module, rows, x, sigmas, cap, /)\n"
"--\n"
"\n"
"For each row (a list or tuple of floats, as long as `x`), the root mean square of\n"
"min(|row - x| / sigmas, cap) / cap over the dimensions: the complexity distance the drift\n"
"scorer gives the recent runs. Elementwise steps as numpy's; sums in index order. None for\n"
"anything else (other lengths, more than 64 dimensions, non-float values).");

static PyObject *
complexity_distances(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    double x[MAX_DIMS], sigma[MAX_DIMS], row[MAX_DIMS];
    PyObject *rows, *out;
    Py_ssize_t n, n_rows, i, j;
    double cap;

    (void)module;
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError,
                     "complexity_distances() takes exactly 4 arguments (%zd given)", nargs);
        return NULL;
    }
    rows = args[0];
    if ((!PyList_CheckExact(rows) && !PyTuple_CheckExact(rows)) ||
        (!PyList_CheckExact(args[1]) && !PyTuple_CheckExact(args[1])) ||
        !PyFloat_CheckExact(args[3])) {
        Py_RETURN_NONE;
    }
    n = PySequence_Fast_GET_SIZE(args[1]);
    if (n > MAX_DIMS || !get_floats(args[1], n, x) || !get_floats(args[2], n, sigma)) {
        Py_RETURN_NONE;
    }
    cap = PyFloat_AS_DOUBLE(args[3]);
    n_rows = PySequence_Fast_GET_SIZE(rows);
    out = PyList_New(n_rows);
    if (out == NULL) {
        return NULL;
    }
    for (i = 0; i < n_rows; i++) {
        double sum = 0.0;
        PyObject *value;

        if (!get_floats(PySequence_Fast_GET_ITEM(rows, i), n, row)) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        for (j = 0; j < n; j++) {
            double d = min_nan(fabs(row[j] - x[j]) / sigma[j], cap) / cap;

            sum += d * d;
        }
        value = PyFloat_FromDouble(sqrt(sum / (double)n));
        if (value == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, value);
    }
    return out;
}

/* --- tool mixes -------------------------------------------------------------------------- */

/* tool_mix_distance of two tool-share dicts (None: no tools), into *out; 0 for anything it
 * does not handle (keys not exact strs, values not exact floats, a zero norm). */
static int
tool_mix(PyObject *run, PyObject *base, double *out)
{
    double dot = 0.0, run_sq = 0.0, base_sq = 0.0, value;
    Py_ssize_t pos = 0;
    PyObject *key, *item;

    if (run == Py_None || base == Py_None) {
        *out = run == base ? 0.0 : 1.0;
        return 1;
    }
    if (!PyDict_CheckExact(run) || !PyDict_CheckExact(base)) {
        return 0;
    }
    /* only exact strs as keys: the lookups below run no Python code */
    while (PyDict_Next(base, &pos, &key, &item)) {
        if (!PyUnicode_CheckExact(key) || !PyFloat_CheckExact(item)) {
            return 0;
        }
    }
    /* the run's tools, then the baseline's others */
    pos = 0;
    while (PyDict_Next(run, &pos, &key, &item)) {
        PyObject *other;
        double r, b = 0.0;

        if (!PyUnicode_CheckExact(key) || !PyFloat_CheckExact(item)) {
            return 0;
        }
        r = PyFloat_AS_DOUBLE(item);
        other = PyDict_GetItemWithError(base, key);
        if (other != NULL) {
            b = PyFloat_AS_DOUBLE(other);
        }
        else if (PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        dot += r * b;
        run_sq += r * r;
        base_sq += b * b;
    }
    pos = 0;
    while (PyDict_Next(base, &pos, &key, &item)) {
        double b;
        int present;

        present = PyDict_Contains(run, key);
        if (present < 0) {
            PyErr_Clear();
            return 0;
        }
        if (present) {
            continue;
        }
        b = PyFloat_AS_DOUBLE(item);
        base_sq += b * b;
    }
    if (!(run_sq * base_sq != 0.0)) {
        return 0; /* Python divides by zero here: let it raise */
    }
    value = 1.0 - dot / sqrt(run_sq * base_sq);
    *out = isnan(value) || value < 0.0 ? 0.0 : value > 1.0 ? 1.0 : value;
    return 1;
}

PyDoc_STRVAR(tool_mixes_doc,
"tool_mixes($module, run, baselines, /)\n"
"--\n"
"\n"
"[tracehound.drift._score._tool_mix(run, b) for b in baselines]: the cosine distance of tool\n"
"shares (dicts of str to float, None for no tools), over the run's tools and then the\n"
"others' (Python iterates their union set: sums in another order). None for anything else.");

static PyObject *
tool_mixes(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *baselines, *out;
    Py_ssize_t n, i;

    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "tool_mixes() takes exactly 2 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    baselines = args[1];
    if (!PyList_CheckExact(baselines) && !PyTuple_CheckExact(baselines)) {
        Py_RETURN_NONE;
    }
    n = PySequence_Fast_GET_SIZE(baselines);
    out = PyList_New(n);
    if (out == NULL) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        PyObject *value;
        double distance;

        if (!tool_mix(args[0], PySequence_Fast_GET_ITEM(baselines, i), &distance)) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        value = PyFloat_FromDouble(distance);
        if (value == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, value);
    }
    return out;
}

/* --- recent_divergences ---------------------------------------------------------------------- */

/* One recent run: its divergence from the scored run and its ids (borrowed), for the ranking. */
typedef struct {
    double divergence;
    PyObject *trace_id, *run_id;
    Py_ssize_t index;
} ranked_t;

/* Does a rank before b? Python's order of (-divergence, trace_id, run_id, index) tuples (no NaN
 * here; the ids are exact strs, whose comparison runs no Python code). */
static int
ranks_before(const ranked_t *a, const ranked_t *b)
{
    int c;

    if (a->divergence != b->divergence) {
        return a->divergence > b->divergence;
    }
    c = PyUnicode_Compare(a->trace_id, b->trace_id);
    if (c != 0) {
        return c < 0;
    }
    c = PyUnicode_Compare(a->run_id, b->run_id);
    if (c != 0) {
        return c < 0;
    }
    return a->index < b->index;
}

/* Attribute names of a RunSummary, interned once (tracehound_add_drift). */
enum {
    A_TRACE_ID,
    A_RUN_ID,
    A_COMPLEXITY,
    A_EMBEDDING,
    A_SHARES,
    A_TOOL_SHARES,
    A_NORMS,
    A_TOOLS,
    A_NONE, /* the severities, in order */
    A_WARNING,
    A_ALERT,
    A_CRITICAL,
    A_TOOL_MIX, /* the components, in order */
    A_SEMANTIC,
    A_COMPLEXITY_COMPONENT,
    N_NAMES
};
static const char *const NAME_STRINGS[N_NAMES] = {
    "trace_id", "run_id", "complexity", "embedding", "_shares", "tool_shares", "_norms", "tools",
    "none", "warning", "alert", "critical", "tool_mix", "semantic", "complexity",
};
static PyObject *names[N_NAMES];

/* The attribute names[which] of obj (a new reference), or NULL with no exception set. */
static PyObject *
get_attr(PyObject *obj, int which)
{
    PyObject *value = PyObject_GetAttr(obj, names[which]);

    if (value == NULL) {
        PyErr_Clear();
    }
    return value;
}

#define MAX_RECENT 256

/* RunSummary.tool_shares() of a summary whose `tools` is an exact dict of exact strs to exact
 * ints (each and their total below 2^53 in magnitude): tool_shares_of(tools), each count
 * divided by the total as a float (the same bits: the conversions are exact), kept in the
 * summary's `_shares` when it has tools, as the method does. A new reference (None: no total
 * above zero), or NULL: other tools (no exception set: the caller calls the method), or an
 * exception. */
static PyObject *
summary_shares(PyObject *summary)
{
    PyObject *tools = get_attr(summary, A_TOOLS), *shares, *name, *count;
    Py_ssize_t pos = 0;
    long long total = 0, limit = (long long)1 << 53;
    int overflow;

    if (tools == NULL) {
        return NULL;
    }
    if (!PyDict_CheckExact(tools)) {
        Py_DECREF(tools);
        return NULL;
    }
    while (PyDict_Next(tools, &pos, &name, &count)) {
        long long v;

        if (!PyUnicode_CheckExact(name) || !PyLong_CheckExact(count)) {
            Py_DECREF(tools);
            return NULL;
        }
        v = PyLong_AsLongLongAndOverflow(count, &overflow);
        total += v;
        if (overflow || v >= limit || v <= -limit || total >= limit || total <= -limit) {
            Py_DECREF(tools);
            return NULL;
        }
    }
    if (total <= 0) {
        shares = Py_NewRef(Py_None);
    }
    else {
        shares = PyDict_New();
        pos = 0;
        while (shares != NULL && PyDict_Next(tools, &pos, &name, &count)) {
            PyObject *share;

            if (!PyLong_CheckExact(count)) { /* changed by Python code a collection ran */
                Py_CLEAR(shares);
                break;
            }
            share = PyFloat_FromDouble((double)PyLong_AsLongLong(count) / (double)total);

            if (share == NULL || PyDict_SetItem(shares, name, share) < 0) {
                Py_XDECREF(share);
                Py_CLEAR(shares);
                break;
            }
            Py_DECREF(share);
        }
    }
    /* object.__setattr__, as the method: the summary is a frozen dataclass */
    if (shares != NULL && PyDict_GET_SIZE(tools) > 0 &&
        PyObject_GenericSetAttr(summary, names[A_SHARES], shares) < 0) {
        PyErr_Clear(); /* not a slot of its own: made again next time */
    }
    Py_DECREF(tools);
    return shares;
}

/* A summary's embedding (`embedding`, not None) as `dim` doubles at *x, and the squared norms
 * of its blocks (dot(x, x) over each) in norms. Both are kept in the summary's `_norms` slot as
 * (blocks, norms, memoryview of the embedding): asking numpy for a buffer costs more than the
 * rest of a summary's work but the dot products, and the embedding does not change. They are
 * made again when the slot holds anything else (None at first, the norms of other blocks, the
 * view of another array); a summary without such a slot gets them made every time. *holder
 * gets a reference to release once *x is no longer read (it keeps the view alive). Returns 1,
 * 0 for an embedding that is not a 1-D C-contiguous float64 buffer of dim elements (no
 * exception set), -1 with an exception set. */
static int
summary_vector(PyObject *summary, PyObject *embedding, PyObject *blocks_obj,
               const block_t *blocks, Py_ssize_t n_blocks, Py_ssize_t dim, PyObject **holder,
               const double **x, double *norms)
{
    PyObject *kept = get_attr(summary, A_NORMS), *view, *list;
    const Py_buffer *b;
    Py_ssize_t k;

    if (kept != NULL && PyTuple_CheckExact(kept) && PyTuple_GET_SIZE(kept) == 3 &&
        PyMemoryView_Check(PyTuple_GET_ITEM(kept, 2))) {
        view = PyTuple_GET_ITEM(kept, 2);
        b = PyMemoryView_GET_BUFFER(view);
        /* blocks were checked to be tuples of exact ints and floats: comparing them runs no
         * Python code */
        if (PyMemoryView_GET_BASE(view) == embedding && b->len == dim * (Py_ssize_t)sizeof(double) &&
            (PyTuple_GET_ITEM(kept, 0) == blocks_obj ||
             PyObject_RichCompareBool(PyTuple_GET_ITEM(kept, 0), blocks_obj, Py_EQ) == 1) &&
            get_floats(PyTuple_GET_ITEM(kept, 1), n_blocks, norms)) {
            *holder = kept;
            *x = (const double *)b->buf;
            return 1;
        }
        if (PyErr_Occurred()) {
            Py_DECREF(kept);
            return -1;
        }
    }
    Py_XDECREF(kept);
    view = PyMemoryView_FromObject(embedding);
    if (view == NULL) {
        PyErr_Clear();
        return 0;
    }
    b = PyMemoryView_GET_BUFFER(view);
    if (b->ndim != 1 || b->itemsize != (Py_ssize_t)sizeof(double) || b->format == NULL ||
        strcmp(b->format, "d") != 0 || b->shape[0] != dim || !PyBuffer_IsContiguous(b, 'C')) {
        Py_DECREF(view);
        return 0;
    }
    *x = (const double *)b->buf;
    for (k = 0; k < n_blocks; k++) {
        norms[k] = dot(*x, *x, blocks[k].start, blocks[k].stop);
    }
    list = float_list(norms, n_blocks);
    if (list == NULL) {
        Py_DECREF(view);
        return -1;
    }
    kept = PyTuple_Pack(3, blocks_obj, list, view);
    Py_DECREF(list);
    Py_DECREF(view);
    if (kept == NULL) {
        return -1;
    }
    /* object.__setattr__: the summary is a frozen dataclass */
    if (PyObject_GenericSetAttr(summary, names[A_NORMS], kept) < 0) {
        PyErr_Clear(); /* not a slot of its own: made again next time */
    }
    *holder = kept;
    return 1;
}

PyDoc_STRVAR(recent_divergences_doc,
"recent_divergences($module, recent, x, sigmas, cap, run_shares, centroid, run, blocks,\n"
"                   weights, top, /)\n"
"--\n"
"\n"
"The drift scorer's comparison of a run with its baseline's recent runs\n"
"(tracehound.drift._score.DriftScorer._recent_runs) in one call: for each RunSummary of\n"
"`recent`, the complexity distance to `x` (complexity_distances), the tool-mix distance to\n"
"`run_shares` (tool_mixes, the summary's tool_shares()), and the semantic distances to the\n"
"centroid and to `run` (ring_distances); the composite `weights` (tool mix, semantic,\n"
"complexity) of those give each recent run's divergence. Returns (top, typical): the `top`\n"
"first (trace_id, run_id, divergence, index) by divergence (largest first), then ids and\n"
"index; and the mean distance of the recent runs with text to the centroid (None: none).\n"
"Sums in index order, as the kernels it shares (within 1e-12 of the Python code).\n"
"\n"
"None for anything else: summaries whose fields are not of the types a RunSummary holds\n"
"(ids exact strs, complexity a list or tuple of floats as long as `x`, embedding None or a\n"
"float64 buffer as long as `centroid`, tool shares a dict of str to float or None), more than\n"
"256 summaries or 64 dimensions, non-finite divergences, and what the kernels leave to Python.");

/* recent_divergences, with the blocks' norms of the centroid and of the run when the caller has
 * them (NULL: computed here; the same values, from the same sums). */
static PyObject *recent_divergences_with(PyObject *const *args, Py_ssize_t nargs,
                                         const double *known_centroid_norms,
                                         const double *known_run_norms);

static PyObject *
recent_divergences(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return recent_divergences_with(args, nargs, NULL, NULL);
}

static PyObject *
recent_divergences_with(PyObject *const *args, Py_ssize_t nargs,
                        const double *known_centroid_norms, const double *known_run_norms)
{
    PyObject *recent, *run_shares, *out = NULL;
    double x[MAX_DIMS], sigma[MAX_DIMS], row[MAX_DIMS];
    double weights[3], centroid_norms[MAX_BLOCKS], run_norms[MAX_BLOCKS], row_norms[MAX_BLOCKS];
    double cap, typical_sum = 0.0;
    block_t blocks[MAX_BLOCKS];
    ranked_t ranked[MAX_RECENT];
    PyObject *held[2 * MAX_RECENT];
    Py_ssize_t n, n_dims, n_blocks, n_held = 0, n_typical = 0, top, i, j, k;
    Py_buffer vc, vr;
    const double *c, *r = NULL;
    int has_run, handled = 0;

    if (nargs != 10) {
        PyErr_Format(PyExc_TypeError,
                     "recent_divergences() takes exactly 10 arguments (%zd given)", nargs);
        return NULL;
    }
    recent = args[0];
    run_shares = args[4];
    if (!PyTuple_CheckExact(recent) || !PyFloat_CheckExact(args[3]) ||
        !PyLong_CheckExact(args[9]) || !PyTuple_CheckExact(args[8]) ||
        PyTuple_GET_SIZE(args[8]) != 3) {
        Py_RETURN_NONE;
    }
    n = PyTuple_GET_SIZE(recent);
    if (n > MAX_RECENT || (!PyList_CheckExact(args[1]) && !PyTuple_CheckExact(args[1]))) {
        Py_RETURN_NONE;
    }
    n_dims = PySequence_Fast_GET_SIZE(args[1]);
    if (n_dims > MAX_DIMS || !get_floats(args[1], n_dims, x) ||
        !get_floats(args[2], n_dims, sigma) || !get_floats(args[8], 3, weights)) {
        Py_RETURN_NONE;
    }
    cap = PyFloat_AS_DOUBLE(args[3]);
    top = PyLong_AsSsize_t(args[9]);
    if (top < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (!get_vector(args[5], &vc, -1)) {
        Py_RETURN_NONE;
    }
    has_run = args[6] != Py_None;
    if (has_run && !get_vector(args[6], &vr, vc.shape[0])) {
        PyBuffer_Release(&vc);
        Py_RETURN_NONE;
    }
    n_blocks = get_blocks(args[7], vc.shape[0], blocks);
    if (n_blocks < 0) {
        goto done;
    }
    c = (const double *)vc.buf;
    if (has_run) {
        r = (const double *)vr.buf;
    }
    for (k = 0; k < n_blocks; k++) {
        centroid_norms[k] = known_centroid_norms != NULL
                                ? known_centroid_norms[k]
                                : sqrt(dot(c, c, blocks[k].start, blocks[k].stop));
        run_norms[k] = !has_run                  ? 0.0
                       : known_run_norms != NULL ? known_run_norms[k]
                                                 : sqrt(dot(r, r, blocks[k].start, blocks[k].stop));
    }
    for (i = 0; i < n; i++) {
        PyObject *summary = PyTuple_GET_ITEM(recent, i);
        PyObject *trace_id, *run_id, *complexity, *shares, *embedding;
        double sum = 0.0, complexity_distance, tool_distance, semantic = 0.0, divergence;
        double total_c = 0.0, weights_c = 0.0, total_r = 0.0, weights_r = 0.0;
        int ok;

        /* the ids are held until the end (the ranking reads them); the rest is read now */
        trace_id = get_attr(summary, A_TRACE_ID);
        if (trace_id == NULL) {
            goto done;
        }
        held[n_held++] = trace_id;
        run_id = get_attr(summary, A_RUN_ID);
        if (run_id == NULL) {
            goto done;
        }
        held[n_held++] = run_id;
        if (!PyUnicode_CheckExact(trace_id) || !PyUnicode_CheckExact(run_id)) {
            goto done;
        }
        complexity = get_attr(summary, A_COMPLEXITY);
        if (complexity == NULL) {
            goto done;
        }
        ok = get_floats(complexity, n_dims, row);
        Py_DECREF(complexity);
        if (!ok) {
            goto done;
        }
        for (j = 0; j < n_dims; j++) {
            double d = min_nan(fabs(row[j] - x[j]) / sigma[j], cap) / cap;

            sum += d * d;
        }
        complexity_distance = sqrt(sum / (double)n_dims);
        /* the summary's cached shares; made the first time (summary_shares, else the
         * method) */
        shares = get_attr(summary, A_SHARES);
        if (shares == Py_None) {
            Py_DECREF(shares);
            shares = summary_shares(summary);
            if (shares == NULL && !PyErr_Occurred()) {
                shares = PyObject_CallMethodNoArgs(summary, names[A_TOOL_SHARES]);
            }
            if (shares == NULL) {
                PyErr_Clear();
            }
        }
        if (shares == NULL) {
            goto done;
        }
        ok = tool_mix(run_shares, shares, &tool_distance);
        Py_DECREF(shares);
        if (!ok) {
            goto done;
        }
        embedding = get_attr(summary, A_EMBEDDING);
        if (embedding == NULL) {
            goto done;
        }
        if (embedding != Py_None) {
            PyObject *holder;
            const double *row_embedding;

            ok = summary_vector(summary, embedding, args[7], blocks, n_blocks, vc.shape[0],
                                &holder, &row_embedding, row_norms);
            if (ok <= 0) {
                Py_DECREF(embedding);
                goto done;
            }
            for (k = 0; k < n_blocks; k++) {
                const block_t *block = &blocks[k];
                double x_norm, xc, xr;

                if (block->weight <= 0.0) {
                    continue;
                }
                dot2(row_embedding, c, r, block->start, block->stop, &xc, &xr);
                x_norm = sqrt(row_norms[k]);
                add_block(block->weight, x_norm, centroid_norms[k], xc, &total_c, &weights_c);
                add_block(block->weight, x_norm, run_norms[k], xr, &total_r, &weights_r);
            }
            Py_DECREF(holder);
        }
        Py_DECREF(embedding);
        /* ring_distances' values: NaN (no text on one side) is no distance to the centroid and
         * a semantic distance of 0 to the run */
        if (weights_c != 0.0) {
            double value = total_c / weights_c;

            if (!isnan(value)) {
                value = value > 0.0 ? value : 0.0;
                typical_sum += value < 1.0 ? value : 1.0;
                n_typical++;
            }
        }
        if (weights_r != 0.0) {
            double value = total_r / weights_r;

            if (!isnan(value)) {
                value = value > 0.0 ? value : 0.0;
                semantic = value < 1.0 ? value : 1.0;
            }
        }
        divergence = weights[0] * tool_distance +
                     (weights[1] * semantic + weights[2] * complexity_distance);
        if (!isfinite(divergence)) {
            goto done;
        }
        ranked[i].divergence = divergence;
        ranked[i].trace_id = trace_id;
        ranked[i].run_id = run_id;
        ranked[i].index = i;
    }
    /* insertion sort: a ring holds a handful of runs */
    for (i = 1; i < n; i++) {
        ranked_t item = ranked[i];

        for (j = i; j > 0 && ranks_before(&item, &ranked[j - 1]); j--) {
            ranked[j] = ranked[j - 1];
        }
        ranked[j] = item;
    }
    handled = 1;
    {
        PyObject *list = PyList_New(0), *typical;

        if (list == NULL) {
            goto done;
        }
        for (i = 0; i < n && i < top; i++) {
            PyObject *item = Py_BuildValue("(OOdn)", ranked[i].trace_id, ranked[i].run_id,
                                           ranked[i].divergence, ranked[i].index);

            if (item == NULL || PyList_Append(list, item) < 0) {
                Py_XDECREF(item);
                Py_DECREF(list);
                goto done;
            }
            Py_DECREF(item);
        }
        if (n_typical > 0) {
            typical = PyFloat_FromDouble(typical_sum / (double)n_typical);
            if (typical == NULL) {
                Py_DECREF(list);
                goto done;
            }
        }
        else {
            typical = Py_NewRef(Py_None);
        }
        out = PyTuple_Pack(2, list, typical);
        Py_DECREF(list);
        Py_DECREF(typical);
    }
done:
    while (n_held > 0) {
        Py_DECREF(held[--n_held]);
    }
    if (has_run) {
        PyBuffer_Release(&vr);
    }
    PyBuffer_Release(&vc);
    if (!handled && !PyErr_Occurred()) {
        Py_RETURN_NONE;
    }
    return out;
}

/* --- merge_moments --------------------------------------------------------------------------- */

PyDoc_STRVAR(merge_moments_doc,
"merge_moments($module, mean_a, m2_a, mean_b, m2_b, ratio, spread, out_mean, out_m2, /)\n"
"--\n"
"\n"
"The elementwise steps of tracehound.drift._baseline.RunningStats.merged (Chan et al.):\n"
"`out_mean = mean_a + (mean_b - mean_a) * ratio` and\n"
"`out_m2 = m2_a + m2_b + (mean_b - mean_a) ** 2 * spread`, the same operations in the same\n"
"order, so the same bits.\n"
"\n"
"All vectors: 1-D C-contiguous float64 buffers of one length, the outputs writable; `ratio`\n"
"and `spread`: floats. Returns True, or None (outputs unspecified) for anything else, and\n"
"where the compiler may fuse a multiply and an add (a fused result is rounded once).");

static PyObject *
merge_moments(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer views[6];
    Py_ssize_t n = -1, i;
    int got = 0, ok = 1;

    (void)module;
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "merge_moments() takes exactly 8 arguments (%zd given)",
                     nargs);
        return NULL;
    }
#if defined(__FP_FAST_FMA) || !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
    Py_RETURN_NONE; /* the same bits need unfused double arithmetic */
#endif
    if (!PyFloat_CheckExact(args[4]) || !PyFloat_CheckExact(args[5])) {
        Py_RETURN_NONE;
    }
    for (got = 0; got < 4; got++) {
        if (!get_vector(args[got], &views[got], n)) {
            ok = 0;
            break;
        }
        n = views[got].shape[0];
    }
    for (; ok && got < 6; got++) {
        Py_buffer *view = &views[got];

        if (PyObject_GetBuffer(args[got + 2], view,
                               PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) < 0) {
            PyErr_Clear();
            ok = 0;
            break;
        }
        if (view->ndim != 1 || view->itemsize != (Py_ssize_t)sizeof(double) ||
            view->format == NULL || strcmp(view->format, "d") != 0 || view->shape[0] != n) {
            got++;
            ok = 0;
            break;
        }
    }
    if (ok) {
        const double *mean_a = (const double *)views[0].buf, *m2_a = (const double *)views[1].buf;
        const double *mean_b = (const double *)views[2].buf, *m2_b = (const double *)views[3].buf;
        double *out_mean = (double *)views[4].buf, *out_m2 = (double *)views[5].buf;
        double ratio = PyFloat_AS_DOUBLE(args[4]), spread = PyFloat_AS_DOUBLE(args[5]);

        for (i = 0; i < n; i++) {
            double a = mean_a[i], p = m2_a[i], q = m2_b[i];
            double delta = mean_b[i] - a;

            /* read every input before writing: an output may be an input */
            out_mean[i] = a + delta * ratio;
            out_m2[i] = p + q + delta * delta * spread;
        }
    }
    while (got-- > 0) {
        PyBuffer_Release(&views[got]);
    }
    if (!ok) {
        Py_RETURN_NONE;
    }
    Py_RETURN_TRUE;
}

/* --- drift_explanation ----------------------------------------------------------------------- */

/* The explanation text is made as UTF-8 in a growable buffer, then decoded once. */
typedef struct {
    char *buf;
    size_t len, cap;
    int st; /* ST_OK; ST_ERROR (exception set) or ST_UNHANDLED once something failed */
    char stack[2048];
} text_t;

static void
text_init(text_t *t)
{
    t->buf = t->stack;
    t->len = 0;
    t->cap = sizeof t->stack;
    t->st = ST_OK;
}

static void
text_free(text_t *t)
{
    if (t->buf != t->stack) {
        PyMem_Free(t->buf);
    }
}

static void
text_add(text_t *t, const char *s, size_t n)
{
    if (t->st != ST_OK) {
        return;
    }
    if (t->cap - t->len < n) {
        size_t cap = 2 * t->cap;
        char *grown;

        while (cap - t->len < n) {
            if (cap > ((size_t)PY_SSIZE_T_MAX) / 2) {
                PyErr_NoMemory();
                t->st = ST_ERROR;
                return;
            }
            cap *= 2;
        }
        if (t->buf == t->stack) {
            grown = PyMem_Malloc(cap);
            if (grown != NULL) {
                memcpy(grown, t->stack, t->len);
            }
        }
        else {
            grown = PyMem_Realloc(t->buf, cap);
        }
        if (grown == NULL) {
            PyErr_NoMemory();
            t->st = ST_ERROR;
            return;
        }
        t->buf = grown;
        t->cap = cap;
    }
    memcpy(t->buf + t->len, s, n);
    t->len += n;
}

#define TEXT_LITERAL(t, s) text_add((t), (s), sizeof(s) - 1)

static void
text_cstr(text_t *t, const char *s)
{
    text_add(t, s, strlen(s));
}

/* The str's characters (an exact str): unhandled if it has no UTF-8 (a lone surrogate). */
static void
text_str(text_t *t, PyObject *s)
{
    Py_ssize_t n;
    const char *utf8;

    if (t->st != ST_OK) {
        return;
    }
    utf8 = PyUnicode_AsUTF8AndSize(s, &n);
    if (utf8 == NULL) {
        PyErr_Clear();
        t->st = ST_UNHANDLED;
        return;
    }
    text_add(t, utf8, (size_t)n);
}

/* format(value, f".{precision}f") for precision <= 3 and |value| < 2^53 into out (at least 32
 * bytes; with `sign`, "+.{precision}f"): its length, or -1 for other values. The value is
 * m * 2^-s exactly (m < 2^53, s >= 0), so value * 10^precision is m * 10^precision (below
 * 2^63) shifted right by s, rounded to the nearest integer, ties to even: the correctly
 * rounded digits CPython's conversion (dtoa's mode 3) gives, without its big integers. */
static int
fixed_digits(double value, int precision, int sign, char *out)
{
    static const uint64_t POW10[4] = {1, 10, 100, 1000};
    uint64_t bits, m, scaled, q, whole, frac;
    int biased, shift, n = 0, k;
    char digits[24];

    memcpy(&bits, &value, sizeof bits);
    biased = (int)((bits >> 52) & 0x7ff);
    m = bits & ((UINT64_C(1) << 52) - 1);
    if (precision < 0 || precision > 3 || biased > 1075) {
        return -1; /* 2^53 or more, or not finite */
    }
    if (biased == 0) {
        shift = 1074; /* a subnormal */
    }
    else {
        m |= UINT64_C(1) << 52;
        shift = 1075 - biased;
    }
    scaled = m * POW10[precision];
    if (shift == 0) {
        q = scaled;
    }
    else if (shift >= 64) {
        q = 0; /* scaled < 2^63 <= half a unit */
    }
    else {
        uint64_t rest = scaled & ((UINT64_C(1) << shift) - 1);
        uint64_t half = UINT64_C(1) << (shift - 1);

        q = scaled >> shift;
        if (rest > half || (rest == half && (q & 1))) {
            q++;
        }
    }
    if (bits >> 63) {
        out[n++] = '-'; /* -0.0 and negatives that round to 0 included, as Python */
    }
    else if (sign) {
        out[n++] = '+';
    }
    whole = q / POW10[precision];
    frac = q % POW10[precision];
    k = 0;
    do {
        digits[k++] = (char)('0' + whole % 10);
        whole /= 10;
    } while (whole > 0);
    while (k > 0) {
        out[n++] = digits[--k];
    }
    if (precision > 0) {
        out[n++] = '.';
        for (k = precision - 1; k >= 0; k--) {
            out[n + k] = (char)('0' + frac % 10);
            frac /= 10;
        }
        n += precision;
    }
    return n;
}

/* format(value, f".{precision}f") (with `flags` Py_DTSF_SIGN: "+.{precision}f"), as
 * float.__format__ makes it: fixed_digits, else CPython's own conversion. */
static void
text_fixed(text_t *t, double value, int precision, int flags)
{
    char quick[32], *s;
    int n;

    if (t->st != ST_OK) {
        return;
    }
    n = fixed_digits(value, precision, flags & Py_DTSF_SIGN, quick);
    if (n >= 0) {
        text_add(t, quick, (size_t)n);
        return;
    }
    s = PyOS_double_to_string(value, 'f', precision, flags, NULL);
    if (s == NULL) {
        t->st = ST_ERROR;
        return;
    }
    text_cstr(t, s);
    PyMem_Free(s);
}

/* format(value, ".0%"): float.__format__ multiplies by 100 and formats as "f". */
static void
text_percent(text_t *t, double value)
{
    text_fixed(t, value * 100.0, 0, 0);
    TEXT_LITERAL(t, "%");
}

/* _score._num: ".0f" when within 1e-9 of round(value) (ties to even, as Python's round), else
 * ".1f". */
static void
text_num(text_t *t, double value)
{
    double rounded = round(value);

    if (fabs(value - rounded) == 0.5) {
        rounded = 2.0 * round(value / 2.0);
    }
    text_fixed(t, value, fabs(value - rounded) < 1e-9 ? 0 : 1, 0);
}

/* A named value to rank: a tool's share (and its baseline share) or a dimension's z-score. */
typedef struct {
    PyObject *name; /* borrowed */
    double key;     /* ranked by it, largest first, then by name */
    double share, base, mean, value, z;
} named_t;

/* Does a rank before b (key descending, then name)? Python's order of (-key, name) tuples for
 * finite keys and distinct exact strs. */
static int
named_before(const named_t *a, const named_t *b)
{
    if (a->key != b->key) {
        return a->key > b->key;
    }
    return PyUnicode_Compare(a->name, b->name) < 0;
}

static void
named_sort(named_t *items, Py_ssize_t n)
{
    Py_ssize_t i, j;

    for (i = 1; i < n; i++) {
        named_t item = items[i];

        for (j = i; j > 0 && named_before(&item, &items[j - 1]); j--) {
            items[j] = items[j - 1];
        }
        items[j] = item;
    }
}

#define MAX_EXPLAINED_TOOLS 256

/* builtins.sum, for the baseline's tool total: Python's float sum (its algorithm changed in
 * 3.12) gives the bits the Python code divides by. */
static PyObject *builtin_sum;

/* A finite exact float's value into *out; 0 for anything else. */
static int
finite_float(PyObject *obj, double *out)
{
    if (!PyFloat_CheckExact(obj)) {
        return 0;
    }
    *out = PyFloat_AS_DOUBLE(obj);
    return isfinite(*out);
}

/* The tools' shares of the run (a dict of exact strs to exact ints, each and their total below
 * 2^53 in magnitude: Python's int true division is then the double division) into out, in the
 * dict's order: their number, or -1 for anything else. A zero total gives no shares. */
static Py_ssize_t
run_tool_shares(PyObject *tools, named_t *out)
{
    Py_ssize_t pos = 0, n = 0;
    PyObject *name, *count;
    long long total = 0, limit = (long long)1 << 53;
    int overflow;

    if (!PyDict_CheckExact(tools) || PyDict_GET_SIZE(tools) > MAX_EXPLAINED_TOOLS) {
        return -1;
    }
    while (PyDict_Next(tools, &pos, &name, &count)) {
        long long v;

        if (!PyUnicode_CheckExact(name) || !PyLong_CheckExact(count)) {
            return -1;
        }
        v = PyLong_AsLongLongAndOverflow(count, &overflow);
        if (overflow || v >= limit || v <= -limit) {
            return -1;
        }
        total += v;
        if (total >= limit || total <= -limit) {
            return -1;
        }
        out[n].name = name;
        out[n].value = (double)v;
        n++;
    }
    if (total == 0) {
        return 0;
    }
    for (pos = 0; pos < n; pos++) {
        out[pos].share = out[pos].value / (double)total;
    }
    return n;
}

/* The base shares of the baseline's tools (a dict of exact strs to finite exact floats) in the
 * dict's order, `value / total` with total = sum(tools.values()): their number (0: a total
 * that is not > 0), or -1 (with *st set) for anything else. */
static Py_ssize_t
base_tool_shares(PyObject *tools, named_t *out, double *total_out, int *st)
{
    Py_ssize_t pos = 0, n = 0, i;
    PyObject *name, *value, *values, *sum;
    double total;

    *st = ST_UNHANDLED;
    if (!PyDict_CheckExact(tools) || PyDict_GET_SIZE(tools) > MAX_EXPLAINED_TOOLS) {
        return -1;
    }
    while (PyDict_Next(tools, &pos, &name, &value)) {
        if (!PyUnicode_CheckExact(name) || !finite_float(value, &out[n].value)) {
            return -1;
        }
        out[n].name = name;
        n++;
    }
    if (n == 0) {
        *total_out = 0.0;
        return 0;
    }
    values = PyDict_Values(tools);
    if (values == NULL) {
        *st = ST_ERROR;
        return -1;
    }
    sum = PyObject_CallOneArg(builtin_sum, values);
    Py_DECREF(values);
    if (sum == NULL) {
        *st = ST_ERROR;
        return -1;
    }
    if (!finite_float(sum, &total)) {
        Py_DECREF(sum);
        return -1;
    }
    Py_DECREF(sum);
    *total_out = total;
    if (!(total > 0.0)) {
        return 0;
    }
    for (i = 0; i < n; i++) {
        out[i].share = out[i].value / total;
    }
    return n;
}

/* The names of items[0:n] joined by ", ". */
static void
text_names(text_t *t, const named_t *items, Py_ssize_t n)
{
    Py_ssize_t i;

    for (i = 0; i < n; i++) {
        if (i > 0) {
            TEXT_LITERAL(t, ", ");
        }
        text_str(t, items[i].name);
    }
}

static const char *const COMPONENT_NAMES[3] = {"tool_mix", "semantic", "complexity"};
static const char *const COMPONENT_LABELS[3] = {"tool mix", "semantic", "complexity"};

/* _score._recommendation's `what`, its first letter lower-cased if `lower`. */
static void
text_what(text_t *t, int component, int lower, const named_t *appeared, Py_ssize_t n_appeared,
          const named_t *moved, Py_ssize_t n_moved)
{
    switch (component) {
    case 0:
        text_cstr(t, lower ? "c" : "C");
        TEXT_LITERAL(t, "heck whether the available tools or the tool-selection prompt changed");
        if (n_appeared > 0) {
            TEXT_LITERAL(t, " (new: ");
            text_names(t, appeared, n_appeared < 3 ? n_appeared : 3);
            TEXT_LITERAL(t, ")");
        }
        break;
    case 1:
        text_cstr(t, lower ? "c" : "C");
        TEXT_LITERAL(t, "ompare this run's reasoning with the baseline runs it diverged from; "
                        "check for a prompt or model change");
        break;
    default:
        text_cstr(t, lower ? "l" : "L");
        TEXT_LITERAL(t, "ook for retries, loops or errors behind the change in ");
        if (n_moved > 0) {
            text_names(t, moved, n_moved < 2 ? n_moved : 2);
        }
        else {
            TEXT_LITERAL(t, "cost");
        }
        break;
    }
}

PyDoc_STRVAR(drift_explanation_doc,
"drift_explanation($module, composite, severity, confidence, runs, primary, run_tools,\n"
"                  base_tools, shift_threshold, z, means, values, top, distance, typical,\n"
"                  sample, divergences, /)\n"
"--\n"
"\n"
"The text of a scored run's explanation, DriftScore.explanation_text() of the score\n"
"tracehound.drift._score.DriftScorer.score makes (its _explain, _recommendation and\n"
"DriftExplanation.text), without the explanation's objects: the same string.\n"
"\n"
"`run_tools`: the run's tool counts (features.tools); `base_tools`: the baseline's tool sums\n"
"(baseline.tools); `z`: the dimensions' z-scores (a dict, in dimension order), zipped with\n"
"the baseline `means` and the run's `values`; `top`: the config's explain_top; `divergences`:\n"
"the (trace_id, run_id, divergence, index) list of recent_divergences. Floats are formatted\n"
"by CPython's own conversion (PyOS_double_to_string), as format() does.\n"
"\n"
"Returns None for input it leaves to Python: values not of the types the scorer passes (exact\n"
"strs, ints, finite floats, dicts, lists and tuples), counts or totals of 2**53 or more, more\n"
"than 256 tools on a side or 64 dimensions, lengths that do not match, a negative `top`, an\n"
"unknown primary driver, a str without UTF-8 (a lone surrogate).");

static PyObject *
drift_explanation(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    named_t run[MAX_EXPLAINED_TOOLS], base[MAX_EXPLAINED_TOOLS];
    named_t appeared[MAX_EXPLAINED_TOOLS], shifted[MAX_EXPLAINED_TOOLS];
    named_t disappeared[MAX_EXPLAINED_TOOLS], dims[MAX_DIMS];
    double composite, threshold, distance = 0.0, typical = 0.0, base_total = 0.0;
    long long runs;
    Py_ssize_t n_run, n_base, n_appeared = 0, n_shifted = 0, n_disappeared = 0, n_dims = 0;
    Py_ssize_t n_moved, top, i, pos = 0;
    PyObject *severity, *confidence, *primary, *run_tools, *base_tools, *z, *means, *values;
    PyObject *sample, *divergences, *name, *z_value, *out;
    int component, overflow, st = ST_OK, has_distance, has_typical;
    char number[32];
    text_t t;

    (void)module;
    if (nargs != 16) {
        PyErr_Format(PyExc_TypeError,
                     "drift_explanation() takes exactly 16 arguments (%zd given)", nargs);
        return NULL;
    }
    severity = args[1];
    confidence = args[2];
    primary = args[4];
    run_tools = args[5];
    base_tools = args[6];
    z = args[8];
    means = args[9];
    values = args[10];
    sample = args[14];
    divergences = args[15];
    has_distance = args[12] != Py_None;
    has_typical = args[13] != Py_None;
    if (!finite_float(args[0], &composite) || !PyUnicode_CheckExact(severity) ||
        !PyUnicode_CheckExact(confidence) || !PyLong_CheckExact(args[3]) ||
        !PyUnicode_CheckExact(primary) || !finite_float(args[7], &threshold) ||
        !PyDict_CheckExact(z) || (!PyList_CheckExact(means) && !PyTuple_CheckExact(means)) ||
        (!PyList_CheckExact(values) && !PyTuple_CheckExact(values)) ||
        !PyLong_CheckExact(args[11]) || (has_distance && !finite_float(args[12], &distance)) ||
        (has_typical && !finite_float(args[13], &typical)) || !PyUnicode_CheckExact(sample) ||
        !PyList_CheckExact(divergences)) {
        Py_RETURN_NONE;
    }
    runs = PyLong_AsLongLongAndOverflow(args[3], &overflow);
    if (overflow || (runs == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    top = PyLong_AsSsize_t(args[11]);
    if (top < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    for (component = 0; component < 3; component++) {
        if (PyUnicode_CompareWithASCIIString(primary, COMPONENT_NAMES[component]) == 0) {
            break;
        }
    }
    if (component == 3) {
        Py_RETURN_NONE;
    }

    /* _explain: the tools */
    n_run = run_tool_shares(run_tools, run);
    if (n_run < 0) {
        Py_RETURN_NONE;
    }
    n_base = base_tool_shares(base_tools, base, &base_total, &st);
    if (n_base < 0) {
        if (st == ST_ERROR) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    for (i = 0; i < n_run; i++) {
        /* base_shares.get(t, 0.0): base_tools' keys are exact strs, so no Python code runs */
        PyObject *raw = n_base > 0 ? PyDict_GetItemWithError(base_tools, run[i].name) : NULL;
        double b = raw != NULL ? PyFloat_AS_DOUBLE(raw) / base_total : 0.0;

        if (raw == NULL && PyErr_Occurred()) {
            return NULL;
        }
        if (b <= 0.0) {
            appeared[n_appeared] = run[i];
            appeared[n_appeared++].key = run[i].share;
        }
        if (raw != NULL && fabs(run[i].share - b) >= threshold) {
            shifted[n_shifted] = run[i];
            shifted[n_shifted].base = b;
            shifted[n_shifted++].key = fabs(run[i].share - b);
        }
    }
    for (i = 0; i < n_base; i++) {
        int in_run = 0;

        if (!(base[i].share >= 0.05)) {
            continue;
        }
        if (n_run > 0) {
            in_run = PyDict_Contains(run_tools, base[i].name);
            if (in_run < 0) {
                return NULL;
            }
        }
        if (!in_run) {
            disappeared[n_disappeared] = base[i];
            disappeared[n_disappeared++].key = base[i].share;
        }
    }
    named_sort(appeared, n_appeared);
    named_sort(disappeared, n_disappeared);
    if (n_disappeared > 5) {
        n_disappeared = 5;
    }
    named_sort(shifted, n_shifted);

    /* _explain: the complexity dimensions, zip(z.items(), means, values, strict=True) */
    n_dims = PyDict_GET_SIZE(z);
    if (n_dims > MAX_DIMS || PySequence_Fast_GET_SIZE(means) != n_dims ||
        PySequence_Fast_GET_SIZE(values) != n_dims) {
        Py_RETURN_NONE;
    }
    for (i = 0; PyDict_Next(z, &pos, &name, &z_value); i++) {
        named_t *d = &dims[i];

        if (!PyUnicode_CheckExact(name) || !finite_float(z_value, &d->z) ||
            !finite_float(PySequence_Fast_GET_ITEM(means, i), &d->mean) ||
            !finite_float(PySequence_Fast_GET_ITEM(values, i), &d->value)) {
            Py_RETURN_NONE;
        }
        d->name = name;
        d->key = fabs(d->z);
    }
    named_sort(dims, n_dims);
    for (n_moved = 0; n_moved < n_dims && n_moved < top && dims[n_moved].key >= 1.0; n_moved++) {
    }
    for (i = 0; i < PyList_GET_SIZE(divergences); i++) {
        PyObject *item = PyList_GET_ITEM(divergences, i);
        double divergence;

        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 4 ||
            !PyUnicode_CheckExact(PyTuple_GET_ITEM(item, 0)) ||
            !PyUnicode_CheckExact(PyTuple_GET_ITEM(item, 1)) ||
            !finite_float(PyTuple_GET_ITEM(item, 2), &divergence)) {
            Py_RETURN_NONE;
        }
    }

    /* DriftScore.explanation_text */
    text_init(&t);
    TEXT_LITERAL(&t, "drift ");
    text_fixed(&t, composite, 2, 0);
    TEXT_LITERAL(&t, " (");
    text_str(&t, severity);
    TEXT_LITERAL(&t, "; baseline of ");
    PyOS_snprintf(number, sizeof number, "%lld", runs);
    text_cstr(&t, number);
    text_cstr(&t, runs != 1 ? " runs" : " run");
    TEXT_LITERAL(&t, ", confidence ");
    text_str(&t, confidence);
    TEXT_LITERAL(&t, "); primary driver: ");
    text_cstr(&t, COMPONENT_LABELS[component]);
    TEXT_LITERAL(&t, ". Tools: ");
    if (n_appeared + n_disappeared + n_shifted == 0) {
        TEXT_LITERAL(&t, "same mix.");
    }
    else {
        int any = 0;

        if (n_appeared > 0) {
            TEXT_LITERAL(&t, "appeared ");
            text_names(&t, appeared, n_appeared);
            any = 1;
        }
        if (n_disappeared > 0) {
            text_cstr(&t, any ? "; disappeared " : "disappeared ");
            text_names(&t, disappeared, n_disappeared);
            any = 1;
        }
        if (n_shifted > 0) {
            text_cstr(&t, any ? "; shifted " : "shifted ");
            for (i = 0; i < n_shifted; i++) {
                if (i > 0) {
                    TEXT_LITERAL(&t, ", ");
                }
                text_str(&t, shifted[i].name);
                TEXT_LITERAL(&t, " ");
                text_percent(&t, shifted[i].base);
                TEXT_LITERAL(&t, "\xe2\x86\x92"); /* → */
                text_percent(&t, shifted[i].share);
            }
        }
        TEXT_LITERAL(&t, ".");
    }
    if (n_moved > 0) {
        TEXT_LITERAL(&t, " Complexity: ");
        for (i = 0; i < n_moved; i++) {
            if (i > 0) {
                TEXT_LITERAL(&t, ", ");
            }
            text_str(&t, dims[i].name);
            TEXT_LITERAL(&t, " ");
            text_num(&t, dims[i].mean);
            TEXT_LITERAL(&t, "\xe2\x86\x92"); /* → */
            text_num(&t, dims[i].value);
            TEXT_LITERAL(&t, " (");
            text_fixed(&t, dims[i].z, 1, Py_DTSF_SIGN);
            TEXT_LITERAL(&t, "\xcf\x83)"); /* σ */
        }
        TEXT_LITERAL(&t, ".");
    }
    else {
        TEXT_LITERAL(&t, " Complexity: within one standard deviation.");
    }
    if (has_distance) {
        TEXT_LITERAL(&t, " Semantic distance ");
        text_fixed(&t, distance, 2, 0);
        if (has_typical) {
            TEXT_LITERAL(&t, ", typical ");
            text_fixed(&t, typical, 2, 0);
        }
        if (PyUnicode_GET_LENGTH(sample) > 0) {
            TEXT_LITERAL(&t, " \xe2\x80\x94 \""); /* — */
            text_str(&t, sample);
            TEXT_LITERAL(&t, "\"");
        }
        TEXT_LITERAL(&t, ".");
    }
    else {
        TEXT_LITERAL(&t, " Semantic: no text to compare.");
    }
    if (PyList_GET_SIZE(divergences) > 0) {
        TEXT_LITERAL(&t, " Diverged most from baseline runs ");
        for (i = 0; i < PyList_GET_SIZE(divergences); i++) {
            PyObject *item = PyList_GET_ITEM(divergences, i);

            if (i > 0) {
                TEXT_LITERAL(&t, ", ");
            }
            text_str(&t, PyTuple_GET_ITEM(item, 0));
            TEXT_LITERAL(&t, "/");
            text_str(&t, PyTuple_GET_ITEM(item, 1));
            TEXT_LITERAL(&t, " (");
            text_fixed(&t, PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(item, 2)), 2, 0);
            TEXT_LITERAL(&t, ")");
        }
        TEXT_LITERAL(&t, ".");
    }
    /* _recommendation */
    TEXT_LITERAL(&t, " ");
    if (PyUnicode_CompareWithASCIIString(severity, "none") == 0) {
        TEXT_LITERAL(&t, "No action needed: the run is consistent with its baseline.");
    }
    else if (PyUnicode_CompareWithASCIIString(severity, "warning") == 0) {
        TEXT_LITERAL(&t, "Minor ");
        text_cstr(&t, COMPONENT_LABELS[component]);
        TEXT_LITERAL(&t, " drift: watch the next runs to see whether it persists. ");
        text_what(&t, component, 0, appeared, n_appeared, dims, n_moved);
        TEXT_LITERAL(&t, ".");
    }
    else if (PyUnicode_CompareWithASCIIString(severity, "alert") == 0) {
        TEXT_LITERAL(&t, "Significant ");
        text_cstr(&t, COMPONENT_LABELS[component]);
        TEXT_LITERAL(&t, " drift: ");
        text_what(&t, component, 1, appeared, n_appeared, dims, n_moved);
        TEXT_LITERAL(&t, ".");
    }
    else {
        TEXT_LITERAL(&t, "Critical ");
        text_cstr(&t, COMPONENT_LABELS[component]);
        TEXT_LITERAL(&t, " drift: the agent behaves unlike its baseline. ");
        text_what(&t, component, 0, appeared, n_appeared, dims, n_moved);
        TEXT_LITERAL(&t, "; pin a known-good baseline to gate releases on it.");
    }
    out = NULL;
    if (t.st == ST_OK) {
        out = PyUnicode_DecodeUTF8(t.buf, (Py_ssize_t)t.len, NULL);
    }
    st = t.st;
    text_free(&t);
    if (st == ST_UNHANDLED) {
        Py_RETURN_NONE;
    }
    return out;
}

/* --- score_run ------------------------------------------------------------------------------ */

PyDoc_STRVAR(score_run_doc,
"score_run($module, run_shares, base_shares, x, run, centroid, text_weight, mean, m2, weight,\n"
"          blocks, dimensions, recent, absolute, relative, cap, weights, run_tools,\n"
"          base_tools, shift_threshold, top, confidence, runs, sample, /)\n"
"--\n"
"\n"
"The drift scorer's score_text of a run against a baseline with runs, in one call\n"
"(tracehound.drift._score.DriftScorer._measure, then the recent runs and the explanation):\n"
"the tool mix of the shares (tool_mixes), the semantic distance of `run` (the run's\n"
"embedding, None without text) to `centroid` when `text_weight` > 0 (embedding_distance),\n"
"the complexity scores of `x` against `mean`, `m2` and `weight` (complexity_scores), the\n"
"composite of the three with `weights`, the primary driver and the severity; then\n"
"recent_divergences over `recent` (none when it is empty) and drift_explanation. Returns\n"
"(tool, semantic, complexity, composite, primary, severity, distance, z, text): `z` the\n"
"dict of the z-score of each of `dimensions`, `text` the explanation's text; the same\n"
"values as those functions give.\n"
"\n"
"None for input one of them leaves to Python, `text_weight` or `weights` not exact floats,\n"
"`dimensions` not a tuple of exact strs as long as `x`, or `recent` not a tuple.");

static PyObject *
score_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *run_shares, *base_shares, *x, *run, *centroid, *dimensions, *recent;
    PyObject *scores = NULL, *distance_obj = NULL, *z_list, *z = NULL, *means = NULL;
    PyObject *answer = NULL, *first = NULL, *typical = NULL, *text = NULL, *out = NULL;
    PyObject *composite_obj = NULL, *call[16];
    double tool, semantic = 0.0, complexity, composite, weights[3], mean[MAX_DIMS];
    double centroid_norms[MAX_BLOCKS], run_norms[MAX_BLOCKS], run_centroid[MAX_BLOCKS];
    block_t blocks[MAX_BLOCKS];
    Py_buffer vc, vr;
    Py_ssize_t n_dims = -1, n_blocks, i, k;
    int primary, severity;

    if (nargs != 23) {
        PyErr_Format(PyExc_TypeError, "score_run() takes exactly 23 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    run_shares = args[0];
    base_shares = args[1];
    x = args[2];
    run = args[3];
    centroid = args[4];
    dimensions = args[10];
    recent = args[11];
    if (!PyFloat_CheckExact(args[5]) || !PyTuple_CheckExact(dimensions) ||
        !PyTuple_CheckExact(recent) || !PyTuple_CheckExact(args[15]) ||
        PyTuple_GET_SIZE(args[15]) != 3 || !get_floats(args[15], 3, weights) ||
        !get_values(args[6], &n_dims, mean)) {
        Py_RETURN_NONE;
    }
    /* _measure */
    if (!tool_mix(run_shares, base_shares, &tool)) {
        Py_RETURN_NONE;
    }
    /* the blocks' norms of the centroid and the run, and their dot products, in one pass: what
     * embedding_distance and recent_divergences compute from the same sums */
    if (!get_vector(centroid, &vc, -1)) {
        Py_RETURN_NONE;
    }
    if (run != Py_None && !get_vector(run, &vr, vc.shape[0])) {
        PyBuffer_Release(&vc);
        Py_RETURN_NONE;
    }
    n_blocks = get_blocks(args[9], vc.shape[0], blocks);
    if (n_blocks >= 0) {
        const double *c = (const double *)vc.buf;

        for (k = 0; k < n_blocks; k++) {
            if (run != Py_None) {
                double rr, cc;

                dot_pair((const double *)vr.buf, c, blocks[k].start, blocks[k].stop, &rr, &cc,
                         &run_centroid[k]);
                run_norms[k] = sqrt(rr);
                centroid_norms[k] = sqrt(cc);
            }
            else {
                centroid_norms[k] = sqrt(dot(c, c, blocks[k].start, blocks[k].stop));
            }
        }
    }
    if (run != Py_None) {
        PyBuffer_Release(&vr);
    }
    PyBuffer_Release(&vc);
    if (n_blocks < 0) {
        Py_RETURN_NONE;
    }
    if (run != Py_None && PyFloat_AS_DOUBLE(args[5]) > 0.0) {
        /* embedding_distance(run, centroid, blocks) */
        double total = 0.0, weight_sum = 0.0;

        for (k = 0; k < n_blocks; k++) {
            double nx = run_norms[k], ny = centroid_norms[k];

            if (nx == 0.0 || ny == 0.0 || blocks[k].weight <= 0.0) {
                continue;
            }
            total += blocks[k].weight * (1.0 - run_centroid[k] / (nx * ny));
            weight_sum += blocks[k].weight;
        }
        if (weight_sum != 0.0) {
            semantic = total / weight_sum;
            if (isnan(semantic) || semantic < 0.0) {
                semantic = 0.0;
            }
            else if (semantic > 1.0) {
                semantic = 1.0;
            }
            distance_obj = PyFloat_FromDouble(semantic);
            if (distance_obj == NULL) {
                return NULL;
            }
        }
    }
    if (distance_obj == NULL) {
        distance_obj = Py_NewRef(Py_None);
    }
    call[0] = x;
    call[1] = args[6];
    call[2] = args[7];
    call[3] = args[8];
    call[4] = args[12];
    call[5] = args[13];
    call[6] = args[14];
    scores = complexity_scores(module, call, 7);
    if (scores == NULL || scores == Py_None) {
        goto done;
    }
    complexity = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(scores, 2));
    z_list = PyTuple_GET_ITEM(scores, 1);
    if (PyTuple_GET_SIZE(dimensions) != n_dims || PyList_GET_SIZE(z_list) != n_dims) {
        goto done; /* zip(..., strict=True) raises */
    }
    composite = weights[0] * tool + weights[1] * semantic + weights[2] * complexity;
    composite = composite > 0.0 ? composite : 0.0; /* max(0.0, composite): NaN gives 0.0 */
    composite = composite < 1.0 ? composite : 1.0;
    /* the largest component, the first of equals */
    primary = 0;
    if (semantic > tool) {
        primary = 1;
    }
    if (complexity > (semantic > tool ? semantic : tool)) {
        primary = 2;
    }
    severity = composite < 0.3 ? 0 : composite < 0.6 ? 1 : composite <= 0.8 ? 2 : 3;
    z = PyDict_New();
    if (z == NULL) {
        goto done;
    }
    for (i = 0; i < n_dims; i++) {
        PyObject *name = PyTuple_GET_ITEM(dimensions, i);

        if (!PyUnicode_CheckExact(name)) {
            goto done;
        }
        if (PyDict_SetItem(z, name, PyList_GET_ITEM(z_list, i)) < 0) {
            goto done;
        }
    }
    means = float_list(mean, n_dims);
    if (means == NULL) {
        goto done;
    }
    /* the recent runs */
    if (PyTuple_GET_SIZE(recent) > 0) {
        call[0] = recent;
        call[1] = x;
        call[2] = PyTuple_GET_ITEM(scores, 0); /* the sigmas */
        call[3] = args[14];
        call[4] = run_shares;
        call[5] = centroid;
        call[6] = run;
        call[7] = args[9];
        call[8] = args[15];
        call[9] = args[19];
        answer = recent_divergences_with(call, 10, centroid_norms,
                                         run != Py_None ? run_norms : NULL);
        if (answer == NULL || answer == Py_None) {
            goto done;
        }
        first = Py_NewRef(PyTuple_GET_ITEM(answer, 0));
        typical = Py_NewRef(PyTuple_GET_ITEM(answer, 1));
    }
    else {
        first = PyList_New(0);
        if (first == NULL) {
            goto done;
        }
        typical = Py_NewRef(Py_None);
    }
    composite_obj = PyFloat_FromDouble(composite);
    if (composite_obj == NULL) {
        goto done;
    }
    call[0] = composite_obj;
    call[1] = names[A_NONE + severity];
    call[2] = args[20];
    call[3] = args[21];
    call[4] = names[A_TOOL_MIX + primary];
    call[5] = args[16];
    call[6] = args[17];
    call[7] = args[18];
    call[8] = z;
    call[9] = means;
    call[10] = x;
    call[11] = args[19];
    call[12] = distance_obj;
    call[13] = typical;
    call[14] = args[22];
    call[15] = first;
    text = drift_explanation(module, call, 16);
    if (text == NULL || text == Py_None) {
        goto done;
    }
    out = Py_BuildValue("(dddOOOOOO)", tool, semantic, complexity, composite_obj,
                        names[A_TOOL_MIX + primary], names[A_NONE + severity], distance_obj, z,
                        text);
done:
    Py_XDECREF(text);
    Py_XDECREF(composite_obj);
    Py_XDECREF(typical);
    Py_XDECREF(first);
    Py_XDECREF(answer);
    Py_XDECREF(means);
    Py_XDECREF(z);
    Py_XDECREF(scores);
    Py_XDECREF(distance_obj);
    if (out == NULL && !PyErr_Occurred()) {
        Py_RETURN_NONE;
    }
    return out;
}

/* --- divide_block ---------------------------------------------------------------------------- */

PyDoc_STRVAR(divide_block_doc,
"divide_block($module, vector, start, stop, divisor, /)\n"
"--\n"
"\n"
"`vector[start:stop] /= divisor` for a writable 1-D C-contiguous float64 buffer (a numpy\n"
"array), 0 <= start <= stop <= len(vector) and a float `divisor`: each element becomes\n"
"x / divisor, as numpy's division makes it (the same bits), without numpy's call. Returns\n"
"True, or None (the vector unchanged) for anything else.");

static PyObject *
divide_block(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t start, stop, i;
    double divisor, *x;

    (void)module;
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "divide_block() takes exactly 4 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    if (!PyLong_CheckExact(args[1]) || !PyLong_CheckExact(args[2]) ||
        !PyFloat_CheckExact(args[3])) {
        Py_RETURN_NONE;
    }
    start = PyLong_AsSsize_t(args[1]);
    stop = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    divisor = PyFloat_AS_DOUBLE(args[3]);
    if (PyObject_GetBuffer(args[0], &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) <
        0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (view.ndim != 1 || view.itemsize != (Py_ssize_t)sizeof(double) || view.format == NULL ||
        strcmp(view.format, "d") != 0 || start < 0 || start > stop || stop > view.shape[0]) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    x = (double *)view.buf;
    for (i = start; i < stop; i++) {
        x[i] = x[i] / divisor;
    }
    PyBuffer_Release(&view);
    Py_RETURN_TRUE;
}

/* --- module ---------------------------------------------------------------------------------- */

static PyMethodDef drift_methods[] = {
    {"round_float16", (PyCFunction)(void (*)(void))round_float16, METH_FASTCALL,
     round_float16_doc},
    {"any_nonzero", any_nonzero, METH_O, any_nonzero_doc},
    {"joined_words", (PyCFunction)(void (*)(void))joined_words, METH_FASTCALL,
     joined_words_doc},
    {"embedding_distance", (PyCFunction)(void (*)(void))embedding_distance, METH_FASTCALL,
     embedding_distance_doc},
    {"ring_distances", (PyCFunction)(void (*)(void))ring_distances, METH_FASTCALL,
     ring_distances_doc},
    {"complexity_scores", (PyCFunction)(void (*)(void))complexity_scores, METH_FASTCALL,
     complexity_scores_doc},
    {"complexity_distances", (PyCFunction)(void (*)(void))complexity_distances, METH_FASTCALL,
     complexity_distances_doc},
    {"tool_mixes", (PyCFunction)(void (*)(void))tool_mixes, METH_FASTCALL, tool_mixes_doc},
    {"recent_divergences", (PyCFunction)(void (*)(void))recent_divergences, METH_FASTCALL,
     recent_divergences_doc},
    {"merge_moments", (PyCFunction)(void (*)(void))merge_moments, METH_FASTCALL,
     merge_moments_doc},
    {"drift_explanation", (PyCFunction)(void (*)(void))drift_explanation, METH_FASTCALL,
     drift_explanation_doc},
    {"score_run", (PyCFunction)(void (*)(void))score_run, METH_FASTCALL, score_run_doc},
    {"divide_block", (PyCFunction)(void (*)(void))divide_block, METH_FASTCALL,
     divide_block_doc},
    {NULL, NULL, 0, NULL},
};

int
tracehound_add_drift(PyObject *module)
{
    int i;

    for (i = 0; i < N_NAMES; i++) {
        if (names[i] == NULL) {
            /* kept for the life of the process, as the interned strings themselves */
            names[i] = PyUnicode_InternFromString(NAME_STRINGS[i]);
            if (names[i] == NULL) {
                return -1;
            }
        }
    }
    if (builtin_sum == NULL) {
        /* kept for the life of the process, as the builtins module */
        PyObject *builtins = PyImport_ImportModule("builtins");

        if (builtins == NULL) {
            return -1;
        }
        builtin_sum = PyObject_GetAttrString(builtins, "sum");
        Py_DECREF(builtins);
        if (builtin_sum == NULL) {
            return -1;
        }
    }
    return PyModule_AddFunctions(module, drift_methods);
}

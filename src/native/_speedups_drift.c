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
 * - merge_moments (Chan's merge of weighted moments), any_nonzero (numpy's any),
 *   joined_words (" ".join(text[:stop].split())) and divide_block (numpy's in-place division
 *   of a block) give exactly what the Python code gives.
 *
 * These are numeric and text kernels only: the drift rules (the components, their caps and
 * weights, the composite, severities, the ranking of the recent runs, explanations) are the
 * Python code's alone (tracehound.drift._score).
 *
 * Over unit vectors and centroid sums the distances' differences are far below 1e-12 (the test
 * suite checks that bound on random inputs, and that severities, labels, primary drivers and
 * explanations do not change), but they are not bit for bit.
 *
 * Input they do not handle (not a 1-D C-contiguous float64 buffer of the right length, blocks
 * that are not (int, int, float) tuples within the vector, non-finite values to round, values
 * that are not exact floats) gets None (NotImplemented from embedding_distance, whose result
 * may be None): the caller then runs the Python code. Only a wrong number of arguments raises.
 * The GIL is held throughout.
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
    {"merge_moments", (PyCFunction)(void (*)(void))merge_moments, METH_FASTCALL,
     merge_moments_doc},
    {"divide_block", (PyCFunction)(void (*)(void))divide_block, METH_FASTCALL,
     divide_block_doc},
    {NULL, NULL, 0, NULL},
};

int
tracehound_add_drift(PyObject *module)
{
    return PyModule_AddFunctions(module, drift_methods);
}

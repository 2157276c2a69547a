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
 * - merge_moments (Chan's merge of weighted moments), any_nonzero (numpy's any) and
 *   joined_words (" ".join(text[:stop].split())) give exactly what the Python code gives.
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
 * without -ffast-math). With GCC or Clang, the four sums are the lanes of two 2-double vectors:
 * the same sums, in half the instructions. */
#if defined(__GNUC__)
typedef double v2d __attribute__((vector_size(16)));

static inline v2d
load2(const double *p)
{
    v2d v;

    memcpy(&v, p, sizeof v); /* unaligned */
    return v;
}
#endif

static double
dot(const double *x, const double *y, Py_ssize_t start, Py_ssize_t stop)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    Py_ssize_t i = start;

#if defined(__GNUC__)
    v2d lo = {0.0, 0.0}, hi = {0.0, 0.0};

    for (; i + 4 <= stop; i += 4) {
        lo += load2(x + i) * load2(y + i);
        hi += load2(x + i + 2) * load2(y + i + 2);
    }
    s0 = lo[0];
    s1 = lo[1];
    s2 = hi[0];
    s3 = hi[1];
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
static void
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
        v2d a_lo = {0.0, 0.0}, a_hi = {0.0, 0.0}, b_lo = {0.0, 0.0}, b_hi = {0.0, 0.0};
        v2d d_lo = {0.0, 0.0}, d_hi = {0.0, 0.0};

        for (; i + 4 <= stop; i += 4) {
            v2d x_lo = load2(x + i), x_hi = load2(x + i + 2);

            a_lo += x_lo * x_lo;
            a_hi += x_hi * x_hi;
            b_lo += x_lo * load2(c + i);
            b_hi += x_hi * load2(c + i + 2);
            d_lo += x_lo * load2(r + i);
            d_hi += x_hi * load2(r + i + 2);
        }
        a0 = a_lo[0], a1 = a_lo[1], a2 = a_hi[0], a3 = a_hi[1];
        b0 = b_lo[0], b1 = b_lo[1], b2 = b_hi[0], b3 = b_hi[1];
        d0 = d_lo[0], d1 = d_lo[1], d2 = d_hi[0], d3 = d_hi[1];
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
        x = (const double *)src.buf;
        y = (double *)dst.buf;
        for (i = 0; i < n; i++) {
            if (!isfinite(x[i])) {
                ok = 0;
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
"weighted `mean` and `m2` (1-D float64 buffers) of total `weight`, with the scorer's\n"
"`absolute` and `relative` floors (buffers) and z cap: (sigmas, z, component). The elementwise\n"
"steps are numpy's, the same bits; the component's sum of squares runs in index order.\n"
"None for anything else (other lengths, more than 64 dimensions, non-float values).");

static PyObject *
complexity_scores(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer vm, vq, va, vr;
    double x[MAX_DIMS], sigma[MAX_DIMS], z[MAX_DIMS];
    const double *mean, *m2, *absolute, *relative;
    double weight, cap, sum = 0.0, component = 0.0;
    Py_ssize_t n, i, n_active = 0;
    int got = 0;
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
    if (!get_vector(args[1], &vm, -1)) {
        Py_RETURN_NONE;
    }
    got = 1;
    n = vm.shape[0];
    if (n > MAX_DIMS || !get_floats(args[0], n, x)) {
        goto unhandled;
    }
    if (!get_vector(args[2], &vq, n)) {
        goto unhandled;
    }
    got = 2;
    if (!get_vector(args[4], &va, n)) {
        goto unhandled;
    }
    got = 3;
    if (!get_vector(args[5], &vr, n)) {
        goto unhandled;
    }
    got = 4;
    mean = (const double *)vm.buf;
    m2 = (const double *)vq.buf;
    absolute = (const double *)va.buf;
    relative = (const double *)vr.buf;
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
    PyBuffer_Release(&vr);
    PyBuffer_Release(&va);
    PyBuffer_Release(&vq);
    PyBuffer_Release(&vm);
    return out;
unhandled:
    if (got >= 4) {
        PyBuffer_Release(&vr);
    }
    if (got >= 3) {
        PyBuffer_Release(&va);
    }
    if (got >= 2) {
        PyBuffer_Release(&vq);
    }
    PyBuffer_Release(&vm);
    Py_RETURN_NONE;
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
enum { A_TRACE_ID, A_RUN_ID, A_COMPLEXITY, A_EMBEDDING, A_SHARES, A_TOOL_SHARES, N_NAMES };
static const char *const NAME_STRINGS[N_NAMES] = {
    "trace_id", "run_id", "complexity", "embedding", "_shares", "tool_shares",
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

static PyObject *
recent_divergences(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *recent, *run_shares, *out = NULL;
    double x[MAX_DIMS], sigma[MAX_DIMS], row[MAX_DIMS];
    double weights[3], centroid_norms[MAX_BLOCKS], run_norms[MAX_BLOCKS];
    double cap, typical_sum = 0.0;
    block_t blocks[MAX_BLOCKS];
    ranked_t ranked[MAX_RECENT];
    PyObject *held[2 * MAX_RECENT];
    Py_ssize_t n, n_dims, n_blocks, n_held = 0, n_typical = 0, top, i, j, k;
    Py_buffer vc, vr;
    const double *c, *r = NULL;
    int has_run, handled = 0;

    (void)module;
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
        centroid_norms[k] = sqrt(dot(c, c, blocks[k].start, blocks[k].stop));
        run_norms[k] = has_run ? sqrt(dot(r, r, blocks[k].start, blocks[k].stop)) : 0.0;
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
        /* the summary's cached shares; the method computes them the first time */
        shares = get_attr(summary, A_SHARES);
        if (shares == Py_None) {
            Py_DECREF(shares);
            shares = PyObject_CallMethodNoArgs(summary, names[A_TOOL_SHARES]);
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
            Py_buffer vx;
            const double *row_embedding;

            if (!get_vector(embedding, &vx, vc.shape[0])) {
                Py_DECREF(embedding);
                goto done;
            }
            row_embedding = (const double *)vx.buf;
            for (k = 0; k < n_blocks; k++) {
                const block_t *block = &blocks[k];
                double x_norm, xc, xr;

                if (block->weight <= 0.0) {
                    continue;
                }
                dot3(row_embedding, c, r, block->start, block->stop, &x_norm, &xc, &xr);
                x_norm = sqrt(x_norm);
                add_block(block->weight, x_norm, centroid_norms[k], xc, &total_c, &weights_c);
                add_block(block->weight, x_norm, run_norms[k], xr, &total_r, &weights_r);
            }
            PyBuffer_Release(&vx);
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
    return PyModule_AddFunctions(module, drift_methods);
}

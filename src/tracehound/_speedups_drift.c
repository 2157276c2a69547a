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
 * without -ffast-math). */
static double
dot(const double *x, const double *y, Py_ssize_t start, Py_ssize_t stop)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    Py_ssize_t i = start;

    for (; i + 4 <= stop; i += 4) {
        s0 += x[i] * y[i];
        s1 += x[i + 1] * y[i + 1];
        s2 += x[i + 2] * y[i + 2];
        s3 += x[i + 3] * y[i + 3];
    }
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
static inline double
round_to_float16(double x)
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

/* --- module ---------------------------------------------------------------------------------- */

static PyMethodDef drift_methods[] = {
    {"round_float16", (PyCFunction)(void (*)(void))round_float16, METH_FASTCALL,
     round_float16_doc},
    {"embedding_distance", (PyCFunction)(void (*)(void))embedding_distance, METH_FASTCALL,
     embedding_distance_doc},
    {"ring_distances", (PyCFunction)(void (*)(void))ring_distances, METH_FASTCALL,
     ring_distances_doc},
    {"complexity_scores", (PyCFunction)(void (*)(void))complexity_scores, METH_FASTCALL,
     complexity_scores_doc},
    {"complexity_distances", (PyCFunction)(void (*)(void))complexity_distances, METH_FASTCALL,
     complexity_distances_doc},
    {"tool_mixes", (PyCFunction)(void (*)(void))tool_mixes, METH_FASTCALL, tool_mixes_doc},
    {NULL, NULL, 0, NULL},
};

int
tracehound_add_drift(PyObject *module)
{
    return PyModule_AddFunctions(module, drift_methods);
}

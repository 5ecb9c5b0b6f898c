/* wb_sim._compiled: compiled kernels of the step (issue 33).
 *
 * stick_solve: the compliant contact's solve when every point in it sticks (a standing robot:
 * almost every step; a walking robot's stance foot). It is the all-sticking branch of
 * CompliantContact.solve (wb_sim/contact/compliant.py) in one call; that Python code stays the
 * reference, and the tests hold this kernel to it (test/core/contact/test_compiled.py).
 * WB_SIM_PLAIN=1 runs the Python code instead (wb_sim/compiled.py).
 *
 * Why hand-written C: the solve is ~25 small numpy and BLAS calls on 24 x 38 matrices, and their
 * call overhead, not their arithmetic, is its cost (docs/performance.md). Neither pinocchio nor
 * scipy has this solve as one call. Plain C over the buffer protocol needs no numpy or
 * pinocchio headers: it compiles in a second wherever Python's headers and a C compiler are
 * (pip install, colcon build).
 *
 * The system, as in the Python code (rows component-major: all t1 rows, all t2 rows, all
 * normal rows, then with torsional friction all twist rows; r = 3 or 4 rows per point):
 *   (J h M^-1 J^T + diag(coef / sqrt(ds))) f = target - J v_free,
 *   target = (target_t u, target_n d, target_t twist),
 *   v_next = v_free + h M^-1 J^T f,   x_next = x + h J_x v_next  (x: u, then the twist).
 * Only the columns of J that some row reaches enter the products (a foot's points move the
 * base and their leg only). The sums run in another order than BLAS's: the results agree with
 * the Python code to rounding (1e-12 relative is the tests' bound), not bit for bit.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

/* sizes this kernel takes; a larger system returns 3 (the caller runs the Python code) */
#define MAX_ROWS 512
#define MAX_NV 512

/* Work arrays, static: the kernel holds the GIL throughout, so calls never overlap. */
static double Mc[MAX_NV * MAX_NV];     /* h M^-1 on the reached columns */
static double Jc[MAX_ROWS * MAX_NV];   /* J on the reached columns */
static double JMc[MAX_ROWS * MAX_NV];  /* Jc Mc */
static double A[MAX_ROWS * MAX_ROWS];  /* the system, then its Cholesky factor (lower) */
static double f[MAX_ROWS];

typedef struct {
    Py_buffer b;
    int held;
} Buf;

static int get(PyObject *o, Buf *x, int ndim, int writable) {
    if (PyObject_GetBuffer(o, &x->b, PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    x->held = 1;
    if (x->b.itemsize != 8 || !x->b.format || strcmp(x->b.format, "d") != 0 || x->b.ndim != ndim) {
        PyErr_Format(PyExc_TypeError, "wb_sim._compiled.stick_solve: %d-d float64 arrays expected", ndim);
        return -1;
    }
    return 0;
}

static void release(Buf *x) {
    if (x->held) PyBuffer_Release(&x->b);
    x->held = 0;
}

#define AT1(B, i) (*(const double *)((const char *)(B).buf + (i) * (B).strides[0]))
#define AT2(B, i, j) (*(const double *)((const char *)(B).buf + (i) * (B).strides[0] + (j) * (B).strides[1]))
#define W1(B, i) (*(double *)((char *)(B).buf + (i) * (B).strides[0]))
#define W2(B, i, j) (*(double *)((char *)(B).buf + (i) * (B).strides[0] + (j) * (B).strides[1]))

/* stick_solve(Minv_upper, J, v_free, u, d, ds, twist, coef_t, coef_n, target_t, target_n, mu2,
 *             h, v_next, F, x_next) -> int
 * The k points in the solve (all of the surfaces', or those that touch or will): Minv_upper
 * (nv, nv): M^-1, its upper triangle read; J (r k, nv) their rows; v_free (nv,); u (2, k); d (k,)
 * their depths (the normal target); ds (k,) > 0 the depths the law's diagonal takes (d, or
 * for a point that the free motion takes below, the depth it would reach); twist (k,) or None
 * (r = 3); outputs, written: v_next (nv,), F (r, k) the forces component-major, x_next
 * (r - 1, k): u' then the twist'.
 * Returns 0: solved, every point pushes and sticks inside its friction cone (and its twist inside
 * its own); 1: the matrix is not numerically positive definite; 2: a point pulls or leaves a
 * cone; 3: a size beyond this kernel's or a diagonal depth ds <= 0. On 1-3 the outputs are
 * unspecified and the caller runs the Python code (which also has the active-set loop). */
static PyObject *stick_solve(PyObject *self, PyObject *args) {
    PyObject *oM, *oJ, *ov, *ou, *od, *ods, *otw, *ovn, *oF, *ox;
    double coef_t, coef_n, target_t, target_n, mu2, h;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOOddddddOOO", &oM, &oJ, &ov, &ou, &od, &ods, &otw, &coef_t,
                          &coef_n, &target_t, &target_n, &mu2, &h, &ovn, &oF, &ox))
        return NULL;
    Buf M = {0}, J = {0}, v = {0}, u = {0}, d = {0}, ds = {0}, tw = {0}, vn = {0}, F = {0}, x = {0};
    PyObject *ret = NULL;
    long status = 0;
    const int torsion = otw != Py_None;
    if (get(oM, &M, 2, 0) || get(oJ, &J, 2, 0) || get(ov, &v, 1, 0) || get(ou, &u, 2, 0)
        || get(od, &d, 1, 0) || get(ods, &ds, 1, 0) || (torsion && get(otw, &tw, 1, 0))
        || get(ovn, &vn, 1, 1)
        || get(oF, &F, 2, 1) || get(ox, &x, 2, 1))
        goto done;
    const Py_ssize_t nv = v.b.shape[0], k = d.b.shape[0], r = torsion ? 4 : 3, m = r * k;
    if (M.b.shape[0] != nv || M.b.shape[1] != nv || J.b.shape[0] != m || J.b.shape[1] != nv
        || u.b.shape[0] != 2 || u.b.shape[1] != k || ds.b.shape[0] != k
        || (torsion && tw.b.shape[0] != k)
        || vn.b.shape[0] != nv || F.b.shape[0] != r || F.b.shape[1] != k || x.b.shape[0] != r - 1
        || x.b.shape[1] != k) {
        PyErr_SetString(PyExc_ValueError, "wb_sim._compiled.stick_solve: inconsistent shapes");
        goto done;
    }
    if (m == 0 || m > MAX_ROWS || nv > MAX_NV) {
        status = 3;
        goto out;
    }
    /* the columns some row of J reaches */
    int U[MAX_NV], nu = 0;
    for (Py_ssize_t j = 0; j < nv; j++) {
        int any = 0;
        for (Py_ssize_t i = 0; i < m && !any; i++) any = AT2(J.b, i, j) != 0.0;
        if (any) U[nu++] = (int)j;
    }
    for (Py_ssize_t i = 0; i < m; i++)
        for (int a = 0; a < nu; a++) Jc[i * nu + a] = AT2(J.b, i, U[a]);
    for (int a = 0; a < nu; a++)
        for (int b = a; b < nu; b++) Mc[a * nu + b] = Mc[b * nu + a] = h * AT2(M.b, U[a], U[b]);
    /* JMc = Jc Mc: the rows of h J M^-1 on the reached columns */
    for (Py_ssize_t i = 0; i < m; i++) {
        double *restrict row = JMc + i * nu;
        const double *restrict ji = Jc + i * nu;
        for (int b = 0; b < nu; b++) row[b] = 0.0;
        for (int a = 0; a < nu; a++) {
            const double s = ji[a];
            if (s == 0.0) continue;
            const double *restrict mr = Mc + a * nu;
            for (int b = 0; b < nu; b++) row[b] += s * mr[b];
        }
    }
    /* A = JMc Jc^T + diag (lower triangle); f = target - J v_free (the right-hand side) */
    for (Py_ssize_t i = 0; i < m; i++) {
        const double *restrict ri = JMc + i * nu;
        for (Py_ssize_t j = 0; j <= i; j++) {
            const double *restrict jj = Jc + j * nu;
            double s = 0.0;
            for (int a = 0; a < nu; a++) s += ri[a] * jj[a];
            A[i * m + j] = s;
        }
        const Py_ssize_t p = i % k, comp = i / k;
        const double dsp = AT1(ds.b, p);
        if (!(dsp > 0.0)) {
            status = 3;
            goto out;
        }
        A[i * m + i] += (comp == 2 ? coef_n : coef_t) / sqrt(dsp);
        const double t = comp < 2 ? AT2(u.b, comp, p) * target_t
                                  : (comp == 2 ? AT1(d.b, p) * target_n : AT1(tw.b, p) * target_t);
        const double *restrict ji = Jc + i * nu;
        double s = 0.0;
        for (int a = 0; a < nu; a++) s += ji[a] * AT1(v.b, U[a]);
        f[i] = t - s;
    }
    /* Cholesky A = L L^T in place, then L L^T f = rhs */
    for (Py_ssize_t j = 0; j < m; j++) {
        double s = A[j * m + j];
        for (Py_ssize_t q = 0; q < j; q++) s -= A[j * m + q] * A[j * m + q];
        if (!(s > 0.0)) {
            status = 1;
            goto out;
        }
        const double ljj = sqrt(s);
        A[j * m + j] = ljj;
        for (Py_ssize_t i = j + 1; i < m; i++) {
            double t = A[i * m + j];
            for (Py_ssize_t q = 0; q < j; q++) t -= A[i * m + q] * A[j * m + q];
            A[i * m + j] = t / ljj;
        }
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        double s = f[i];
        for (Py_ssize_t q = 0; q < i; q++) s -= A[i * m + q] * f[q];
        f[i] = s / A[i * m + i];
    }
    for (Py_ssize_t i = m - 1; i >= 0; i--) {
        double s = f[i];
        for (Py_ssize_t q = i + 1; q < m; q++) s -= A[q * m + i] * f[q];
        f[i] = s / A[i * m + i];
    }
    /* every point pushes and sticks: |f_t|^2 - mu^2 f_n^2 <= 0 (and f_twist^2 - f_n^2 <= 0) */
    for (Py_ssize_t p = 0; p < k; p++) {
        const double t1 = f[p], t2 = f[k + p], fn = f[2 * k + p];
        if (!(fn > 0.0) || t1 * t1 + t2 * t2 + (-mu2) * (fn * fn) > 0.0
            || (torsion && f[3 * k + p] * f[3 * k + p] - fn * fn > 0.0)) {
            status = 2;
            goto out;
        }
    }
    /* v_next = v_free + h M^-1[:, U] (Jc^T f); the forces; x_next = x + h J_x v_next */
    double g[MAX_NV], vnext[MAX_NV];
    for (int a = 0; a < nu; a++) g[a] = 0.0;
    for (Py_ssize_t i = 0; i < m; i++) {
        const double fi = f[i];
        const double *restrict ji = Jc + i * nu;
        for (int a = 0; a < nu; a++) g[a] += fi * ji[a];
        W2(F.b, i / k, i % k) = fi;
    }
    for (Py_ssize_t j = 0; j < nv; j++) {
        double s = 0.0;
        for (int a = 0; a < nu; a++) {
            const Py_ssize_t c = U[a];
            s += (j <= c ? AT2(M.b, j, c) : AT2(M.b, c, j)) * g[a];
        }
        vnext[j] = AT1(v.b, j) + h * s;
        W1(vn.b, j) = vnext[j];
    }
    for (Py_ssize_t i = 0; i < (r - 1) * k; i++) {
        const Py_ssize_t row = i < 2 * k ? i : i + k;  /* the t1, t2 rows, then the twist rows */
        const double *restrict ji = Jc + row * nu;
        double s = 0.0;
        for (int a = 0; a < nu; a++) s += ji[a] * vnext[U[a]];
        const double x0 = i < 2 * k ? AT2(u.b, i / k, i % k) : AT1(tw.b, i % k);
        W2(x.b, i / k, i % k) = s * h + x0;
    }
out:
    ret = PyLong_FromLong(status);
done:
    release(&M); release(&J); release(&v); release(&u); release(&d); release(&ds); release(&tw);
    release(&vn); release(&F); release(&x);
    return ret;
}

static PyMethodDef methods[] = {
    {"stick_solve", stick_solve, METH_VARARGS,
     "The compliant contact's all-sticking solve (see wb_sim/_compiled.c); returns 0 when solved."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "wb_sim._compiled",
                                    "Compiled kernels of wb_sim's step (wb_sim/compiled.py).", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__compiled(void) { return PyModule_Create(&module); }

/* wb_sim._compiled: compiled kernels of the step and of the ROS node's message path (issues 24
 * and 33). Each replaces a Python code path that stays its reference (WB_SIM_PLAIN=1 runs it):
 *   stick_solve                  the all-sticking contact solve (contact/compliant.py), below;
 *   points_plane(_bind)          ContactPoints.update against the plane (contact/points.py);
 *   collision_plane_*            the plane's broad and narrow phases of whole-body collision
 *                                (CollisionPoints.any_near, .narrow_plain,
 *                                contact/ground_collision.py);
 *   limits_*                     the joint limits' impulses (Actuation.limit_violations and
 *                                .limit_impulses, actuation.py);
 *   rotate_inverse_into          a free root's velocity into its axes (Simulator._public_velocity,
 *                                simulator.py; its reference robot.rotate_inverse);
 *   cdr_joint_state,             where the fields of a serialized JointState / Odometry lie
 *   cdr_odometry_pose            (the Python readers of ros/conversions.py).
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
static double A[MAX_ROWS * (MAX_ROWS + 4)];  /* the system, then its Cholesky factor (lower, by columns) */
static double JMt[MAX_NV * (MAX_ROWS + 4)];  /* JMc transposed, its columns padded to 4 */
static double xg[MAX_ROWS];              /* a row's multipliers, gathered */
static double Lr[MAX_ROWS * (MAX_ROWS + 4)];  /* the Cholesky factor again, by rows */
static double Ms[MAX_NV * (MAX_NV + 4)];      /* M^-1's reached columns, symmetric, by rows */
static int nz[MAX_ROWS * MAX_NV];      /* per row of Jc, its nonzero columns (in Jc) */
static int nnz[MAX_ROWS];              /* ... and how many */
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
        PyErr_Format(PyExc_TypeError, "wb_sim._compiled: %d-d float64 arrays expected", ndim);
        return -1;
    }
    return 0;
}

static void release(Buf *x) {
    if (x->held) PyBuffer_Release(&x->b);
    x->held = 0;
}

/* Dot products in four interleaved sums: a single running sum waits on each addition's latency
 * (4 cycles), which made the solve's products latency-bound. The order of the sums differs
 * from a plain loop's (and BLAS's): equal to rounding. */
static inline double dot4(const double *restrict a, const double *restrict b, Py_ssize_t n) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    Py_ssize_t q = 0;
    for (; q + 4 <= n; q += 4) {
        s0 += a[q] * b[q];
        s1 += a[q + 1] * b[q + 1];
        s2 += a[q + 2] * b[q + 2];
        s3 += a[q + 3] * b[q + 3];
    }
    for (; q < n; q++) s0 += a[q] * b[q];
    return (s0 + s1) + (s2 + s3);
}

/* Four lanes of doubles, for the sums below that run four rows at a time: each lane is one
 * entry's sums, in the order of its scalar loop (elementwise multiplies and adds, which vector
 * instructions round as scalar ones do: no fused multiply-add is enabled, so the lanes are bit
 * for bit the scalar code's on every machine). GCC's and Clang's vector extension; elsewhere
 * a plain array. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi" /* the helpers are inlined: no ABI crosses a call */
#endif
#if defined(__GNUC__) || defined(__clang__)
typedef double v4d __attribute__((vector_size(32)));
static inline v4d v4_load(const double *p) { v4d r; memcpy(&r, p, sizeof r); return r; }
static inline v4d v4_splat(double x) { return (v4d){x, x, x, x}; }
#define V4_MULADD(acc, c, x) ((acc) += v4_load(c) * (x))
#define V4_LANE(a, l) ((a)[l])
#else
typedef struct { double l[4]; } v4d;
static inline v4d v4_splat(double x) { v4d r = {{x, x, x, x}}; return r; }
#define V4_MULADD(acc, c, x) do { for (int l_ = 0; l_ < 4; l_++) (acc).l[l_] += (c)[l_] * (x).l[l_]; } while (0)
#define V4_LANE(a, l) ((a).l[l])
#endif

#if defined(__GNUC__) || defined(__clang__)
#define WB_SIM_INLINE static inline __attribute__((always_inline))
#else
#define WB_SIM_INLINE static inline
#endif

/* Sums of nb (1 or 2) blocks of four rows, the rows of a column-major matrix c (columns mp
 * apart): sum[4 b + l] = sum over t < cnt of c[col[t] * mp + 4 b + l] * x[t] (col NULL: the
 * columns 0, 1, 2, ...), each in dot4's order (four interleaved sums by t mod 4, the tail into
 * the first, then (s0 + s1) + (s2 + s3)).
 * Two blocks share each x[t] and keep eight sums in flight: a single block's four waited on
 * their additions' latency. */
WB_SIM_INLINE void lane_sums(const double *restrict c, Py_ssize_t mp, const int *restrict col,
                             const double *restrict x, int cnt, double *restrict sum, const int nb) {
    v4d s[2][4];
    for (int b = 0; b < nb; b++)
        for (int r = 0; r < 4; r++) s[b][r] = v4_splat(0.0);
    int t = 0;
    for (; t + 4 <= cnt; t += 4)
        for (int r = 0; r < 4; r++) {
            const double *restrict ct = c + (col ? col[t + r] : t + r) * mp;
            const v4d xt = v4_splat(x[t + r]);
            for (int b = 0; b < nb; b++) V4_MULADD(s[b][r], ct + 4 * b, xt);
        }
    for (; t < cnt; t++) {
        const double *restrict ct = c + (col ? col[t] : t) * mp;
        const v4d xt = v4_splat(x[t]);
        for (int b = 0; b < nb; b++) V4_MULADD(s[b][0], ct + 4 * b, xt);
    }
    for (int b = 0; b < nb; b++)
        for (int l = 0; l < 4; l++)
            sum[4 * b + l] = (V4_LANE(s[b][0], l) + V4_LANE(s[b][1], l))
                             + (V4_LANE(s[b][2], l) + V4_LANE(s[b][3], l));
}

/* Where the loader picks a function's version by the CPU (GCC or Clang on x86-64 Linux with
 * glibc: ifunc; musl has none), the solve below is built twice, for AVX2 and for the baseline:
 * AVX2's wider lanes, the same arithmetic (AVX2 without FMA), the same results bit for bit. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && \
    (defined(__GNUC__) || defined(__clang__))
#define WB_SIM_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define WB_SIM_CLONES
#endif

#define AT1(B, i) (*(const double *)((const char *)(B).buf + (i) * (B).strides[0]))
#define AT2(B, i, j) (*(const double *)((const char *)(B).buf + (i) * (B).strides[0] + (j) * (B).strides[1]))
#define W1(B, i) (*(double *)((char *)(B).buf + (i) * (B).strides[0]))
#define W2(B, i, j) (*(double *)((char *)(B).buf + (i) * (B).strides[0] + (j) * (B).strides[1]))

/* The all-sticking solve's inputs and outputs beside the work arrays: row i of J starts at
 * jrow[i], its entries jstride bytes apart; per point p < k: uk0/uk1 (u), dk (d), dsk (ds), twk
 * (the twist); out: f (the forces, rows component-major), vnext (nv,), xk ((r - 1) k: u' then
 * the twist'). */
static const char *jrow[MAX_ROWS];
static double uk0[MAX_ROWS], uk1[MAX_ROWS], dk[MAX_ROWS], dsk[MAX_ROWS], twk[MAX_ROWS];
static double vnext[MAX_NV], xk[MAX_ROWS];

#define JAT(i, j) (*(const double *)(jrow[i] + (j) * jstride))

/* The solve of stick_solve below over the rows jrow (m = r k <= MAX_ROWS, nv <= MAX_NV):
 * returns its codes 0-3, and on 0 f, vnext and xk hold the solution. */
WB_SIM_CLONES static long stick_core(const Py_buffer *M, const Py_buffer *v, Py_ssize_t nv, Py_ssize_t k,
                       int torsion, Py_ssize_t jstride, double coef_t, double coef_n,
                       double target_t, double target_n, double mu2, double h) {
    const Py_ssize_t r = torsion ? 4 : 3, m = r * k;
    /* the columns some row of J reaches */
    int U[MAX_NV], nu = 0;
    for (Py_ssize_t j = 0; j < nv; j++) {
        int any = 0;
        for (Py_ssize_t i = 0; i < m && !any; i++) any = JAT(i, j) != 0.0;
        if (any) U[nu++] = (int)j;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        int c = 0;
        for (int a = 0; a < nu; a++) {
            const double x = JAT(i, U[a]);
            Jc[i * nu + a] = x;
            if (x != 0.0) nz[i * nu + c++] = a;
        }
        nnz[i] = c;
    }
    for (int a = 0; a < nu; a++)
        for (int b = a; b < nu; b++) Mc[a * nu + b] = Mc[b * nu + a] = h * AT2(*M, U[a], U[b]);
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
    /* A = JMc Jc^T + diag (lower triangle), stored by columns: entry (i, j), i >= j, at
     * A[j * mp + i], mp = m rounded up to a multiple of 4. Column j is the products of JMc's
     * rows i >= j with Jc's row j over its nonzeros (a point's rows reach its own chain only),
     * formed four rows i at a time from JMc's transpose (JMt, its column i contiguous): each
     * entry is dot4's sums of JMc_i and Jc_j over Jc_j's nonzeros, in their order (lane_sums). */
    const Py_ssize_t mp = (m + 3) & ~(Py_ssize_t)3;
    for (Py_ssize_t p = 0; p < k; p++)
        if (!(dsk[p] > 0.0)) return 3;
    for (int a = 0; a < nu; a++) {
        double *restrict col = JMt + a * mp;
        for (Py_ssize_t i = 0; i < m; i++) col[i] = JMc[i * nu + a];
        for (Py_ssize_t i = m; i < mp; i++) col[i] = 0.0;
    }
    for (Py_ssize_t j = 0; j < m; j++) {
        const int *restrict idx = nz + j * nu;
        const int cnt = nnz[j];
        const double *restrict xj = Jc + j * nu;
        double *restrict out = A + j * mp;
        for (int t = 0; t < cnt; t++) xg[t] = xj[idx[t]];
        for (Py_ssize_t i0 = j & ~(Py_ssize_t)3; i0 < mp; i0 += 8) {
            double sum[8];
            if (i0 + 4 < mp) {
                lane_sums(JMt + i0, mp, idx, xg, cnt, sum, 2);
                for (int l = 0; l < 8; l++) out[i0 + l] = sum[l];
            } else {
                lane_sums(JMt + i0, mp, idx, xg, cnt, sum, 1);
                for (int l = 0; l < 4; l++) out[i0 + l] = sum[l];
            }
        }
    }
    /* the diagonal's compliance; f = target - J v_free (the right-hand side) */
    for (Py_ssize_t i = 0; i < m; i++) {
        const Py_ssize_t p = i % k, comp = i / k;
        A[i * mp + i] += (comp == 2 ? coef_n : coef_t) / sqrt(dsk[p]);
        const double t = comp < 2 ? (comp == 0 ? uk0[p] : uk1[p]) * target_t
                                  : (comp == 2 ? dk[p] * target_n : twk[p] * target_t);
        const double *restrict ji = Jc + i * nu;
        double s = 0.0;
        for (int a = 0; a < nu; a++) s += ji[a] * AT1(*v, U[a]);
        f[i] = t - s;
    }
    /* Cholesky A = L L^T in place (L by columns, as A, and by rows in Lr), column after
     * column; entry (i, j) subtracts dot4 of rows i and j of L over their first j entries,
     * formed four rows i at a time as above; then L L^T f = rhs, each substitution's sums in
     * dot4's four interleaved sums (the backward one's ran in one, waiting on each addition) */
    for (Py_ssize_t j = 0; j < m; j++) {
        const double *restrict lj = Lr + j * mp;  /* row j of L, its first j entries */
        const double s = A[j * mp + j] - dot4(lj, lj, j);
        if (!(s > 0.0)) return 1;
        const double ljj = sqrt(s);
        A[j * mp + j] = Lr[j * mp + j] = ljj;
        double *restrict out = A + j * mp;
        for (Py_ssize_t i0 = (j + 1) & ~(Py_ssize_t)3; i0 < mp; i0 += 8) {
            double sum[8];
            const int nb = i0 + 4 < mp ? 2 : 1;
            if (nb == 2)
                lane_sums(A + i0, mp, NULL, lj, (int)j, sum, 2);
            else
                lane_sums(A + i0, mp, NULL, lj, (int)j, sum, 1);
            for (int l = 0; l < 4 * nb; l++) {
                const Py_ssize_t i = i0 + l;
                if (i > j && i < m) Lr[i * mp + j] = out[i] = (out[i] - sum[l]) / ljj;
            }
        }
    }
    for (Py_ssize_t i = 0; i < m; i++)
        f[i] = (f[i] - dot4(Lr + i * mp, f, i)) / Lr[i * mp + i];
    for (Py_ssize_t i = m - 1; i >= 0; i--)  /* (column i of L below the diagonal) */
        f[i] = (f[i] - dot4(A + i * mp + i + 1, f + i + 1, m - 1 - i)) / A[i * mp + i];
    /* every point pushes and sticks: |f_t|^2 - mu^2 f_n^2 <= 0 (and f_twist^2 - f_n^2 <= 0) */
    for (Py_ssize_t p = 0; p < k; p++) {
        const double t1 = f[p], t2 = f[k + p], fn = f[2 * k + p];
        if (!(fn > 0.0) || t1 * t1 + t2 * t2 + (-mu2) * (fn * fn) > 0.0
            || (torsion && f[3 * k + p] * f[3 * k + p] - fn * fn > 0.0))
            return 2;
    }
    /* v_next = v_free + h M^-1[:, U] (Jc^T f); x_next = x + h J_x v_next */
    double g[MAX_NV];
    for (int a = 0; a < nu; a++) g[a] = 0.0;
    for (Py_ssize_t i = 0; i < m; i++) {
        const double fi = f[i];
        const double *restrict ji = Jc + i * nu;
        for (int a = 0; a < nu; a++) g[a] += fi * ji[a];
    }
    /* M^-1 g: column U[a] of the symmetric M^-1 (its upper triangle read) into Ms's row a,
     * then four entries j at a time, each the sum over a in order (as a scalar loop's) */
    const Py_ssize_t nvp = (nv + 3) & ~(Py_ssize_t)3;
    for (int a = 0; a < nu; a++) {
        const Py_ssize_t c = U[a];
        double *restrict ms = Ms + a * nvp;
        for (Py_ssize_t j = 0; j < nv; j++) ms[j] = j <= c ? AT2(*M, j, c) : AT2(*M, c, j);
        for (Py_ssize_t j = nv; j < nvp; j++) ms[j] = 0.0;
    }
    for (Py_ssize_t j0 = 0; j0 < nvp; j0 += 4) {
        v4d s4 = v4_splat(0.0);
        for (int a = 0; a < nu; a++) V4_MULADD(s4, Ms + a * nvp + j0, v4_splat(g[a]));
        for (int l = 0; l < 4 && j0 + l < nv; l++)
            vnext[j0 + l] = AT1(*v, j0 + l) + h * V4_LANE(s4, l);
    }
    for (Py_ssize_t i = 0; i < (r - 1) * k; i++) {
        const Py_ssize_t row = i < 2 * k ? i : i + k;  /* the t1, t2 rows, then the twist rows */
        const double *restrict ji = Jc + row * nu;
        double s = 0.0;
        for (int a = 0; a < nu; a++) s += ji[a] * vnext[U[a]];
        const double x0 = i < 2 * k ? (i < k ? uk0[i] : uk1[i - k]) : twk[i % k];
        xk[i] = s * h + x0;
    }
    return 0;
}

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
    for (Py_ssize_t i = 0; i < m; i++) jrow[i] = (const char *)J.b.buf + i * J.b.strides[0];
    for (Py_ssize_t p = 0; p < k; p++) {
        uk0[p] = AT2(u.b, 0, p);
        uk1[p] = AT2(u.b, 1, p);
        dk[p] = AT1(d.b, p);
        dsk[p] = AT1(ds.b, p);
        twk[p] = torsion ? AT1(tw.b, p) : 0.0;
    }
    status = stick_core(&M.b, &v.b, nv, k, torsion, J.b.strides[1], coef_t, coef_n, target_t,
                        target_n, mu2, h);
    if (status == 0) {
        for (Py_ssize_t i = 0; i < m; i++) W2(F.b, i / k, i % k) = f[i];
        for (Py_ssize_t j = 0; j < nv; j++) W1(vn.b, j) = vnext[j];
        for (Py_ssize_t i = 0; i < (r - 1) * k; i++) W2(x.b, i / k, i % k) = xk[i];
    }
out:
    ret = PyLong_FromLong(status);
done:
    release(&M); release(&J); release(&v); release(&u); release(&d); release(&ds); release(&tw);
    release(&vn); release(&F); release(&x);
    return ret;
}

static int is_int64(const Py_buffer *b) {
    return b->itemsize == 8 && b->ndim == 1 && b->format &&
           (!strcmp(b->format, "l") || !strcmp(b->format, "q"));
}

/* stick_solve_candidates(Minv_upper, rows, v_free, d, w_n, u, cand, coef_t, coef_n, target_t,
 *                        target_n, mu2, h, max_rows, v_next, F, sel, ds, force, x, status)
 *     -> (code, k, max_depth)
 * CompliantContact.solve over a point set's candidates (MergedPoints.candidates: the points
 * with Jacobian rows) without torsion, from the selection to the scattered results: the
 * selection of the points in the solve and their diagonal depths (the Python code's lines,
 * the same operations: exact), then stick_solve's solve on those rows, then the results
 * written at the selected points. Its reference is that Python code (contact/compliant.py).
 * rows (3, c, nv): the candidates' rows component-major; d (n,) every point's depth; w_n (c,)
 * the candidates' normal velocities J_n v_free; u (2, n) every point's deformation; cand (c,)
 * int64 each candidate's point. Written always: sel (>= c,) int64, the k selected candidates
 * first; ds (>= c,), their diagonal depths first. Written when solved (code 0): v_next (nv,);
 * F (>= 3 c,), the forces of the k points in its first 3 k entries (rows component-major,
 * stick_solve's F); force (n, 3), x (2, n) (u') and status (n,) int8, zero but at the
 * selected points.
 * code: 0-3 as stick_solve's (3 also: more than max_rows rows); 4: no point selected.
 * max_depth: the candidates' largest depth (-inf for none), as Python's max over them. */
static PyObject *stick_solve_candidates(PyObject *self, PyObject *args) {
    PyObject *oM, *oR, *ov, *odd, *ow, *ou, *oc, *ovn, *oF, *osel, *ods, *ofo, *ox, *ost;
    double coef_t, coef_n, target_t, target_n, mu2, h;
    Py_ssize_t max_rows;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOOddddddnOOOOOOO", &oM, &oR, &ov, &odd, &ow, &ou, &oc,
                          &coef_t, &coef_n, &target_t, &target_n, &mu2, &h, &max_rows, &ovn,
                          &oF, &osel, &ods, &ofo, &ox, &ost))
        return NULL;
    Buf M = {0}, R = {0}, v = {0}, dd = {0}, w = {0}, u = {0}, c = {0}, vn = {0}, F = {0},
        sel = {0}, ds = {0}, fo = {0}, x = {0}, st = {0};
    PyObject *ret = NULL;
    long status = 0;
    Py_ssize_t k = 0;
    double max_depth = -INFINITY;
    if (get(oM, &M, 2, 0) || get(oR, &R, 3, 0) || get(ov, &v, 1, 0) || get(odd, &dd, 1, 0)
        || get(ow, &w, 1, 0) || get(ou, &u, 2, 0) || get(ovn, &vn, 1, 1) || get(oF, &F, 1, 1)
        || get(ods, &ds, 1, 1) || get(ofo, &fo, 2, 1) || get(ox, &x, 2, 1))
        goto done;
    if (PyObject_GetBuffer(oc, &c.b, PyBUF_STRIDES | PyBUF_FORMAT) < 0) goto done;
    c.held = 1;
    if (PyObject_GetBuffer(osel, &sel.b, PyBUF_STRIDES | PyBUF_FORMAT | PyBUF_WRITABLE) < 0)
        goto done;
    sel.held = 1;
    if (PyObject_GetBuffer(ost, &st.b, PyBUF_STRIDES | PyBUF_FORMAT | PyBUF_WRITABLE) < 0)
        goto done;
    st.held = 1;
    if (!is_int64(&c.b) || !is_int64(&sel.b) || st.b.ndim != 1 || st.b.itemsize != 1
        || !st.b.format || strcmp(st.b.format, "b") != 0) {
        PyErr_SetString(PyExc_TypeError, "wb_sim._compiled.stick_solve_candidates: cand and sel "
                                         "1-d int64, status 1-d int8");
        goto done;
    }
    const Py_ssize_t nv = v.b.shape[0], nc = c.b.shape[0], n = u.b.shape[1];
    if (M.b.shape[0] != nv || M.b.shape[1] != nv || R.b.shape[0] != 3 || R.b.shape[1] != nc
        || R.b.shape[2] != nv || w.b.shape[0] != nc || u.b.shape[0] != 2 || dd.b.shape[0] != n
        || vn.b.shape[0] != nv || F.b.shape[0] < 3 * nc || sel.b.shape[0] < nc
        || ds.b.shape[0] < nc || fo.b.shape[0] != n || fo.b.shape[1] != 3 || x.b.shape[0] != 2
        || x.b.shape[1] != n || st.b.shape[0] != n) {
        PyErr_SetString(PyExc_ValueError,
                        "wb_sim._compiled.stick_solve_candidates: inconsistent shapes");
        goto done;
    }
#define I64(B, i) (*(long long *)((char *)(B).buf + (i) * (B).strides[0]))
    for (Py_ssize_t p = 0; p < nc; p++) {
        const long long q = I64(c.b, p);
        if (q < 0 || q >= n) {
            PyErr_SetString(PyExc_IndexError,
                            "wb_sim._compiled.stick_solve_candidates: a candidate beyond u");
            goto done;
        }
    }
    /* the selection: d_free = d - h w_n; in the solve: d > 0 or d_free > 0, at ds = d where
     * d > 0, else d_free; Python's max over the depths keeps the first of equals, and a later
     * value only where it is larger */
    for (Py_ssize_t p = 0; p < nc; p++) {
        const double d = AT1(dd.b, I64(c.b, p));
        if (p == 0 || d > max_depth) max_depth = d;
        const double d_free = d - h * AT1(w.b, p);
        if (d > 0.0 || d_free > 0.0) {
            I64(sel.b, k) = p;
            W1(ds.b, k) = d > 0.0 ? d : d_free;
            k++;
        }
    }
    if (k == 0) {
        status = 4;
        goto out;
    }
    if (3 * k > max_rows || 3 * k > MAX_ROWS || nv > MAX_NV) {
        status = 3;
        goto out;
    }
    for (Py_ssize_t p = 0; p < k; p++) {
        const Py_ssize_t s = (Py_ssize_t)I64(sel.b, p);
        const Py_ssize_t q = (Py_ssize_t)I64(c.b, s);
        for (int comp = 0; comp < 3; comp++)
            jrow[comp * k + p] = (const char *)R.b.buf + comp * R.b.strides[0] + s * R.b.strides[1];
        uk0[p] = AT2(u.b, 0, q);
        uk1[p] = AT2(u.b, 1, q);
        dk[p] = AT1(dd.b, q);
        dsk[p] = AT1(ds.b, p);
        twk[p] = 0.0;
    }
    status = stick_core(&M.b, &v.b, nv, k, 0, R.b.strides[2], coef_t, coef_n, target_t, target_n,
                        mu2, h);
    if (status == 0) {
        for (Py_ssize_t j = 0; j < nv; j++) W1(vn.b, j) = vnext[j];
        for (Py_ssize_t q = 0; q < n; q++) {  /* the others: no force, deformation or contact */
            for (int comp = 0; comp < 3; comp++) W2(fo.b, q, comp) = 0.0;
            W2(x.b, 0, q) = W2(x.b, 1, q) = 0.0;
            *((signed char *)st.b.buf + q * st.b.strides[0]) = 0;
        }
        for (Py_ssize_t p = 0; p < k; p++) {
            const Py_ssize_t q = (Py_ssize_t)I64(c.b, I64(sel.b, p));
            for (int comp = 0; comp < 3; comp++) {
                W1(F.b, comp * k + p) = f[comp * k + p];
                W2(fo.b, q, comp) = f[comp * k + p];
            }
            W2(x.b, 0, q) = xk[p];
            W2(x.b, 1, q) = xk[k + p];
            *((signed char *)st.b.buf + q * st.b.strides[0]) = 1;
        }
    }
#undef I64
out:
    ret = Py_BuildValue("(lnd)", status, k, max_depth);
done:
    release(&M); release(&R); release(&v); release(&dd); release(&w); release(&u); release(&c);
    release(&vn); release(&F); release(&sel); release(&ds); release(&fo); release(&x);
    release(&st);
    return ret;
}

/* ------------------------------------------------------------------------------------------
 * points_plane_bind(rows, joint_ids, slot, r_local, sphere, basis, origin, plane_z, rotated,
 *                   support, HT, position_T, position_gT, Jp) -> plan
 * points_plane(plan, J, depth) -> None
 * ContactPoints.update against a plane (wb_sim/contact/points.py, its reference): the contact
 * points' world positions, their ground coordinates and depths, and their Jacobian rows in
 * ground coordinates, from the joint placements and the joint Jacobians of the step's data.
 * The bind checks the arrays once and holds them (a capsule: their buffers stay exported, so
 * numpy cannot resize them); each step then passes only J and depth.
 * rows (njoints, 12): each joint's placement, the columns of [R | t] (wb_sim/pin_views.py);
 * joint_ids (J,) int64: the points' parent joints; slot (n,) int64: each point's index into
 * joint_ids; r_local (n, 3): each point in its joint's frame; sphere (n, 3) or None: the offset
 * from a sphere's centre to its lowest point; basis (3, 3): the ground's axes (t1, t2, n as
 * columns); origin (3,); plane_z: the plane's height in ground coordinates; rotated: the
 * ground coordinates are basis^T (x - origin), else the world's (position_gT is position_T);
 * support (3 n, nv): 1 where a velocity moves the point; J (6, nv): data.J, each joint's motion
 * in the world frame (linear at the world origin, then angular). Written: HT (3, 4 J),
 * position_T, position_gT (3, n), Jp (3 n, nv) rows component-major (all t1 rows, all t2, all
 * n), depth (n,) > 0 below the ground. Row (c, i) of Jp: b_c . v + (p_i x b_c) . omega, b_c
 * the basis' column c. The sums run in another order than numpy's: equal to rounding.
 */
enum { P_ROWS, P_IDS, P_SLOT, P_R, P_SPH, P_B, P_O, P_SUP, P_HT, P_P, P_PG, P_JP, P_COUNT };

typedef struct {
    Buf b[P_COUNT];
    double plane_z;
    int rotated;
    Py_ssize_t n, nj, nv;
} PointsPlan;

static void plan_free(PyObject *capsule) {
    PointsPlan *pl = (PointsPlan *)PyCapsule_GetPointer(capsule, "wb_sim.points_plan");
    if (!pl) return;
    for (int k = 0; k < P_COUNT; k++) release(&pl->b[k]);
    PyMem_Free(pl);
}

static PyObject *points_plane_bind(PyObject *self, PyObject *args) {
    PyObject *o[P_COUNT];
    double plane_z;
    int rotated;
    if (!PyArg_ParseTuple(args, "OOOOOOOdpOOOOO", &o[P_ROWS], &o[P_IDS], &o[P_SLOT], &o[P_R],
                          &o[P_SPH], &o[P_B], &o[P_O], &plane_z, &rotated, &o[P_SUP], &o[P_HT],
                          &o[P_P], &o[P_PG], &o[P_JP]))
        return NULL;
    PointsPlan *pl = PyMem_Calloc(1, sizeof(PointsPlan));
    if (!pl) return PyErr_NoMemory();
    static const int ndim[P_COUNT] = {2, 1, 1, 2, 2, 2, 1, 2, 2, 2, 2, 2};
    static const int writable[P_COUNT] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
    Buf *b = pl->b;
    for (int k = 0; k < P_COUNT; k++) {
        if (k == P_SPH && o[k] == Py_None) continue;
        if (k == P_IDS || k == P_SLOT) {
            if (PyObject_GetBuffer(o[k], &b[k].b, PyBUF_STRIDES | PyBUF_FORMAT) < 0) goto fail;
            b[k].held = 1;
            if (!is_int64(&b[k].b)) {
                PyErr_SetString(PyExc_TypeError,
                                "wb_sim._compiled.points_plane_bind: joint_ids and slot: 1-d int64");
                goto fail;
            }
        } else if (get(o[k], &b[k], ndim[k], writable[k])) {
            goto fail;
        }
    }
    Py_ssize_t nj = b[P_IDS].b.shape[0], n = b[P_R].b.shape[0], nv = b[P_SUP].b.shape[1],
               njoints = b[P_ROWS].b.shape[0];
    if (b[P_ROWS].b.shape[1] != 12 || b[P_R].b.shape[1] != 3 || b[P_SLOT].b.shape[0] != n ||
        b[P_B].b.shape[0] != 3 || b[P_B].b.shape[1] != 3 || b[P_O].b.shape[0] != 3 ||
        b[P_SUP].b.shape[0] != 3 * n || b[P_HT].b.shape[0] != 3 || b[P_HT].b.shape[1] != 4 * nj ||
        b[P_P].b.shape[0] != 3 || b[P_P].b.shape[1] != n || b[P_PG].b.shape[0] != 3 ||
        b[P_PG].b.shape[1] != n || b[P_JP].b.shape[0] != 3 * n || b[P_JP].b.shape[1] != nv ||
        (b[P_SPH].held && (b[P_SPH].b.shape[0] != n || b[P_SPH].b.shape[1] != 3))) {
        PyErr_SetString(PyExc_ValueError, "wb_sim._compiled.points_plane_bind: inconsistent shapes");
        goto fail;
    }
    for (Py_ssize_t k = 0; k < nj; k++) {
        long long j = *(const long long *)((const char *)b[P_IDS].b.buf + k * b[P_IDS].b.strides[0]);
        if (j < 0 || j >= njoints) {
            PyErr_SetString(PyExc_ValueError, "wb_sim._compiled.points_plane_bind: joint id out of range");
            goto fail;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long k = *(const long long *)((const char *)b[P_SLOT].b.buf + i * b[P_SLOT].b.strides[0]);
        if (k < 0 || k >= nj) {
            PyErr_SetString(PyExc_ValueError, "wb_sim._compiled.points_plane_bind: slot out of range");
            goto fail;
        }
    }
    pl->plane_z = plane_z;
    pl->rotated = rotated;
    pl->n = n;
    pl->nj = nj;
    pl->nv = nv;
    PyObject *capsule = PyCapsule_New(pl, "wb_sim.points_plan", plan_free);
    if (capsule) return capsule;
fail:
    for (int k = 0; k < P_COUNT; k++) release(&b[k]);
    PyMem_Free(pl);
    return NULL;
}

static PyObject *points_plane(PyObject *self, PyObject *args) {
    PyObject *oplan, *oJ, *od;
    if (!PyArg_ParseTuple(args, "OOO", &oplan, &oJ, &od)) return NULL;
    PointsPlan *pl = (PointsPlan *)PyCapsule_GetPointer(oplan, "wb_sim.points_plan");
    if (!pl) return NULL;
    Buf J = {0}, d = {0};
    PyObject *ret = NULL;
    if (get(oJ, &J, 2, 0) || get(od, &d, 1, 1)) goto done;
    const Py_ssize_t n = pl->n, nj = pl->nj, nv = pl->nv;
    if (J.b.shape[0] != 6 || J.b.shape[1] != nv || d.b.shape[0] != n) {
        PyErr_SetString(PyExc_ValueError, "wb_sim._compiled.points_plane: inconsistent shapes");
        goto done;
    }
    const Py_buffer *rows = &pl->b[P_ROWS].b, *ids = &pl->b[P_IDS].b, *slot = &pl->b[P_SLOT].b,
                    *rl = &pl->b[P_R].b, *sph = pl->b[P_SPH].held ? &pl->b[P_SPH].b : NULL,
                    *B = &pl->b[P_B].b, *o = &pl->b[P_O].b, *sup = &pl->b[P_SUP].b;
    Py_buffer *HT = &pl->b[P_HT].b, *P = &pl->b[P_P].b, *Pg = &pl->b[P_PG].b,
              *Jp = &pl->b[P_JP].b;
    for (Py_ssize_t k = 0; k < nj; k++) {
        long long j = *(const long long *)((const char *)ids->buf + k * ids->strides[0]);
        for (int b = 0; b < 4; b++)
            for (int a = 0; a < 3; a++) W2(*HT, a, 4 * k + b) = AT2(*rows, j, 3 * b + a);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long k = *(const long long *)((const char *)slot->buf + i * slot->strides[0]);
        double r0 = AT2(*rl, i, 0), r1 = AT2(*rl, i, 1), r2 = AT2(*rl, i, 2), p[3], c[3][6];
        for (int a = 0; a < 3; a++) {
            p[a] = AT2(*HT, a, 4 * k) * r0 + AT2(*HT, a, 4 * k + 1) * r1 +
                   AT2(*HT, a, 4 * k + 2) * r2 + AT2(*HT, a, 4 * k + 3);
            if (sph) p[a] -= AT2(*sph, i, a);
            W2(*P, a, i) = p[a];
        }
        if (pl->rotated) {
            double x0 = p[0] - AT1(*o, 0), x1 = p[1] - AT1(*o, 1), x2 = p[2] - AT1(*o, 2);
            for (int cc = 0; cc < 3; cc++)
                W2(*Pg, cc, i) = AT2(*B, 0, cc) * x0 + AT2(*B, 1, cc) * x1 + AT2(*B, 2, cc) * x2;
        }
        W1(d.b, i) = pl->plane_z - AT2(*Pg, 2, i);
        for (int cc = 0; cc < 3; cc++) { /* the row of component cc: [b_c, p x b_c] */
            double b0 = AT2(*B, 0, cc), b1 = AT2(*B, 1, cc), b2 = AT2(*B, 2, cc);
            c[cc][0] = b0; c[cc][1] = b1; c[cc][2] = b2;
            c[cc][3] = p[1] * b2 - p[2] * b1;
            c[cc][4] = p[2] * b0 - p[0] * b2;
            c[cc][5] = p[0] * b1 - p[1] * b0;
        }
        for (Py_ssize_t col = 0; col < nv; col++) {
            if (AT2(*sup, i, col) == 0.0) {
                for (int cc = 0; cc < 3; cc++) W2(*Jp, cc * n + i, col) = 0.0;
                continue;
            }
            double j0 = AT2(J.b, 0, col), j1 = AT2(J.b, 1, col), j2 = AT2(J.b, 2, col),
                   j3 = AT2(J.b, 3, col), j4 = AT2(J.b, 4, col), j5 = AT2(J.b, 5, col);
            for (int cc = 0; cc < 3; cc++)
                W2(*Jp, cc * n + i, col) = c[cc][0] * j0 + c[cc][1] * j1 + c[cc][2] * j2 +
                                           c[cc][3] * j3 + c[cc][4] * j4 + c[cc][5] * j5;
        }
    }
    ret = Py_None;
    Py_INCREF(ret);
done:
    release(&J);
    release(&d);
    return ret;
}

/* ------------------------------------------------------------------------------------------
 * collision_plane_bind(rows, point_geometry, point_joint, slots, G, basis, normal, support, U,
 *                      margin, plane_offset, has_rims, has_caps, geometry_joint, boxes) -> plan
 * collision_plane_depths(plan, near, depth) -> kc
 * collision_plane_near(plan, near, depth, lead_depth) -> kc or -1 (below: the broad phase, then
 *                      the depths)
 * collision_plane_rows(plan, J, candidates, position, J_cm, lead_rows, index) -> None
 * The plane's narrow phase of whole-body collision (CollisionPoints.narrow in
 * wb_sim/contact/ground_collision.py, its numpy reference, and the per-slot reference of the
 * tests): the depth of every slot of the near geometries from the broad phase's U (u_j =
 * R_j^T n and n . t_j per joint: d = -u_j, a rim's lowest point rim cos(phi) rho further down,
 * a capsule's end out of its end rim), then, for the kc slots within the margin, their contact
 * points (placed in the joints' frames, moved by the joints' placements, onto the surface) and
 * their Jacobian rows in the plane's axes, component-major (3, kc, nv), masked by the joints'
 * support. rows (njoints, 12): the placement records (wb_sim/pin_views.py); slots (m, 23): the
 * slots' constants as CollisionPoints._slots lays them out; U (4, njoints): the broad phase's
 * buffer, read at each call; support (njoints, nv). depth (m,): -inf where no slot is within the
 * margin. Two calls, so that the caller allocates the kc-sized outputs in between. The rows
 * call can place l points of another set first (a merged point set's feet: lead_rows (3 l, nv),
 * component-major, or None): J_cm (3, l + kc, nv) holds the lead's rows, then the slots', and
 * index (l + kc,) int64 (None without a lead) 0..l-1, then the candidates + l.
 */
enum { C_ROWS, C_GEOM, C_JOINT, C_SLOTS, C_B, C_N, C_SUP, C_U, C_GJ, C_BOX, C_COUNT };

typedef struct {
    Buf b[C_COUNT];
    Py_ssize_t m, G, njoints, nv, kc;
    double margin, plane_offset;
    int has_rims, has_caps;
    Py_ssize_t *cand;  /* the last depths' candidates (m) */
    double *rl;        /* their points in their joints' frames (3 m) */
    int *sup_col;      /* per joint, the columns its support reaches (njoints nv) */
    int *sup_n;        /* ... and how many (njoints) */
    double *Jl;        /* collision_plane_rows' work: J's columns (6 nv), a row (nv) */
    double *row;
    int terms[3][6];   /* per basis column c: the terms of b_c . v + (p x b_c) . w not zero */
    int nterms[3];     /* for every p (a level ground's: 3 of the 6), and how many */
} CollisionPlan;

static void collision_plan_free(PyObject *capsule) {
    CollisionPlan *pl = (CollisionPlan *)PyCapsule_GetPointer(capsule, "wb_sim.collision_plan");
    if (!pl) return;
    for (int k = 0; k < C_COUNT; k++) release(&pl->b[k]);
    PyMem_Free(pl->cand);
    PyMem_Free(pl->rl);
    PyMem_Free(pl->sup_col);
    PyMem_Free(pl->sup_n);
    PyMem_Free(pl->Jl);
    PyMem_Free(pl->row);
    PyMem_Free(pl);
}

static long long i64(const Py_buffer *b, Py_ssize_t i) {
    return *(const long long *)((const char *)b->buf + i * b->strides[0]);
}

static PyObject *collision_plane_bind(PyObject *self, PyObject *args) {
    PyObject *o[C_COUNT];
    Py_ssize_t G;
    double margin, plane_offset;
    int has_rims, has_caps;
    if (!PyArg_ParseTuple(args, "OOOOnOOOOddppOO", &o[C_ROWS], &o[C_GEOM], &o[C_JOINT], &o[C_SLOTS],
                          &G, &o[C_B], &o[C_N], &o[C_SUP], &o[C_U], &margin, &plane_offset,
                          &has_rims, &has_caps, &o[C_GJ], &o[C_BOX]))
        return NULL;
    CollisionPlan *pl = PyMem_Calloc(1, sizeof(CollisionPlan));
    if (!pl) return PyErr_NoMemory();
    static const int ndim[C_COUNT] = {2, 1, 1, 2, 2, 1, 2, 2, 1, 2};
    Buf *b = pl->b;
    for (int k = 0; k < C_COUNT; k++) {
        if (k == C_GEOM || k == C_JOINT || k == C_GJ) {
            if (PyObject_GetBuffer(o[k], &b[k].b, PyBUF_STRIDES | PyBUF_FORMAT) < 0) goto fail;
            b[k].held = 1;
            if (!is_int64(&b[k].b)) {
                PyErr_SetString(PyExc_TypeError, "wb_sim._compiled.collision_plane_bind: "
                                                 "point_geometry, point_joint and geometry_joint: "
                                                 "1-d int64");
                goto fail;
            }
        } else if (get(o[k], &b[k], ndim[k], k == C_U)) {  /* collision_plane_near writes U */
            goto fail;
        }
    }
    const Py_ssize_t m = b[C_SLOTS].b.shape[0], njoints = b[C_ROWS].b.shape[0],
                     nv = b[C_SUP].b.shape[1];
    if (b[C_ROWS].b.shape[1] != 12 || b[C_GEOM].b.shape[0] != m || b[C_JOINT].b.shape[0] != m ||
        b[C_SLOTS].b.shape[1] != 23 || b[C_B].b.shape[0] != 3 || b[C_B].b.shape[1] != 3 ||
        b[C_N].b.shape[0] != 3 || b[C_SUP].b.shape[0] != njoints || b[C_U].b.shape[0] != 4 ||
        b[C_U].b.shape[1] != njoints || G < 0 || b[C_GJ].b.shape[0] != G ||
        b[C_BOX].b.shape[0] != G || b[C_BOX].b.shape[1] != 6) {
        PyErr_SetString(PyExc_ValueError, "wb_sim._compiled.collision_plane_bind: inconsistent shapes");
        goto fail;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        const long long g = i64(&b[C_GEOM].b, i), j = i64(&b[C_JOINT].b, i);
        if (g < 0 || g >= G || j < 0 || j >= njoints) {
            PyErr_SetString(PyExc_ValueError,
                            "wb_sim._compiled.collision_plane_bind: a geometry or joint out of range");
            goto fail;
        }
    }
    for (Py_ssize_t g = 0; g < G; g++) {
        const long long j = i64(&b[C_GJ].b, g);
        if (j < 0 || j >= njoints) {
            PyErr_SetString(PyExc_ValueError,
                            "wb_sim._compiled.collision_plane_bind: a geometry's joint out of range");
            goto fail;
        }
    }
    pl->m = m; pl->G = G; pl->njoints = njoints; pl->nv = nv;
    pl->margin = margin; pl->plane_offset = plane_offset;
    pl->has_rims = has_rims; pl->has_caps = has_caps;
    pl->cand = PyMem_Malloc(sizeof(Py_ssize_t) * (m ? m : 1));
    pl->rl = PyMem_Malloc(sizeof(double) * 3 * (m ? m : 1));
    pl->sup_col = PyMem_Malloc(sizeof(int) * (njoints * nv ? njoints * nv : 1));
    pl->sup_n = PyMem_Malloc(sizeof(int) * (njoints ? njoints : 1));
    pl->Jl = PyMem_Malloc(sizeof(double) * 6 * (nv ? nv : 1));
    pl->row = PyMem_Malloc(sizeof(double) * (nv ? nv : 1));
    if (!pl->cand || !pl->rl || !pl->sup_col || !pl->sup_n || !pl->Jl || !pl->row) {
        PyErr_NoMemory();
        goto fail;
    }
    for (int cc = 0; cc < 3; cc++) {  /* the basis is constant: its zeros read once */
        double bc[3];
        for (int a = 0; a < 3; a++) bc[a] = AT2(b[C_B].b, a, cc);
        int t = 0;
        for (int a = 0; a < 3; a++)
            if (bc[a] != 0.0) pl->terms[cc][t++] = a;
        for (int a = 0; a < 3; a++)  /* (p x b)_a = p_a+1 b_a+2 - p_a+2 b_a+1 */
            if (bc[(a + 1) % 3] != 0.0 || bc[(a + 2) % 3] != 0.0) pl->terms[cc][t++] = 3 + a;
        pl->nterms[cc] = t;
    }
    for (Py_ssize_t j = 0; j < njoints; j++) {  /* the support is constant: read once */
        int c = 0;
        for (Py_ssize_t col = 0; col < nv; col++)
            if (AT2(b[C_SUP].b, j, col) != 0.0) pl->sup_col[j * nv + c++] = (int)col;
        pl->sup_n[j] = c;
    }
    PyObject *capsule = PyCapsule_New(pl, "wb_sim.collision_plan", collision_plan_free);
    if (capsule) return capsule;
fail:
    for (int k = 0; k < C_COUNT; k++) release(&b[k]);
    PyMem_Free(pl->cand);
    PyMem_Free(pl->rl);
    PyMem_Free(pl->sup_col);
    PyMem_Free(pl->sup_n);
    PyMem_Free(pl->Jl);
    PyMem_Free(pl->row);
    PyMem_Free(pl);
    return NULL;
}

/* The depths of the slots of the near geometries (near[g * stride] nonzero), written into d at
 * off.. off + m (-inf elsewhere); the candidates and their points in their joints' frames kept
 * in the plan for collision_plane_rows. Returns kc. */
static Py_ssize_t plane_depths(CollisionPlan *pl, const char *near, Py_ssize_t stride,
                               const Py_buffer *dbuf, Py_ssize_t off) {
    const Py_buffer *S = &pl->b[C_SLOTS].b, *U = &pl->b[C_U].b, *geom = &pl->b[C_GEOM].b,
                    *joint = &pl->b[C_JOINT].b;
    Py_ssize_t kc = 0;
    for (Py_ssize_t i = 0; i < pl->m; i++) {
        W1(*dbuf, off + i) = -INFINITY;
        const long long g = i64(geom, i);
        if (!near[g * stride]) continue;
        const long long j = i64(joint, i);
        const double d0 = -AT2(*U, 0, j), d1 = -AT2(*U, 1, j), d2 = -AT2(*U, 2, j);
        double Q[4];
        for (int a = 0; a < 4; a++)
            Q[a] = AT2(*S, i, 3 * a) * d0 + AT2(*S, i, 3 * a + 1) * d1 + AT2(*S, i, 3 * a + 2) * d2;
        double dc = Q[0];
        const int end = pl->has_caps && AT2(*S, i, 21) > 0.0 && Q[3] >= 0.0;
        if (pl->has_rims) {
            double lift = sqrt(Q[1] * Q[1] + Q[2] * Q[2]);
            lift *= AT2(*S, i, 18);
            lift *= AT2(*S, i, 20);
            if (end) lift = AT2(*S, i, 20);
            dc += lift;
        }
        double depth = AT2(*S, i, 22) - AT2(*U, 3, j);
        depth += dc;
        depth += pl->plane_offset;
        if (!(depth > -pl->margin)) continue;
        W1(*dbuf, off + i) = depth;
        pl->cand[kc] = i;
        double *r = pl->rl + 3 * kc;
        if (pl->has_rims) { /* the slot on its rim (_place_rims) */
            double x = Q[1], y = Q[2], rho = sqrt(x * x + y * y);
            if (rho <= 1e-12) { x = 1.0; y = 0.0; rho = 1.0; }
            const double c = AT2(*S, i, 18), sn = AT2(*S, i, 19);
            const double a = (c * x - sn * y) / rho, bb = (c * y + sn * x) / rho;
            for (int q = 0; q < 3; q++)
                r[q] = AT2(*S, i, q) + a * AT2(*S, i, 12 + q) + bb * AT2(*S, i, 15 + q);
            if (end) {
                const double dl[3] = {d0, d1, d2};
                for (int q = 0; q < 3; q++) r[q] = AT2(*S, i, q) + AT2(*S, i, 20) * dl[q];
            }
        } else {
            for (int q = 0; q < 3; q++) r[q] = AT2(*S, i, q);
        }
        kc++;
    }
    pl->kc = kc;
    return kc;
}

static PyObject *collision_plane_depths(PyObject *self, PyObject *args) {
    PyObject *oplan, *onear, *od;
    if (!PyArg_ParseTuple(args, "OOO", &oplan, &onear, &od)) return NULL;
    CollisionPlan *pl = (CollisionPlan *)PyCapsule_GetPointer(oplan, "wb_sim.collision_plan");
    if (!pl) return NULL;
    Buf near = {0}, d = {0};
    PyObject *ret = NULL;
    if (PyObject_GetBuffer(onear, &near.b, PyBUF_STRIDES | PyBUF_FORMAT) < 0) goto done;
    near.held = 1;
    if (near.b.ndim != 1 || near.b.itemsize != 1 || !near.b.format || strcmp(near.b.format, "?") ||
        near.b.shape[0] != pl->G) {
        PyErr_SetString(PyExc_TypeError, "wb_sim._compiled.collision_plane_depths: near: (G,) bool");
        goto done;
    }
    if (get(od, &d, 1, 1)) goto done;
    if (d.b.shape[0] != pl->m) {
        PyErr_SetString(PyExc_ValueError, "wb_sim._compiled.collision_plane_depths: inconsistent shapes");
        goto done;
    }
    const Py_ssize_t kc = plane_depths(pl, (const char *)near.b.buf, near.b.strides[0], &d.b, 0);
    ret = PyLong_FromSsize_t(kc);
done:
    release(&near);
    release(&d);
    return ret;
}

/* collision_plane_near(plan, near, depth, lead_depth) -> kc, or -1
 * CollisionPoints.any_near's broad phase on the plane and collision_plane_depths in one call:
 * U (the plan's (4, njoints), written: N^T rec^T as any_near's product, summed here as
 * n_0 x_0 + n_1 x_1 + n_2 x_2: equal to rounding, exact on a level ground), then geometry g on joint j (geometry_joint) has its box (boxes (G, 6): centre, half extents, in the
 * joint's frame) lowest at u_j . c_g + n . t_j - sum_a e_ga |u_ja|; near (G,) bool, written:
 * that height minus the plane's offset below the margin. None near: -1 (depth not written).
 * Else the depths as collision_plane_depths', written after the l depths of lead_depth (l,)
 * (None: l = 0; the points a merged point set places first): depth (l + m,). The heights are
 * summed in another order than any_near's matrix product: equal to rounding, and a box whose
 * lowest corner lies within rounding of the margin has no slot within the margin other than
 * at its edge (its slots lie inside it). */
static PyObject *collision_plane_near(PyObject *self, PyObject *args) {
    PyObject *oplan, *onear, *od, *olead;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO", &oplan, &onear, &od, &olead)) return NULL;
    CollisionPlan *pl = (CollisionPlan *)PyCapsule_GetPointer(oplan, "wb_sim.collision_plan");
    if (!pl) return NULL;
    Buf near = {0}, d = {0}, lead = {0};
    PyObject *ret = NULL;
    if (PyObject_GetBuffer(onear, &near.b, PyBUF_STRIDES | PyBUF_FORMAT | PyBUF_WRITABLE) < 0)
        goto done;
    near.held = 1;
    if (near.b.ndim != 1 || near.b.itemsize != 1 || !near.b.format || strcmp(near.b.format, "?") ||
        near.b.shape[0] != pl->G) {
        PyErr_SetString(PyExc_TypeError, "wb_sim._compiled.collision_plane_near: near: (G,) bool");
        goto done;
    }
    if (get(od, &d, 1, 1) || (olead != Py_None && get(olead, &lead, 1, 0))) goto done;
    const Py_ssize_t l = olead != Py_None ? lead.b.shape[0] : 0;
    if (d.b.shape[0] != l + pl->m) {
        PyErr_SetString(PyExc_ValueError, "wb_sim._compiled.collision_plane_near: inconsistent shapes");
        goto done;
    }
    /* U: per joint j, u_j = R_j^T n (the record's R column-major: entry 3 a + b is R[b, a])
     * and n . t_j (entries 9..11) */
    const Py_buffer *U = &pl->b[C_U].b, *gj = &pl->b[C_GJ].b, *box = &pl->b[C_BOX].b;
    const Py_buffer *rec = &pl->b[C_ROWS].b, *nrm = &pl->b[C_N].b;
    const double n0 = AT1(*nrm, 0), n1 = AT1(*nrm, 1), n2 = AT1(*nrm, 2);
    for (Py_ssize_t j = 0; j < pl->njoints; j++)
        for (int a = 0; a < 4; a++)
            W2(*U, a, j) = n0 * AT2(*rec, j, 3 * a) + n1 * AT2(*rec, j, 3 * a + 1)
                           + n2 * AT2(*rec, j, 3 * a + 2);
    const double below = pl->plane_offset + pl->margin;
    char *nb = (char *)near.b.buf;
    int any = 0;
    for (Py_ssize_t g = 0; g < pl->G; g++) {
        const long long j = i64(gj, g);
        const double u0 = AT2(*U, 0, j), u1 = AT2(*U, 1, j), u2 = AT2(*U, 2, j);
        const double low = u0 * AT2(*box, g, 0) + u1 * AT2(*box, g, 1) + u2 * AT2(*box, g, 2)
                           + AT2(*U, 3, j)
                           - (fabs(u0) * AT2(*box, g, 3) + fabs(u1) * AT2(*box, g, 4)
                              + fabs(u2) * AT2(*box, g, 5));
        const int is_near = low - below < 0.0;
        nb[g * near.b.strides[0]] = (char)is_near;
        any |= is_near;
    }
    if (any)
        for (Py_ssize_t i = 0; i < l; i++) W1(d.b, i) = AT1(lead.b, i);
    ret = PyLong_FromSsize_t(any ? plane_depths(pl, nb, near.b.strides[0], &d.b, l) : -1);
done:
    release(&near);
    release(&d);
    release(&lead);
    return ret;
}

static PyObject *collision_plane_rows(PyObject *self, PyObject *args) {
    PyObject *oplan, *oJ, *oc, *oP, *oJc, *olead, *oix;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOO", &oplan, &oJ, &oc, &oP, &oJc, &olead, &oix)) return NULL;
    CollisionPlan *pl = (CollisionPlan *)PyCapsule_GetPointer(oplan, "wb_sim.collision_plan");
    if (!pl) return NULL;
    Buf J = {0}, c = {0}, P = {0}, Jc3 = {0}, lead = {0}, ix = {0};
    PyObject *ret = NULL;
    const Py_ssize_t kc = pl->kc, nv = pl->nv;
    if (get(oJ, &J, 2, 0) || get(oP, &P, 2, 1) || get(oJc, &Jc3, 3, 1)
        || (olead != Py_None && get(olead, &lead, 2, 0)))
        goto done;
    if (PyObject_GetBuffer(oc, &c.b, PyBUF_STRIDES | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) goto done;
    c.held = 1;
    if (oix != Py_None) {
        if (PyObject_GetBuffer(oix, &ix.b, PyBUF_STRIDES | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) goto done;
        ix.held = 1;
    }
    if (!is_int64(&c.b) || (ix.held && !is_int64(&ix.b))) {
        PyErr_SetString(PyExc_TypeError, "wb_sim._compiled.collision_plane_rows: candidates and "
                                         "index: 1-d int64");
        goto done;
    }
    const Py_ssize_t l = lead.held ? lead.b.shape[0] / 3 : 0;
    if (J.b.shape[0] != 6 || J.b.shape[1] != nv || c.b.shape[0] != kc || P.b.shape[0] != kc ||
        P.b.shape[1] != 3 || Jc3.b.shape[0] != 3 || Jc3.b.shape[1] != l + kc ||
        Jc3.b.shape[2] != nv || (lead.held && (lead.b.shape[0] != 3 * l || lead.b.shape[1] != nv))
        || lead.held != ix.held || (ix.held && ix.b.shape[0] != l + kc)) {
        PyErr_SetString(PyExc_ValueError, "wb_sim._compiled.collision_plane_rows: inconsistent shapes "
                                          "(call collision_plane_depths first)");
        goto done;
    }
    for (int cc = 0; cc < 3; cc++)  /* the lead's rows first */
        for (Py_ssize_t p = 0; p < l; p++) {
            char *to = (char *)Jc3.b.buf + cc * Jc3.b.strides[0] + p * Jc3.b.strides[1];
            const char *from = (const char *)lead.b.buf + (cc * l + p) * lead.b.strides[0];
            if (Jc3.b.strides[2] == (Py_ssize_t)sizeof(double) &&
                lead.b.strides[1] == (Py_ssize_t)sizeof(double))
                memcpy(to, from, sizeof(double) * nv);
            else
                for (Py_ssize_t col = 0; col < nv; col++)
                    *(double *)(to + col * Jc3.b.strides[2]) =
                        *(const double *)(from + col * lead.b.strides[1]);
        }
    if (ix.held)
        for (Py_ssize_t p = 0; p < l; p++) *(long long *)((char *)ix.b.buf + p * ix.b.strides[0]) = p;
    const Py_buffer *rows = &pl->b[C_ROWS].b, *S = &pl->b[C_SLOTS].b, *B = &pl->b[C_B].b,
                    *n = &pl->b[C_N].b, *joint = &pl->b[C_JOINT].b;
    /* J's columns gathered contiguous once (Jl[6 col + a]); the rows' sums read them in the
     * same order as before */
    double *Jl = pl->Jl;
    for (Py_ssize_t col = 0; col < nv; col++)
        for (int a = 0; a < 6; a++) Jl[6 * col + a] = AT2(J.b, a, col);
    for (Py_ssize_t k = 0; k < kc; k++) {
        const Py_ssize_t i = pl->cand[k];
        const long long j = i64(joint, i);
        *(long long *)((char *)c.b.buf + k * c.b.strides[0]) = i;
        if (ix.held) *(long long *)((char *)ix.b.buf + (l + k) * ix.b.strides[0]) = i + l;
        const double *r = pl->rl + 3 * k, rad = AT2(*S, i, 22);
        double p[3];
        for (int b = 0; b < 3; b++) {
            p[b] = r[0] * AT2(*rows, j, b) + r[1] * AT2(*rows, j, 3 + b) + r[2] * AT2(*rows, j, 6 + b);
            p[b] += AT2(*rows, j, 9 + b);
            p[b] -= rad * AT1(*n, b);
            W2(P.b, k, b) = p[b];
        }
        for (int cc = 0; cc < 3; cc++) {
            const double b0 = AT2(*B, 0, cc), b1 = AT2(*B, 1, cc), b2 = AT2(*B, 2, cc);
            const double w0 = p[1] * b2 - p[2] * b1, w1 = p[2] * b0 - p[0] * b2,
                         w2 = p[0] * b1 - p[1] * b0;
            char *out = (char *)Jc3.b.buf + cc * Jc3.b.strides[0] + (l + k) * Jc3.b.strides[1];
            const Py_ssize_t os = Jc3.b.strides[2];
            double *row = pl->row;  /* the row, then copied out (out's stride is any) */
            for (Py_ssize_t col = 0; col < nv; col++) row[col] = 0.0;
            const int *cols = pl->sup_col + j * nv;  /* the columns that move the joint */
            const int ns = pl->sup_n[j];
            /* the sum's terms in order, those whose coefficient is zero for every point left
             * out (each is a zero: the sum is the same, but for a zero's sign) */
            const double coef[6] = {b0, b1, b2, w0, w1, w2};
            const int *tm = pl->terms[cc];
            if (pl->nterms[cc] == 3) {  /* a level ground's basis */
                const double c0 = coef[tm[0]], c1 = coef[tm[1]], c2 = coef[tm[2]];
                const int i0 = tm[0], i1 = tm[1], i2 = tm[2];
                for (int t = 0; t < ns; t++) {
                    const double *jc = Jl + 6 * cols[t];
                    row[cols[t]] = c0 * jc[i0] + c1 * jc[i1] + c2 * jc[i2];
                }
            } else {
                for (int t = 0; t < ns; t++) {
                    const double *jc = Jl + 6 * cols[t];
                    row[cols[t]] = b0 * jc[0] + b1 * jc[1] + b2 * jc[2] + w0 * jc[3] +
                                   w1 * jc[4] + w2 * jc[5];
                }
            }
            if (os == (Py_ssize_t)sizeof(double))
                memcpy(out, row, sizeof(double) * nv);
            else
                for (Py_ssize_t col = 0; col < nv; col++) *(double *)(out + col * os) = row[col];
        }
    }
    ret = Py_None;
    Py_INCREF(ret);
done:
    release(&J); release(&c); release(&P); release(&Jc3); release(&lead); release(&ix);
    return ret;
}

/* ------------------------------------------------------------------------------------------
 * CDR readers of the two state messages a controller and the node read at every step
 * (XCDR1 little endian, as every ROS 2 RMW sends them): where each field lies in the
 * serialized bytes, so that Python takes numpy views of them. The Python readers of
 * wb_sim/ros/conversions.py (_CdrReader) stay the reference, with the same errors: ValueError
 * "not a little-endian CDR message" or "message too short". Why by hand: rclpy's
 * deserialization builds a Python object per nested message (an Odometry ~20, ~75 us); the
 * Python readers take 6 (JointState) and 3 us (Odometry), mostly call overhead.
 * Alignment is relative to the payload, after the 4-byte encapsulation header.
 */
typedef struct {
    const unsigned char *p;
    Py_ssize_t len, pos;
} Cdr;

static int cdr_short(void) {
    PyErr_SetString(PyExc_ValueError, "message too short");
    return -1;
}

static void cdr_align(Cdr *r, Py_ssize_t n) {
    Py_ssize_t off = (r->pos - 4) % n;
    if (off) r->pos += n - off;
}

static int cdr_u32(Cdr *r, unsigned long long *v) {
    cdr_align(r, 4);
    if (r->pos + 4 > r->len) return cdr_short();
    const unsigned char *b = r->p + r->pos;
    *v = (unsigned long long)b[0] | (unsigned long long)b[1] << 8 |
         (unsigned long long)b[2] << 16 | (unsigned long long)b[3] << 24;
    r->pos += 4;
    return 0;
}

static int cdr_open(Cdr *r, const Py_buffer *b) {
    r->p = (const unsigned char *)b->buf;
    r->len = b->len;
    r->pos = 4;
    if (b->len < 4 || r->p[1] != 1) {
        PyErr_SetString(PyExc_ValueError, "not a little-endian CDR message");
        return -1;
    }
    return 0;
}

/* header: stamp (int32 sec, uint32 nanosec) and frame_id */
static int cdr_header(Cdr *r, long long *stamp) {
    unsigned long long sec, nsec, n;
    if (cdr_u32(r, &sec) || cdr_u32(r, &nsec)) return -1;
    long long s = (long long)sec - ((sec >> 31) << 32); /* int32 */
    *stamp = s * 1000000000LL + (long long)nsec;
    if (cdr_u32(r, &n)) return -1;
    if (r->pos + (Py_ssize_t)n > r->len) return cdr_short();
    r->pos += (Py_ssize_t)n;
    return 0;
}

/* a sequence of doubles: (offset, count); no elements, no padding */
static int cdr_doubles(Cdr *r, unsigned long long n, Py_ssize_t *off) {
    if (n == 0) {
        *off = r->pos;
        return 0;
    }
    cdr_align(r, 8);
    if (n > (unsigned long long)(r->len / 8) || r->pos + (Py_ssize_t)(8 * n) > r->len)
        return cdr_short();
    *off = r->pos;
    r->pos += (Py_ssize_t)(8 * n);
    return 0;
}

/* cdr_joint_state(data, key) -> (stamp_ns, names_start, names_end, same, position_offset,
 * position_count, velocity_offset, velocity_count, effort_offset, effort_count).
 * key: the serialized name list of the last message (b"": none); same: the names are key's
 * bytes; otherwise names_end ends the name list, which the caller decodes. */
static PyObject *cdr_joint_state(PyObject *self, PyObject *args) {
    Py_buffer data, key;
    if (!PyArg_ParseTuple(args, "y*y*", &data, &key)) return NULL;
    PyObject *ret = NULL;
    Cdr r;
    long long stamp;
    unsigned long long count, n;
    Py_ssize_t start, end, off[3];
    unsigned long long cnt[3];
    int same = 0;
    if (cdr_open(&r, &data) || cdr_header(&r, &stamp)) goto done;
    cdr_align(&r, 4);
    start = r.pos;
    if (key.len > 0 && start + key.len <= r.len && memcmp(r.p + start, key.buf, key.len) == 0) {
        same = 1;
        r.pos = start + key.len;
    } else {
        if (cdr_u32(&r, &count)) goto done;
        for (unsigned long long i = 0; i < count; i++) {
            if (cdr_u32(&r, &n)) goto done;
            if (r.pos + (Py_ssize_t)n > r.len || n > (unsigned long long)r.len) {
                cdr_short();
                goto done;
            }
            r.pos += (Py_ssize_t)n;
        }
    }
    end = r.pos;
    for (int k = 0; k < 3; k++)
        if (cdr_u32(&r, &cnt[k]) || cdr_doubles(&r, cnt[k], &off[k])) goto done;
    ret = Py_BuildValue("LnnNnKnKnK", stamp, start, end, PyBool_FromLong(same), off[0], cnt[0],
                        off[1], cnt[1], off[2], cnt[2]);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&key);
    return ret;
}

/* cdr_odometry_pose(data) -> (stamp_ns, offset of the pose's 7 doubles) */
static PyObject *cdr_odometry_pose(PyObject *self, PyObject *args) {
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "y*", &data)) return NULL;
    PyObject *ret = NULL;
    Cdr r;
    long long stamp;
    unsigned long long n;
    Py_ssize_t off;
    if (cdr_open(&r, &data) || cdr_header(&r, &stamp)) goto done;
    if (cdr_u32(&r, &n)) goto done; /* child_frame_id */
    if (r.pos + (Py_ssize_t)n > r.len || n > (unsigned long long)r.len) {
        cdr_short();
        goto done;
    }
    r.pos += (Py_ssize_t)n;
    if (cdr_doubles(&r, 7, &off)) goto done;
    ret = Py_BuildValue("Ln", stamp, off);
done:
    PyBuffer_Release(&data);
    return ret;
}

/* ------------------------------------------------------------------------------------------
 * limits_bind(lower, upper, tau, zeta, cols) -> plan
 * limits_find(plan, qj) -> k
 * limits_apply(plan, Minv_upper, v_free, h) -> status
 * The joint limits' implicit spring-dampers (Actuation.limit_violations and
 * Actuation.limit_impulses, wb_sim/actuation.py, their reference) and the step's
 * v_free += M^-1 p. The bind copies the per-joint constants (nj,) float64: the limits, each
 * limit's time constant tau and damping ratio zeta; and cols (nj,) int64, each joint's velocity
 * index. limits_find reads the joint positions qj (nj,) and keeps the joints beyond a limit with
 * their signed distances back, d = clip(q, lower, upper) - q; it returns how many (0 also when
 * a distance is not finite, as the reference's test d.d > 0 says). limits_apply then solves, as
 * the reference does, with c = h / tau^2 + 2 zeta / tau and s = sign(d),
 *   (s_i s_j M^-1_ij + delta_ij M^-1_ii / (h c_i)) p = |d| / (tau^2 c) - s v_free[cols],
 * drops the joints whose impulse would pull and solves again (the active set), and adds
 * M^-1[:, cols] (s p) to v_free (M^-1's upper triangle read). Returns 0 when applied; 1, with
 * v_free untouched, when a system is not numerically positive definite or more than MAX_LIMITS
 * joints are beyond a limit: the caller then runs the reference. The sums run in another order
 * than numpy's: equal to rounding.
 */
#define MAX_LIMITS 64

typedef struct {
    Py_ssize_t nj;
    double *c;      /* lower, upper, tau, zeta: 4 nj */
    long long *cols;
    long long max_col;
    int k;
    int idx[MAX_LIMITS];
    double d[MAX_LIMITS];
} LimitPlan;

static void limit_plan_release(LimitPlan *pl) {
    if (!pl) return;
    PyMem_Free(pl->c);
    PyMem_Free(pl->cols);
    PyMem_Free(pl);
}

static void limit_plan_free(PyObject *capsule) {
    limit_plan_release((LimitPlan *)PyCapsule_GetPointer(capsule, "wb_sim.limit_plan"));
}

static PyObject *limits_bind(PyObject *self, PyObject *args) {
    PyObject *o[5];
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOO", &o[0], &o[1], &o[2], &o[3], &o[4])) return NULL;
    Buf b[5];
    memset(b, 0, sizeof b);
    LimitPlan *pl = NULL;
    PyObject *capsule = NULL;
    for (int i = 0; i < 4; i++)
        if (get(o[i], &b[i], 1, 0)) goto done;
    if (PyObject_GetBuffer(o[4], &b[4].b, PyBUF_STRIDES | PyBUF_FORMAT) < 0) goto done;
    b[4].held = 1;
    if (!is_int64(&b[4].b)) {
        PyErr_SetString(PyExc_TypeError, "wb_sim._compiled.limits_bind: cols: 1-d int64");
        goto done;
    }
    const Py_ssize_t nj = b[0].b.shape[0];
    for (int i = 1; i < 5; i++)
        if (b[i].b.shape[0] != nj) {
            PyErr_SetString(PyExc_ValueError, "wb_sim._compiled.limits_bind: inconsistent shapes");
            goto done;
        }
    pl = PyMem_Calloc(1, sizeof(LimitPlan));
    if (!pl || !(pl->c = PyMem_Calloc(4 * (size_t)nj + 1, sizeof(double)))
        || !(pl->cols = PyMem_Calloc((size_t)nj + 1, sizeof(long long)))) {
        PyErr_NoMemory();
        goto done;
    }
    pl->nj = nj;
    pl->max_col = -1;
    for (Py_ssize_t j = 0; j < nj; j++) {
        for (int i = 0; i < 4; i++) pl->c[i * nj + j] = AT1(b[i].b, j);
        const long long col = *(const long long *)((const char *)b[4].b.buf + j * b[4].b.strides[0]);
        if (col < 0) {
            PyErr_SetString(PyExc_ValueError, "wb_sim._compiled.limits_bind: negative column");
            goto done;
        }
        pl->cols[j] = col;
        if (col > pl->max_col) pl->max_col = col;
    }
    capsule = PyCapsule_New(pl, "wb_sim.limit_plan", limit_plan_free);
done:
    if (!capsule) limit_plan_release(pl);
    for (int i = 0; i < 5; i++) release(&b[i]);
    return capsule;
}

static PyObject *limits_find(PyObject *self, PyObject *args) {
    PyObject *oplan, *oq;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO", &oplan, &oq)) return NULL;
    LimitPlan *pl = (LimitPlan *)PyCapsule_GetPointer(oplan, "wb_sim.limit_plan");
    if (!pl) return NULL;
    Buf q = {0};
    if (get(oq, &q, 1, 0)) {
        release(&q);
        return NULL;
    }
    if (q.b.shape[0] != pl->nj) {
        release(&q);
        PyErr_SetString(PyExc_ValueError, "wb_sim._compiled.limits_find: qj has the wrong length");
        return NULL;
    }
    const Py_ssize_t nj = pl->nj;
    const double *lo = pl->c, *up = pl->c + nj;
    double sum = 0.0;
    int k = 0;
    for (Py_ssize_t j = 0; j < nj; j++) {
        const double x = AT1(q.b, j);
        double y = x < lo[j] ? lo[j] : x; /* np.maximum, then np.minimum (x finite here) */
        y = y > up[j] ? up[j] : y;
        const double d = y - x;
        sum += d * d;
        if (d != 0.0) {
            if (k < MAX_LIMITS) {
                pl->idx[k] = (int)j;
                pl->d[k] = d;
            }
            k++;
        }
    }
    release(&q);
    pl->k = sum > 0.0 ? k : 0;
    return PyLong_FromLong(pl->k);
}

/* Cholesky of the m x m symmetric A (lower triangle, in place), then the solve of b in place;
 * 0, or 1 where A is not numerically positive definite */
static int chol_solve(double *A, double *b, int m) {
    for (int j = 0; j < m; j++) {
        const double s = A[j * m + j] - dot4(A + j * m, A + j * m, j);
        if (!(s > 0.0)) return 1;
        const double ljj = sqrt(s);
        A[j * m + j] = ljj;
        for (int i = j + 1; i < m; i++) A[i * m + j] = (A[i * m + j] - dot4(A + i * m, A + j * m, j)) / ljj;
    }
    for (int i = 0; i < m; i++) b[i] = (b[i] - dot4(A + i * m, b, i)) / A[i * m + i];
    for (int i = m - 1; i >= 0; i--) {
        double s = b[i];
        for (int q = i + 1; q < m; q++) s -= A[q * m + i] * b[q];
        b[i] = s / A[i * m + i];
    }
    return 0;
}

static PyObject *limits_apply(PyObject *self, PyObject *args) {
    PyObject *oplan, *oM, *ov;
    double h;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOd", &oplan, &oM, &ov, &h)) return NULL;
    LimitPlan *pl = (LimitPlan *)PyCapsule_GetPointer(oplan, "wb_sim.limit_plan");
    if (!pl) return NULL;
    Buf M = {0}, v = {0};
    PyObject *ret = NULL;
    long status = 0;
    if (get(oM, &M, 2, 0) || get(ov, &v, 1, 1)) goto done;
    const Py_ssize_t nv = v.b.shape[0];
    if (M.b.shape[0] != nv || M.b.shape[1] != nv || pl->max_col >= nv) {
        PyErr_SetString(PyExc_ValueError, "wb_sim._compiled.limits_apply: inconsistent shapes");
        goto done;
    }
    const int k = pl->k;
    if (k == 0) goto out;
    if (k > MAX_LIMITS) {
        status = 1;
        goto out;
    }
    const Py_ssize_t nj = pl->nj;
    const double *tau = pl->c + 2 * nj, *zeta = pl->c + 3 * nj;
    /* the systems, static like the other kernels' work arrays (the GIL is held throughout:
     * calls never overlap), 64 KB off the stack of the thread that steps */
    static double Afull[MAX_LIMITS * MAX_LIMITS], Asub[MAX_LIMITS * MAX_LIMITS];
    double rhs[MAX_LIMITS], s[MAX_LIMITS], p[MAX_LIMITS], bsub[MAX_LIMITS];
    Py_ssize_t col[MAX_LIMITS];
    int keep[MAX_LIMITS], sub[MAX_LIMITS];
    for (int i = 0; i < k; i++) {
        const int j = pl->idx[i];
        const double t = tau[j], c = h / (t * t) + 2.0 * zeta[j] / t, d = pl->d[i];
        col[i] = (Py_ssize_t)pl->cols[j];
        s[i] = d > 0.0 ? 1.0 : -1.0;
        rhs[i] = fabs(d) / (t * t * c) - s[i] * AT1(v.b, col[i]);
        for (int q = 0; q <= i; q++) {
            const Py_ssize_t a = col[q] < col[i] ? col[q] : col[i], b = col[q] < col[i] ? col[i] : col[q];
            Afull[i * k + q] = Afull[q * k + i] = s[i] * s[q] * AT2(M.b, a, b);
        }
        Afull[i * k + i] += AT2(M.b, col[i], col[i]) / (h * c);
        keep[i] = 1;
    }
    /* the active set: every joint, then without those whose impulse pulls */
    for (;;) {
        int m = 0;
        for (int i = 0; i < k; i++)
            if (keep[i]) sub[m++] = i;
        for (int i = 0; i < k; i++) p[i] = 0.0;
        if (m == 0) break;
        for (int a = 0; a < m; a++) {
            bsub[a] = rhs[sub[a]];
            for (int b = 0; b < m; b++) Asub[a * m + b] = Afull[sub[a] * k + sub[b]];
        }
        if (chol_solve(Asub, bsub, m)) {
            status = 1;
            goto out;
        }
        int pulling = 0;
        for (int a = 0; a < m; a++) {
            p[sub[a]] = bsub[a];
            if (bsub[a] < 0.0) {
                keep[sub[a]] = 0;
                pulling = 1;
            }
        }
        if (!pulling) break;
    }
    /* v_free += M^-1[:, cols] (s max(p, 0)) */
    for (int i = 0; i < k; i++) p[i] = s[i] * (p[i] > 0.0 ? p[i] : 0.0);
    for (Py_ssize_t j = 0; j < nv; j++) {
        double acc = 0.0;
        for (int i = 0; i < k; i++) {
            const Py_ssize_t c = col[i];
            acc += (j <= c ? AT2(M.b, j, c) : AT2(M.b, c, j)) * p[i];
        }
        W1(v.b, j) += acc;
    }
out:
    ret = PyLong_FromLong(status);
done:
    release(&M);
    release(&v);
    return ret;
}

/* ------------------------------------------------------------------------------------------
 * rotate_inverse_into(q, iq, out, iv) -> None
 * out[iv:iv + 3] = R^T out[iv:iv + 3], R the rotation of the unit quaternion q[iq + 3:iq + 7]
 * (x, y, z, w): the public velocity of a free root (Simulator._public_velocity: the stepping
 * model's world-axes linear velocity into the base's axes). Its reference is
 * wb_sim.robot.rotate_inverse, whose sums it does in the same order (-ffp-contract=off: no FMA),
 * so the two agree bit for bit. Why compiled: sim.v is read every step (a controller's
 * observation, the node's messages), and the scalar Python costs ~1 us of its ~1.8. */
static PyObject *rotate_inverse_into(PyObject *self, PyObject *args) {
    PyObject *oq, *oo;
    Py_ssize_t iq, iv;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnOn", &oq, &iq, &oo, &iv)) return NULL;
    Buf q = {0}, o = {0};
    PyObject *ret = NULL;
    if (get(oq, &q, 1, 0) || get(oo, &o, 1, 1)) goto done;
    if (iq < 0 || iq + 7 > q.b.shape[0] || iv < 0 || iv + 3 > o.b.shape[0]) {
        PyErr_SetString(PyExc_IndexError, "wb_sim._compiled.rotate_inverse_into: index out of range");
        goto done;
    }
    {
        const double x = AT1(q.b, iq + 3), y = AT1(q.b, iq + 4), z = AT1(q.b, iq + 5),
                     w = AT1(q.b, iq + 6);
        const double a = AT1(o.b, iv), b = AT1(o.b, iv + 1), c = AT1(o.b, iv + 2);
        const double tx = 2.0 * (z * b - y * c), ty = 2.0 * (x * c - z * a),
                     tz = 2.0 * (y * a - x * b);
        W1(o.b, iv) = a + w * tx + z * ty - y * tz;
        W1(o.b, iv + 1) = b + w * ty + x * tz - z * tx;
        W1(o.b, iv + 2) = c + w * tz + y * tx - x * ty;
    }
    ret = Py_None;
    Py_INCREF(ret);
done:
    release(&q);
    release(&o);
    return ret;
}

static PyMethodDef methods[] = {
    {"stick_solve", stick_solve, METH_VARARGS,
     "The compliant contact's all-sticking solve (see wb_sim/_compiled.c); returns 0 when solved."},
    {"stick_solve_candidates", stick_solve_candidates, METH_VARARGS,
     "The compliant solve over a point set's candidates when every selected point sticks."},
    {"points_plane_bind", points_plane_bind, METH_VARARGS,
     "Checks and holds the arrays of ContactPoints.update against a plane (see wb_sim/_compiled.c)."},
    {"points_plane", points_plane, METH_VARARGS,
     "ContactPoints.update against a plane, with a plan of points_plane_bind."},
{"collision_plane_bind", collision_plane_bind, METH_VARARGS,
     "Checks and holds the arrays of CollisionPoints.narrow on the plane (see wb_sim/_compiled.c)."},
    {"collision_plane_near", collision_plane_near, METH_VARARGS,
     "The plane's broad phase and the near slots' depths (see wb_sim/_compiled.c)."},
    {"collision_plane_depths", collision_plane_depths, METH_VARARGS,
     "The plane's narrow phase, first call: every slot's depth; returns the candidates' count."},
    {"collision_plane_rows", collision_plane_rows, METH_VARARGS,
     "The plane's narrow phase, second call: the candidates, their points and Jacobian rows."},
    {"cdr_joint_state", cdr_joint_state, METH_VARARGS,
     "Where the fields of a serialized sensor_msgs/JointState lie (see wb_sim/_compiled.c)."},
    {"cdr_odometry_pose", cdr_odometry_pose, METH_VARARGS,
     "The stamp of a serialized nav_msgs/Odometry and where its pose lies."},
    {"limits_bind", limits_bind, METH_VARARGS,
     "Copies the joint limits' constants for limits_find and limits_apply (see wb_sim/_compiled.c)."},
    {"limits_find", limits_find, METH_VARARGS,
     "The joints beyond a position limit (kept in the plan); returns how many."},
    {"limits_apply", limits_apply, METH_VARARGS,
     "The limits' impulses added to v_free through M^-1; returns 0 when applied."},
    {"rotate_inverse_into", rotate_inverse_into, METH_VARARGS,
     "out[iv:iv + 3] = R^T out[iv:iv + 3], R the quaternion q[iq + 3:iq + 7]'s (sim.v's base)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "wb_sim._compiled",
                                    "Compiled kernels of wb_sim's step (wb_sim/compiled.py).", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__compiled(void) { return PyModule_Create(&module); }

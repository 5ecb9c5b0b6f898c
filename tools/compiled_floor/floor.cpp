// The compiled floor of wb_sim's step: what pinocchio's dynamics and the compliant contact's
// linear algebra cost when called from C++ rather than from Python. A measurement for issue 33
// (tools/compiled_floor/run.py builds and runs it); nothing here is part of wb_sim.
//
// The model arrives serialized (pin.Model.saveToString of the simulator's stepping model), the
// contact points as (joint id, offset in the joint frame), as wb_sim.contact.points has them.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include <pinocchio/multibody.hpp>
#include <pinocchio/algorithm/aba.hpp>
#include <pinocchio/algorithm/cholesky.hpp>
#include <pinocchio/algorithm/crba.hpp>
#include <pinocchio/algorithm/jacobian.hpp>
#include <pinocchio/algorithm/joint-configuration.hpp>
#include <pinocchio/algorithm/rnea.hpp>
#include <pinocchio/serialization.hpp>

namespace {
using namespace pinocchio;
using Eigen::MatrixXd;
using Eigen::VectorXd;

struct Floor {
  Model model;
  Data data;
  std::vector<int> joint_of_point;
  std::vector<Eigen::Vector3d> r_local;
  std::vector<int> joints;  // distinct joints carrying points
  std::vector<int> cols;    // velocity columns that move some point (the rest of J is zero)
};
std::unique_ptr<Floor> g;  // the loaded model, or none

// load(model_bytes, [(joint_id, x, y, z), ...]) -> nv
PyObject* load(PyObject*, PyObject* args) {
  char* s;
  Py_ssize_t n;
  PyObject* pts;
  if (!PyArg_ParseTuple(args, "y#O", &s, &n, &pts)) return nullptr;
  auto f = std::make_unique<Floor>();
  try {
    f->model.loadFromString(std::string(s, n));
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_ValueError, "not a serialized pinocchio model: %s", e.what());
    return nullptr;
  }
  f->data = Data(f->model);
  PyObject* seq = PySequence_Fast(pts, "points must be a sequence");
  if (!seq) return nullptr;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
    int j;
    double x, y, z;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "iddd", &j, &x, &y, &z)) {
      Py_DECREF(seq);
      return nullptr;
    }
    if (j <= 0 || j >= f->model.njoints) {
      Py_DECREF(seq);
      PyErr_Format(PyExc_ValueError, "point %zd: joint id %d is not a joint of the model", i, j);
      return nullptr;
    }
    f->joint_of_point.push_back(j);
    f->r_local.emplace_back(x, y, z);
    if (std::find(f->joints.begin(), f->joints.end(), j) == f->joints.end()) f->joints.push_back(j);
  }
  Py_DECREF(seq);
  std::vector<bool> moves(f->model.nv, false);
  for (int j : f->joints)
    for (auto a : f->model.supports[j])
      if (a > 0)
        for (int k = 0; k < f->model.nvs[a]; ++k) moves[f->model.idx_vs[a] + k] = true;
  for (int k = 0; k < f->model.nv; ++k)
    if (moves[k]) f->cols.push_back(k);
  g = std::move(f);
  return PyLong_FromLong(g->model.nv);
}

// The work of the compliant law's all-sticking solve of wb_sim.contact.compliant (component-major
// rows: all t1, all t2, all normal): A = J (h M^-1) J^T + diag, A f = rhs, v' = v_free + h M^-1 J^T f.
// The products and the factorization are the law's; its diagonal and targets are placeholders
// (a constant, none): this times the solve, it does not reproduce its forces.
// `sparse`: only the columns that move a point enter the products (J is zero elsewhere).
void contact(Floor& f, const VectorXd& v_free, double h, bool sparse, MatrixXd& Jc, MatrixXd& MinvJt,
             MatrixXd& A, VectorXd& rhs, Eigen::LLT<MatrixXd>& llt, MatrixXd& Jj, VectorXd& v_next) {
  const Model& m = f.model;
  Data& d = f.data;
  const int n = static_cast<int>(f.joint_of_point.size());
  for (size_t s = 0; s < f.joints.size(); ++s) {
    auto Jblock = Jj.middleRows(6 * s, 6);
    Jblock.setZero();
    getJointJacobian(m, d, f.joints[s], WORLD, Jblock);
  }
  for (int i = 0; i < n; ++i) {
    const int slot = static_cast<int>(
        std::find(f.joints.begin(), f.joints.end(), f.joint_of_point[i]) - f.joints.begin());
    const auto J = Jj.middleRows(6 * slot, 6);
    const Eigen::Vector3d p = d.oMi[f.joint_of_point[i]].act(f.r_local[i]);
    // the point's velocity v_o + w x p: rows J_lin - [p]x J_ang
    Jc.row(i) = J.row(0) + p.z() * J.row(4) - p.y() * J.row(5);
    Jc.row(n + i) = J.row(1) - p.z() * J.row(3) + p.x() * J.row(5);
    Jc.row(2 * n + i) = J.row(2) + p.y() * J.row(3) - p.x() * J.row(4);
  }
  if (sparse) {
    const int c = static_cast<int>(f.cols.size());
    static thread_local MatrixXd Jg, Mg;
    Jg.resize(3 * n, c);
    Mg.resize(m.nv, c);
    for (int k = 0; k < c; ++k) {
      Jg.col(k) = Jc.col(f.cols[k]);
      Mg.col(k) = d.Minv.col(f.cols[k]);
    }
    MinvJt.noalias() = h * (Mg * Jg.transpose());
    A.noalias() = Jg * MinvJt(f.cols, Eigen::placeholders::all);
  } else {
    MinvJt.noalias() = h * (d.Minv * Jc.transpose());
    A.noalias() = Jc * MinvJt;
  }
  A.diagonal().array() += 1.0e-3;
  rhs.noalias() = -(Jc * v_free);
  llt.compute(A);
  llt.solveInPlace(rhs);
  v_next = v_free;
  v_next.noalias() += MinvJt * rhs;
}

// what bench and contact_check share: the loaded model (a Python error and null before
// load), the state they start from (neutral q, v 0.05, no torque) and the contact solve's
// buffers for its n points
struct Work {
  Floor& f;
  const Model& m;
  Data& d;
  int n;
  VectorXd q, v, tau, v_free, rhs;
  MatrixXd Jc, MinvJt, A, Jj;
  Eigen::LLT<MatrixXd> llt;
  explicit Work(Floor& fl)
      : f(fl), m(fl.model), d(fl.data), n(static_cast<int>(fl.joint_of_point.size())),
        q(neutral(m)), v(VectorXd::Constant(m.nv, 0.05)), tau(VectorXd::Zero(m.nv)),
        v_free(m.nv), rhs(3 * n), Jc(MatrixXd::Zero(3 * n, m.nv)), MinvJt(m.nv, 3 * n),
        A(3 * n, 3 * n), Jj(MatrixXd::Zero(6 * fl.joints.size(), m.nv)), llt(3 * n) {}
  // ABA in the world convention, M^-1 from its factorization, and v_free after step h
  void dynamics(double h) {
    aba(m, d, q, v, tau, Convention::WORLD);
    computeMinverse(m, d);
    d.Minv.triangularView<Eigen::StrictlyLower>() = d.Minv.transpose();
    v_free = v + h * d.ddq;
  }
  void solve(double h, bool sparse, VectorXd& v_next) {
    contact(f, v_free, h, sparse, Jc, MinvJt, A, rhs, llt, Jj, v_next);
  }
};

std::unique_ptr<Work> work_or_error() {
  if (!g) {
    PyErr_SetString(PyExc_RuntimeError, "load() first");
    return nullptr;
  }
  return std::make_unique<Work>(*g);
}

// bench(N, variant) -> mean microseconds per call
PyObject* bench(PyObject*, PyObject* args) {
  long N;
  int variant;
  if (!PyArg_ParseTuple(args, "li", &N, &variant)) return nullptr;
  auto w = work_or_error();
  if (!w) return nullptr;
  const Model& m = w->m;
  Data& d = w->d;
  const VectorXd& q = w->q;
  const VectorXd& v = w->v;
  const VectorXd& tau = w->tau;
  const double h = 1e-3;
  VectorXd a = VectorXd::Zero(m.nv), v_next = VectorXd::Zero(m.nv), q_next(m.nq);
  double sink = 0.0;
  auto dynamics = [&]() { w->dynamics(h); };  // today's
  if (variant == 3 || variant == 4) dynamics();  // the contact solve's inputs
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < N; ++i) {
    switch (variant) {
      case 0:  // ABA + M^-1
        dynamics();
        break;
      case 1:  // the contact-dynamics floor without M^-1: CRBA, bias forces, sparse LDL, one solve
        crba(m, d, q, Convention::WORLD);
        nonLinearEffects(m, d, q, v);
        cholesky::decompose(m, d);
        a = tau - d.nle;
        cholesky::solve(m, d, a);
        break;
      case 2:  // the benchmark controller's gravity torques
        computeGeneralizedGravity(m, d, q);
        break;
      case 3:  // contact rows and the all-sticking implicit solve (after one ABA + M^-1 outside)
        w->solve(h, false, v_next);
        break;
      case 4:  // the same, on the columns that move the points only
        w->solve(h, true, v_next);
        break;
      case 5:  // a compiled step's work: gravity, ABA + M^-1, contact solve, integration
        computeGeneralizedGravity(m, d, q);
        dynamics();
        w->solve(h, true, v_next);
        integrate(m, q, v_next * h, q_next);
        break;
      default:
        PyErr_SetString(PyExc_ValueError, "variant is 0..5");
        return nullptr;
    }
    sink += d.ddq[0] + v_next[0] + a[0];
  }
  const auto t1 = std::chrono::steady_clock::now();
  if (sink == 1.2345e300) std::puts("");  // keep the work observable
  return PyFloat_FromDouble(std::chrono::duration<double, std::micro>(t1 - t0).count() / N);
}

// contact_check() -> the largest relative difference between v' of the sparse and the dense
// solve (rounding only: the sparse products are the dense ones)
PyObject* contact_check(PyObject*, PyObject*) {
  auto w = work_or_error();
  if (!w) return nullptr;
  w->dynamics(1e-3);
  VectorXd a(w->m.nv), b(w->m.nv);
  w->solve(1e-3, false, a);
  w->solve(1e-3, true, b);
  return PyFloat_FromDouble((a - b).cwiseAbs().maxCoeff() / a.cwiseAbs().maxCoeff());
}

PyMethodDef methods[] = {{"load", load, METH_VARARGS, "load(model_bytes, points) -> nv"},
                         {"bench", bench, METH_VARARGS, "bench(N, variant) -> us per call"},
                         {"contact_check", contact_check, METH_NOARGS, "relative difference"},
                         {nullptr, nullptr, 0, nullptr}};
PyModuleDef module = {PyModuleDef_HEAD_INIT, "floor", nullptr, -1, methods};
}  // namespace

PyMODINIT_FUNC PyInit_floor(void) { return PyModule_Create(&module); }

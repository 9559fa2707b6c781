// Bounded least squares on the linear surrogate (fit.hpp). The problem is small (tens of parameters, hundreds of
// rows), so the normal equations are formed once and solved by exact coordinate descent with projection: each
// coordinate's one-dimensional minimum is closed-form, and clamping it to the box keeps every iterate feasible. For a
// convex quadratic this converges to the constrained minimiser.
#include "calibration/fit.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>

namespace zerosim::calibration {
namespace {

void check(const FitProblem& p)
{
  const auto n = static_cast<Eigen::Index>(p.params.size());
  const Eigen::Index rows = p.y0.size();
  if (p.x0.size() != n || p.jacobian.cols() != n || p.jacobian.rows() != rows || p.target.size() != rows ||
      p.weight.size() != rows)
    throw core::InternalError("calibration fit: sizes disagree (" + std::to_string(n) + " parameters, " +
                              std::to_string(rows) + " rows)");
  for (const FitParameter& q : p.params) {
    if (!(q.sigma > 0))
      throw core::InternalError("calibration fit: parameter " + q.name + " has no positive prior spread");
    if (!(q.lower <= q.upper) || (q.frozen && !(q.lower <= q.prior && q.prior <= q.upper)))
      throw core::InternalError("calibration fit: parameter " + q.name +
                                " has an empty box or a frozen prior outside it");
  }
}

} // namespace

Eigen::VectorXd surrogate(const FitProblem& p, const Eigen::VectorXd& x)
{
  return p.y0 + p.jacobian * (x - p.x0);
}

double data_cost(const FitProblem& p, const Eigen::VectorXd& r)
{
  double c = 0;
  const double t = p.huber_threshold;
  for (Eigen::Index i = 0; i < r.size(); ++i) {
    const double w = std::max(0.0, p.weight(i));
    const double a = std::abs(r(i));
    c += w * (t > 0 && a > t ? 2 * t * a - t * t : a * a);
  }
  return c;
}

double prior_cost(const FitProblem& p, const Eigen::VectorXd& x)
{
  double c = 0;
  for (std::size_t j = 0; j < p.params.size(); ++j)
    c += std::pow((x(static_cast<Eigen::Index>(j)) - p.params[j].prior) / p.params[j].sigma, 2);
  return c;
}

std::vector<double> prior_share(const FitProblem& p)
{
  check(p);
  std::vector<double> share(p.params.size(), 1.0);
  std::vector<Eigen::Index> free;
  for (std::size_t j = 0; j < p.params.size(); ++j)
    if (!p.params[j].frozen)
      free.push_back(static_cast<Eigen::Index>(j));
  if (free.empty())
    return share;
  const auto k = static_cast<Eigen::Index>(free.size());
  const Eigen::VectorXd w = p.weight.cwiseMax(0.0);
  Eigen::MatrixXd jf(p.jacobian.rows(), k);
  for (Eigen::Index u = 0; u < k; ++u)
    jf.col(u) = p.jacobian.col(free[static_cast<std::size_t>(u)]);
  Eigen::MatrixXd h = jf.transpose() * w.asDiagonal() * jf;
  for (Eigen::Index u = 0; u < k; ++u) {
    const double s = p.params[static_cast<std::size_t>(free[static_cast<std::size_t>(u)])].sigma;
    h(u, u) += 1.0 / (s * s);
  }
  const Eigen::MatrixXd cov = h.inverse();
  for (Eigen::Index u = 0; u < k; ++u) {
    const double s = p.params[static_cast<std::size_t>(free[static_cast<std::size_t>(u)])].sigma;
    share[static_cast<std::size_t>(free[static_cast<std::size_t>(u)])] = cov(u, u) / (s * s);
  }
  return share;
}

std::vector<int> informing_rows(const FitProblem& p, double threshold)
{
  std::vector<int> count(p.params.size(), 0);
  for (Eigen::Index i = 0; i < p.jacobian.rows(); ++i) {
    if (!(p.weight(i) > 0))
      continue;
    for (Eigen::Index j = 0; j < p.jacobian.cols(); ++j)
      if (std::abs(p.jacobian(i, j)) >= threshold)
        ++count[static_cast<std::size_t>(j)];
  }
  return count;
}

namespace {

/// The minimiser of sum_i w_i (surrogate_i(x) - t_i)^2 + prior cost over the box, from `start`.
Eigen::VectorXd minimise(const FitProblem& p, const Eigen::VectorXd& w, Eigen::VectorXd x, int& sweeps,
                         Eigen::MatrixXd& H)
{
  const auto n = static_cast<Eigen::Index>(p.params.size());
  // Cost(x) = sum_i w_i (a_i + J_i x)^2 + sum_j ((x_j - m_j) / s_j)^2 with a = y0 - J x0 - t:
  // Hessian/2 = J^T W J + diag(1/s^2); the minimum solves H x = b, b = -J^T W a + diag(1/s^2) m.
  const Eigen::VectorXd a = p.y0 - p.jacobian * p.x0 - p.target;
  H = p.jacobian.transpose() * w.asDiagonal() * p.jacobian;
  Eigen::VectorXd b = -(p.jacobian.transpose() * w.asDiagonal() * a);
  for (Eigen::Index j = 0; j < n; ++j) {
    const FitParameter& q = p.params[static_cast<std::size_t>(j)];
    const double inv = 1.0 / (q.sigma * q.sigma);
    H(j, j) += inv;
    b(j) += inv * q.prior;
  }
  constexpr int MAX_SWEEPS = 100000;
  for (sweeps = 1; sweeps <= MAX_SWEEPS; ++sweeps) {
    double moved = 0;
    for (Eigen::Index j = 0; j < n; ++j) {
      const FitParameter& q = p.params[static_cast<std::size_t>(j)];
      if (q.frozen)
        continue;
      const double rest = H.row(j).dot(x) - H(j, j) * x(j);
      const double next = std::clamp((b(j) - rest) / H(j, j), q.lower, q.upper);
      moved = std::max(moved, std::abs(next - x(j)));
      x(j) = next;
    }
    if (moved <= 1e-12)
      break;
  }
  return x;
}

} // namespace

FitResult solve(const FitProblem& p)
{
  check(p);
  const auto n = static_cast<Eigen::Index>(p.params.size());
  Eigen::VectorXd x(n);
  for (Eigen::Index j = 0; j < n; ++j) {
    const FitParameter& q = p.params[static_cast<std::size_t>(j)];
    x(j) = q.frozen ? q.prior : std::clamp(p.x0(j), q.lower, q.upper);
  }
  FitResult r;
  const Eigen::VectorXd w0 = p.weight.cwiseMax(0.0);
  Eigen::VectorXd w = w0;
  Eigen::MatrixXd H;
  // Huber by iteratively reweighted least squares: the weights from the residuals of the last minimiser, until they
  // settle (each step does not raise the Huber cost; 50 rounds are far more than the problems here need).
  constexpr int MAX_REWEIGHTS = 50;
  for (int round = 0; round < MAX_REWEIGHTS; ++round) {
    int sweeps = 0;
    x = minimise(p, w, x, sweeps, H);
    r.sweeps += sweeps;
    if (!(p.huber_threshold > 0))
      break;
    const Eigen::VectorXd res = surrogate(p, x) - p.target;
    Eigen::VectorXd next = w0;
    for (Eigen::Index i = 0; i < res.size(); ++i)
      if (std::abs(res(i)) > p.huber_threshold)
        next(i) = w0(i) * p.huber_threshold / std::abs(res(i));
    const double change = (next - w).cwiseAbs().maxCoeff();
    w = next;
    if (change <= 1e-9 * std::max(1.0, w0.maxCoeff()))
      break;
  }
  r.x = x;
  r.data_cost = data_cost(p, surrogate(p, x) - p.target);
  r.prior_cost = prior_cost(p, x);
  // Uncertainty over the free parameters: (H^-1)_jj, scaled by the reduced chi-square of the weighted data when the
  // data scatter more than their weights say (chi2 / dof > 1), so a poor fit is not reported as a sharp one.
  std::vector<Eigen::Index> free;
  r.at_bound.assign(static_cast<std::size_t>(n), false);
  for (Eigen::Index j = 0; j < n; ++j) {
    const FitParameter& q = p.params[static_cast<std::size_t>(j)];
    if (q.frozen)
      continue;
    free.push_back(j);
    const double tol = 1e-9 * std::max(1.0, std::abs(x(j)));
    r.at_bound[static_cast<std::size_t>(j)] = x(j) <= q.lower + tol || x(j) >= q.upper - tol;
  }
  r.sigma = Eigen::VectorXd::Zero(n);
  if (!free.empty()) {
    const auto k = static_cast<Eigen::Index>(free.size());
    Eigen::MatrixXd Hf(k, k);
    for (Eigen::Index u = 0; u < k; ++u)
      for (Eigen::Index v = 0; v < k; ++v)
        Hf(u, v) = H(free[static_cast<std::size_t>(u)], free[static_cast<std::size_t>(v)]);
    const Eigen::MatrixXd cov = Hf.inverse();
    int used = 0;
    for (Eigen::Index i = 0; i < w.size(); ++i)
      used += w(i) > 0 ? 1 : 0;
    const int dof = used - static_cast<int>(k);
    // The weights are inverse variances: data_cost is the chi-square.
    const double scale = dof > 0 ? std::max(1.0, r.data_cost / dof) : 1.0;
    for (Eigen::Index u = 0; u < k; ++u)
      r.sigma(free[static_cast<std::size_t>(u)]) = std::sqrt(std::max(0.0, cov(u, u)) * scale);
  }
  return r;
}

} // namespace zerosim::calibration

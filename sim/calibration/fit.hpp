// The fit of `zerosim calibrate` (docs/calibration.md "The fit"): bounded least squares on relative residuals with
// priors, on a surrogate linear in the log-parameters. Pure arithmetic with Eigen: no simulation, no files.
#pragma once

#include <Eigen/Dense>

#include <string>
#include <vector>

namespace zerosim::calibration {

/// A parameter as the fit sees it, in x = ln(multiplier).
struct FitParameter {
  std::string name;
  double prior = 0;    ///< ln of the prior multiplier (0: the model's prior)
  double sigma = 0;    ///< the prior's spread in ln (> 0)
  double lower = 0;    ///< ln of the lower bound
  double upper = 0;    ///< ln of the upper bound
  bool frozen = false; ///< kept at its prior (no row of this fit informs it)
};

/// The surrogate around x0: ln prediction_i(x) = y0_i + J_i (x - x0). The residual of row i is
/// ln prediction_i - ln measured_i, weighted by weight_i; each parameter adds ((x_j - prior_j) / sigma_j)^2.
struct FitProblem {
  std::vector<FitParameter> params;
  Eigen::VectorXd x0;       ///< where the surrogate was linearised (ln multipliers)
  Eigen::VectorXd y0;       ///< ln prediction per row at x0
  Eigen::MatrixXd jacobian; ///< d ln prediction_i / d x_j at x0 (rows x parameters)
  Eigen::VectorXd target;   ///< ln measured per row
  /// Per row: the inverse variance of its ln residual (> 0 used; 0 leaves the row out). The uncertainty reads the
  /// data cost as a chi-square on this scale.
  Eigen::VectorXd weight;
  /// Huber's loss on the residuals (0: plain least squares): a row whose |residual| exceeds this (in ln) is weighted
  /// down by threshold / |residual|, so its cost grows linearly, not quadratically (iteratively reweighted).
  double huber_threshold = 0;
};

struct FitResult {
  Eigen::VectorXd x;          ///< the minimiser, within the bounds
  Eigen::VectorXd sigma;      ///< one standard deviation of each x_j (0 for frozen parameters)
  std::vector<bool> at_bound; ///< x_j sits at its lower or upper bound (not for frozen parameters)
  double data_cost = 0;       ///< sum of weight_i rho(r_i) at x (rho: r^2, or Huber's loss)
  double prior_cost = 0;      ///< sum of ((x_j - prior_j) / sigma_j)^2 at x
  int sweeps = 0;             ///< coordinate sweeps until converged
};

/// The surrogate's ln predictions at x.
Eigen::VectorXd surrogate(const FitProblem& p, const Eigen::VectorXd& x);

/// The data cost of residuals `r` (ln predicted - ln measured) under p's weights and loss: sum of weight_i rho(r_i),
/// rho(r) = r^2, or with a Huber threshold t: r^2 for |r| <= t, 2 t |r| - t^2 beyond.
double data_cost(const FitProblem& p, const Eigen::VectorXd& r);

/// The prior cost at x: sum of ((x_j - prior_j) / sigma_j)^2.
double prior_cost(const FitProblem& p, const Eigen::VectorXd& x);

/// Minimises the weighted data cost plus the prior cost over the box [lower, upper] (frozen parameters held at their
/// prior). The cost is a convex quadratic, solved by exact coordinate descent with projection onto the box until no
/// coordinate moves by more than 1e-12. The uncertainty is the square root of the diagonal of the inverse
/// Hessian over the free parameters, scaled by the data's reduced chi-square when it is above 1 (docs/calibration.md
/// says why). Throws core::InternalError for inconsistent sizes, a non-positive sigma, an empty box or a frozen
/// parameter whose prior lies outside its box.
FitResult solve(const FitProblem& p);

/// Per parameter, the prior's share of what fixes it on this surrogate: the posterior variance of x_j (the inverse
/// of J^T W J + diag(1 / sigma^2) over the free parameters, at the rows' nominal weights) over its prior variance
/// sigma_j^2. Near 0: the data fix x_j; above 0.5: its prior fixes it more than the data do (a parameter correlated
/// with others counts only the information the others do not share). 1 for a frozen parameter.
std::vector<double> prior_share(const FitProblem& p);

/// Rows whose column j of the Jacobian is at least `threshold` in absolute value: how many rows inform x_j.
std::vector<int> informing_rows(const FitProblem& p, double threshold);

} // namespace zerosim::calibration

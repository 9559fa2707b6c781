// The plots of a sweep (docs/sweep.md "Plots"), drawn with gnuplot as SVG and PNG: each plot's data (.dat) and
// gnuplot script (.gp) are written beside it in the sweep's folder, so a user can restyle and redraw it. Which plots
// a sweep gets depends on its axes: throughput and memory against a swept batch key, and the step-time breakdown
// of every point.
#pragma once

#include "sweep/sweep.hpp"

#include <string>
#include <vector>

namespace zerosim::sweep {

/// One plot: its name ("throughput"), the files written (data, script, images) and whether gnuplot drew it.
struct PlotFiles {
  std::string name;
  std::vector<std::string> files;
  bool drawn = false;
};

/// Writes every plot the sweep's axes call for into `dir`, from `records` (the points in point order). Runs
/// `gnuplot` (found on PATH) on each script; without it, the data and scripts are still written and `notice` says
/// so. Points that did not run are left out of the plots.
std::vector<PlotFiles> write_plots(const std::string& dir, const Plan& plan, const std::vector<Record>& records,
                                   std::string& notice);

/// `zerosim plot DIR`: redraws the plots of a finished (or stopped) sweep from its files. Throws core::InputError
/// for a DIR that holds no sweep.
int plot_command(const std::string& dir, std::ostream& out, std::ostream& err);

/// The batch axis a throughput and memory plot is drawn against (training.global_batch, training.micro_batch or
/// training.grad_accum, the first swept of these), or -1 when none is swept.
int batch_axis(const Plan& plan);

} // namespace zerosim::sweep

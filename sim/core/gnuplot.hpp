// Drawing with gnuplot, for every command that draws (the sweep's plots, compare's scatter plot, `run --plots`): a
// script that draws its body as SVG and PNG, and running the gnuplot found on PATH on it. Each picture's data (.dat)
// and script (.gp) are written beside it by the caller, so a user can restyle and redraw it.
#pragma once

#include <filesystem>
#include <string>

namespace zerosim::core {

/// The gnuplot script that draws `body` (commands after the terminal is set) as NAME.svg, then NAME.png (900 x 600),
/// its paths relative to the folder it runs in. Its first line says it was written by `origin` (e.g. "zerosim sweep
/// (docs/sweep.md \"Plots\")") and how to redraw it.
std::string two_terminal_script(const std::string& name, const std::string& body, const std::string& origin);

/// `text` as a string of a gnuplot script or data file: in double quotes, a double quote inside made a single one.
std::string gnuplot_quoted(const std::string& text);

/// The gnuplot on PATH, or "" when there is none.
std::string find_gnuplot();

/// Runs `gnuplot` on `script` in `dir` (the scripts name their files relative to it); true when it exited 0. Its
/// output and errors go to `log`.
bool run_gnuplot(const std::string& gnuplot, const std::filesystem::path& dir, const std::string& script,
                 const std::filesystem::path& log);

/// Runs gnuplot (found on PATH) on DIR/NAME.gp in DIR: true when it drew; otherwise `notice` says why (no gnuplot,
/// or its error log DIR/NAME.log).
bool gnuplot_draw(const std::string& dir, const std::string& name, std::string& notice);

} // namespace zerosim::core

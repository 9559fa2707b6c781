#include "core/gnuplot.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <vector>

extern char** environ;

namespace zerosim::core {

namespace fs = std::filesystem;

std::string two_terminal_script(const std::string& name, const std::string& body, const std::string& origin)
{
  std::ostringstream s;
  s << "# Written by " << origin << "; redraw in this folder with: gnuplot " << name << ".gp\n"
    << "set terminal svg size 900,600 dynamic noenhanced font 'Helvetica,12' background rgb 'white'\n"
    << "set output '" << name << ".svg'\n"
    << body << "unset output\n"
    << "set terminal pngcairo size 900,600 noenhanced font 'Helvetica,11' background rgb 'white'\n"
    << "set output '" << name << ".png'\n"
    << body << "unset output\n";
  return s.str();
}

std::string gnuplot_quoted(const std::string& text)
{
  std::string q = "\"";
  for (char c : text)
    q += c == '"' ? '\'' : c;
  return q + "\"";
}

std::string find_gnuplot()
{
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const auto colon = dirs.find(':', start);
    const std::string d = dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    const fs::path candidate = fs::path(d.empty() ? "." : d) / "gnuplot";
    if (::access(candidate.c_str(), X_OK) == 0)
      return candidate.string();
    if (colon == std::string::npos)
      break;
    start = colon + 1;
  }
  return "";
}

bool run_gnuplot(const std::string& gnuplot, const fs::path& dir, const std::string& script, const fs::path& log)
{
  std::vector<std::string> args = {gnuplot, script};
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addchdir_np(&actions, dir.c_str()); // the scripts name their files relative to it
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, gnuplot.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    return false;
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

bool gnuplot_draw(const std::string& dir, const std::string& name, std::string& notice)
{
  const std::string gnuplot = find_gnuplot();
  if (gnuplot.empty()) {
    notice = "gnuplot not found: " + name + ".dat and " + name + ".gp are in " + dir + " (install gnuplot-nox)";
    return false;
  }
  const fs::path log = fs::absolute(fs::path(dir) / (name + ".log"));
  if (run_gnuplot(gnuplot, fs::path(dir), name + ".gp", log)) {
    fs::remove(log);
    return true;
  }
  notice = "gnuplot failed on " + name + " (" + log.string() + ")";
  return false;
}

} // namespace zerosim::core

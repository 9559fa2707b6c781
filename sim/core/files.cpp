#include "core/files.hpp"

#include "core/error.hpp"

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace zerosim::core {

namespace fs = std::filesystem;

namespace {

/// "WHAT: cannot DOING 'PATH': REASON" (built by appending: GCC 12 warns falsely on a chain of + at -O2).
[[noreturn]] void fail(const std::string& what, const char* doing, const std::string& path, const std::error_code& ec)
{
  std::string message = what;
  message += ": cannot ";
  message += doing;
  message += " '";
  message += path;
  message += "': ";
  message += ec.message();
  throw InputError(message);
}

/// The path's status; "not found" is an answer, any other failure an input error.
fs::file_status status_of(const std::string& path, const std::string& what)
{
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec && st.type() != fs::file_type::not_found)
    fail(what, "examine", path, ec);
  return st;
}

} // namespace

bool path_exists(const std::string& path, const std::string& what)
{
  return fs::exists(status_of(path, what));
}

bool is_regular_file(const std::string& path, const std::string& what)
{
  return fs::is_regular_file(status_of(path, what));
}

void create_directories(const std::string& dir, const std::string& what)
{
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    fail(what, "create the directory", dir, ec);
}

std::string new_output_dir(const std::string& base, const std::string& what)
{
  constexpr int MOST = 100000; // base-2 .. base-100000: past that, something is wrong with the folder
  for (int n = 1; n <= MOST; ++n) {
    const std::string dir = n == 1 ? base : base + "-" + std::to_string(n);
    std::error_code ec;
    if (fs::create_directory(dir, ec))
      return dir;
    if (ec && ec != std::errc::file_exists)
      fail(what, "create the directory", dir, ec);
    // The name is taken (by a folder, a file or anything else): the next one.
  }
  std::string message = what;
  message += ": ";
  message += base;
  message += " and its numbered names up to -";
  message += std::to_string(MOST);
  message += " all exist: give --out DIR";
  throw InputError(message);
}

std::string output_dir(const std::string& out, const std::string& stem, const std::string& command)
{
  if (out.empty())
    return new_output_dir(stem + "." + command, command);
  create_directories(out, command + ": --out");
  return out;
}

void write_file(const fs::path& path, const std::string& text)
{
  const std::string tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!(f << text) || !f.flush())
      fail("zerosim", "write", tmp, std::error_code(errno, std::generic_category()));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    fail("zerosim", "write", path.string(), ec);
}

} // namespace zerosim::core

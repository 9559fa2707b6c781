#include "core/huge_pages.hpp"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include <unistd.h>

namespace zerosim::core {

namespace {

constexpr const char* TUNABLE = "glibc.malloc.hugetlb";

/// Whether the kernel gives transparent huge pages to memory advised for them: its mode is "[always]" or
/// "[madvise]", not "[never]" (Documentation/admin-guide/mm/transhuge.rst).
bool huge_pages_on_request()
{
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(f, mode);
  return mode.find("[always]") != std::string::npos || mode.find("[madvise]") != std::string::npos;
}

} // namespace

void rerun_with_huge_page_heap(char** argv)
{
  const char* opt_out = std::getenv("ZEROSIM_HUGE_PAGES");
  if (opt_out != nullptr && std::strcmp(opt_out, "0") == 0)
    return;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, TUNABLE) != nullptr)
    return; // already set (by the run before, or by the user): never again
  if (!huge_pages_on_request())
    return;
  std::string value = tunables != nullptr && *tunables != '\0' ? std::string(tunables) + ":" : std::string();
  value += std::string(TUNABLE) + "=1";
  if (setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0)
    return;
  execv("/proc/self/exe", argv); // returns only on failure: go on as we are
}

} // namespace zerosim::core

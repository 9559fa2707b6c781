#include "core/bytes.hpp"

#include "core/text.hpp"

#include <cmath>
#include <cstdio>

namespace zerosim::core {

std::string format_gib(std::int64_t bytes)
{
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::fabs(v) >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

std::string format_bytes(std::int64_t bytes)
{
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.2f GB (%s)", static_cast<double>(bytes) / 1e9, format_gib(bytes).c_str());
  return buf;
}

std::string format_in_gib(double bytes, int decimals)
{
  return format_fixed(bytes / GIB, decimals) + " GiB";
}

} // namespace zerosim::core

// A leak planted in zerosim's own code, for `tools/dev.sh sanitize` (tests/CMakeLists.txt): LeakSanitizer must report
// it although tools/sanitize/lsan.supp is in force. The suppressions name libraries (OpenMPI's), never zerosim, and
// this test fails if one ever hides zerosim's own leaks, as the layer check's fixture fails on a bad include.
#include <cstdio>
#include <string>

namespace zerosim::sanitize_fixture {

/// Allocates a string and drops the only pointer to it: a direct leak.
[[gnu::noinline]] void plant_leak()
{
  auto* lost = new std::string(64, 'x');
  std::printf("planted %zu bytes\n", lost->size());
  lost = nullptr;
}

} // namespace zerosim::sanitize_fixture

int main()
{
  zerosim::sanitize_fixture::plant_leak();
  return 0;
}

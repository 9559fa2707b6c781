// A leak planted in zerosim's own code, for `tools/dev.sh sanitize` (tests/CMakeLists.txt): LeakSanitizer must report
// it although tools/sanitize/lsan.supp is in force. The suppressions name libraries (OpenMPI's), never zerosim, and
// this test fails if one ever hides zerosim's own leaks, as the layer check's fixture fails on a bad include.
#include <cstdio>
#include <string>

namespace zerosim::sanitize_fixture {

/// The only pointer to the planted allocation, dropped by forget().
std::string* planted = nullptr;

/// Allocates a string into `planted`, with no local copy of the pointer (LeakSanitizer scans stacks conservatively:
/// a copy left in a stack frame, or in AddressSanitizer's fake frames under detect_stack_use_after_return, would make
/// the leak look reachable).
[[gnu::noinline]] void plant()
{
  planted = new std::string(64, 'x');
}

/// Drops the pointer: the string becomes a direct leak.
[[gnu::noinline]] void forget()
{
  std::printf("planted %zu bytes\n", planted->size());
  planted = nullptr;
}

} // namespace zerosim::sanitize_fixture

int main()
{
  zerosim::sanitize_fixture::plant();
  zerosim::sanitize_fixture::forget();
  return 0;
}

// The heap on transparent huge pages. zerosim builds and frees many small objects (task graphs, SimGrid's
// activities, the allocator replay); on a virtual machine each 4 KiB page the heap first touches costs a page
// fault of several microseconds, which was a third of a 70B ZeRO-3 run on 512 nodes (docs/benchmarks.md "Huge
// pages"). glibc's malloc advises its heap onto transparent huge pages when the tunable glibc.malloc.hugetlb=1 is
// set, and glibc reads tunables only when a process starts.
#pragma once

namespace zerosim::core {

/// Runs this program again, once, with glibc.malloc.hugetlb=1 added to GLIBC_TUNABLES, when the kernel offers
/// transparent huge pages on request (/sys/kernel/mm/transparent_hugepage/enabled is "always" or "madvise") and
/// neither GLIBC_TUNABLES already names that tunable nor ZEROSIM_HUGE_PAGES=0 is set. Returns without doing anything
/// otherwise, or when the program cannot be run again (the run goes on with the default heap). `argv` as main's.
/// The answer is the same either way: only the time the heap takes changes.
void rerun_with_huge_page_heap(char** argv);

} // namespace zerosim::core

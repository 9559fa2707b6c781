// A reader for the tables that NVIDIA's nccl-tests binaries (all_reduce_perf, all_gather_perf, reduce_scatter_perf,
// broadcast_perf, reduce_perf, alltoall_perf, sendrecv_perf) print: one row per buffer size with the out-of-place
// and in-place time, algorithm bandwidth and bus bandwidth. Format and checks: docs/calibration-nccl-tests.md.
// No YAML, no SimGrid.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zerosim::calibration {

/// The collectives nccl-tests measures that this reader knows.
enum class NcclCollective { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, BROADCAST, REDUCE, ALL_TO_ALL, SEND_RECV };

/// nccl-tests' name of the collective, the binary's name without "_perf": "all_reduce", "all_gather",
/// "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv".
std::string to_string(NcclCollective collective);

/// The collective named `name`: nccl-tests' name ("all_reduce"), the binary's ("all_reduce_perf") or the MPI
/// build's ("all_reduce_perf_mpi"); nullopt for anything else.
std::optional<NcclCollective> parse_nccl_collective(std::string_view name);

/// Every collective, in declaration order (the order messages list them in).
const std::vector<NcclCollective>& all_nccl_collectives();

/// busbw / algbw as nccl-tests computes it for `ranks` ranks (src/*.cu, the *GetBw functions; doc/PERFORMANCE.md):
/// 2(n-1)/n for all-reduce; (n-1)/n for all-gather, reduce-scatter and all-to-all; 1 for broadcast, reduce and
/// send/receive. Throws core::InternalError for ranks < 1.
double busbw_factor(NcclCollective collective, int ranks);

/// True when the table's "count" column is the count per rank, so that size = count x element size x ranks
/// (all-gather, reduce-scatter, all-to-all); false when size = count x element size.
bool count_is_per_rank(NcclCollective collective);

/// Bytes per element of an nccl-tests type name ("int8", "uint8", "char", "int32", "int", "uint32", "int64",
/// "uint64", "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"); nullopt for a name it does not know.
std::optional<int> nccl_type_size(std::string_view type);

/// How the reader decided which collective a table measures.
enum class CollectiveSource {
  BINARY_NAME, ///< the text names the binary: "# Collective test starting: all_reduce_perf" or a command line
  HINT,        ///< the caller said so, and the text names no binary
  INFERRED     ///< from the columns and values (see docs/calibration-nccl-tests.md, "Which collective")
};

/// "binary name", "hint", "inferred".
std::string to_string(CollectiveSource source);

/// One data row: the buffer size and the out-of-place and in-place measurements.
struct NcclTestsRow {
  std::int64_t size_bytes = 0;         ///< "size": the larger of the send and receive buffers, bytes
  std::int64_t count = 0;              ///< "count": elements (per rank for count_is_per_rank collectives)
  std::string type;                    ///< "type": "float", "bfloat16", ...
  std::string redop;                   ///< "redop": "sum", "none", ...; "" when the table has no redop column
  int root = -1;                       ///< "root": -1 when the table has no root column or the collective has no root
  double oop_time_us = 0;              ///< out-of-place time (or CPU time, NcclTestsTable::cputime), microseconds
  double oop_algbw_GBps = 0;           ///< out-of-place algorithm bandwidth, 10^9 bytes/s
  double oop_busbw_GBps = 0;           ///< out-of-place bus bandwidth, 10^9 bytes/s
  std::optional<double> oop_wrong;     ///< out-of-place "#wrong" (or old "error") value; nullopt for "N/A"
  std::optional<double> ip_time_us;    ///< in-place time; nullopt when the table has no in-place columns
  std::optional<double> ip_algbw_GBps; ///< in-place algorithm bandwidth
  std::optional<double> ip_busbw_GBps; ///< in-place bus bandwidth
  std::optional<double> ip_wrong;      ///< in-place "#wrong"; nullopt for "N/A" or no in-place columns
  int line = 0;                        ///< 1-based line of the text
};

/// One nccl-tests table.
struct NcclTestsTable {
  std::string file; ///< as named to the reader
  NcclCollective collective = NcclCollective::ALL_REDUCE;
  CollectiveSource collective_source = CollectiveSource::INFERRED;
  int ranks = 0;        ///< ranks of rank 0's group in the "Rank N Group G Pid P on HOST device D" lines; 0 if none
  int nodes = 0;        ///< distinct hosts among those lines; 0 if none
  bool cputime = false; ///< the time columns are "cputime" (nccl-tests -C 1), not "time"
  int header_line = 0;  ///< line of the column header ("size count type ...")
  std::vector<NcclTestsRow> rows;
  std::optional<double> avg_busbw_GBps; ///< "# Avg bus bandwidth : X", when present
};

/// Parses the nccl-tests output in `text`; `file` names it in messages. The collective comes from the binary's
/// name when the text holds it, else it is inferred from the columns and values. Throws core::InputError naming
/// file and line, what was expected and what was found, for text that holds no nccl-tests table, a malformed
/// column header or data row, a second table, conflicting binary names, a collective it cannot tell, and a row
/// whose numbers contradict nccl-tests' definitions (algbw = size / time; busbw = algbw x busbw_factor).
NcclTestsTable parse_nccl_tests(std::string_view text, const std::string& file);

/// As above; `hint` is the collective the caller knows the table measures. Used when the text names no binary;
/// a text naming another binary than the hint is an error.
NcclTestsTable parse_nccl_tests(std::string_view text, const std::string& file, std::optional<NcclCollective> hint);

/// Reads and parses the nccl-tests output at `path` (messages name `path`). Throws core::InputError for a file
/// that cannot be read.
NcclTestsTable read_nccl_tests(const std::string& path, std::optional<NcclCollective> hint = std::nullopt);

} // namespace zerosim::calibration

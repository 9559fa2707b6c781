#pragma once
// The FSDP names each torch release read accepts: data/torch_fsdp_arguments.csv, written by
// tools/torch_fsdp_arguments.py from torch's own files of each release (Debian's python3-torch packages), with
// FullyShardedDataParallel.__init__'s and fully_shard's parameters, ShardingStrategy's members, CPUOffload's and
// CPUOffloadPolicy's fields and the names torch.distributed.fsdp exports (docs/recommend.md "Which FSDP arguments
// fsdp_settings.py holds").
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace zerosim::config {

struct TorchFsdpArgument {
  std::string default_text; ///< the default as written in torch's source ("True", "OffloadPolicy()"), or empty
  std::string source;       ///< file:line in the release
};

/// A name zerosim writes: a callable (or module) and its argument (or member, field, exported name).
using TorchFsdpName = std::pair<std::string, std::string>;

struct TorchFsdpVersion {
  std::string version; ///< "2.6"
  std::string release; ///< "v2.6.0"
  std::string origin;  ///< where the files were read ("Debian python3-torch 2.6.0+dfsg-7 amd64 sha256 ...")
  std::map<TorchFsdpName, TorchFsdpArgument> arguments;
  bool has(const TorchFsdpName& n) const { return arguments.count(n) != 0; }
};

struct TorchFsdpTable {
  std::string file;
  std::string script_sha256;                        ///< the header's hash of the script that wrote the table
  std::map<std::string, TorchFsdpVersion> versions; ///< "1.13", "2.14", "2.6"
  /// The release read that stands for `torch` (software.torch, "major.minor"): the nearest at or below it; nullptr
  /// when `torch` is older than every release read.
  const TorchFsdpVersion* for_torch(const std::string& torch) const;
  /// The versions read in ascending order, comma-separated ("1.13, 2.6, 2.14").
  std::string listed() const;
};

/// The table in `file` (CSV with '#' comment lines, the header "version,release,origin,callable,argument,default,
/// source"). A malformed table is an input error naming the file and line.
TorchFsdpTable read_torch_fsdp_table(const std::string& file);

/// The shipped table, data/torch_fsdp_arguments.csv under the data folder, read once.
const TorchFsdpTable& torch_fsdp_table();

/// Throws core::InputError unless every name of `used` is in the release `table` reads for `torch`: the first one
/// missing is named with the release, the table and `what` (the file being written and the scenario); a `torch`
/// older than every release read is refused likewise.
void check_torch_fsdp_names(const TorchFsdpTable& table, const std::vector<TorchFsdpName>& used,
                            const std::string& torch, const std::string& what);

} // namespace zerosim::config

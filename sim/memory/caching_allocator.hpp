// PyTorch's CUDA caching allocator as it behaves (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator),
// replayed over a rank's allocation events: what `torch.cuda.max_memory_reserved()` reports is the peak of the
// segments it holds. docs/memory.md §2.1 gives the mechanism, the constants and where each is in PyTorch.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <vector>

namespace zerosim::memory {

// ---- PyTorch's constants (c10/cuda/CUDACachingAllocator.cpp, namespace c10::cuda::CUDACachingAllocator) ----

/// kMinBlockSize = 512: "all sizes are rounded to at least 512 bytes" (round_size).
inline constexpr std::int64_t ALLOCATOR_BLOCK_BYTES = 512;
/// kSmallSize = 1048576: "largest 'small' allocation is 1 MiB" (get_pool: size <= kSmallSize -> small pool).
inline constexpr std::int64_t ALLOCATOR_SMALL_SIZE_BYTES = 1024 * 1024;
/// kSmallBuffer = 2097152: "'small' allocations are packed in 2 MiB blocks" (get_allocation_size).
inline constexpr std::int64_t ALLOCATOR_SMALL_BUFFER_BYTES = 2 * 1024 * 1024;
/// kLargeBuffer = 20971520: "'large' allocations may be packed in 20 MiB blocks" (get_allocation_size, requests
/// between kSmallSize and kMinLargeAlloc).
inline constexpr std::int64_t ALLOCATOR_LARGE_BUFFER_BYTES = 20 * 1024 * 1024;
/// kMinLargeAlloc = 10485760: "allocations between 1 and 10 MiB may use kLargeBuffer"; at or above it a request gets a
/// segment of its own rounded up to kRoundLarge.
inline constexpr std::int64_t ALLOCATOR_LARGE_ALLOC_BYTES = 10 * 1024 * 1024;
/// kRoundLarge = 2097152: "round up large allocations to 2 MiB" (get_allocation_size).
inline constexpr std::int64_t ALLOCATOR_ROUND_LARGE_BYTES = 2 * 1024 * 1024;

/// round_size(n): n rounded up to a multiple of kMinBlockSize (at least kMinBlockSize). With the default
/// configuration (no roundup_power2_divisions) this is the size of the block a request occupies before splitting.
std::int64_t allocator_round_size(std::int64_t bytes);
/// get_allocation_size(size): the segment cudaMalloc'ed for a rounded request that no cached block serves:
/// kSmallBuffer (size <= kSmallSize), kLargeBuffer (size < kMinLargeAlloc), else size rounded up to kRoundLarge.
std::int64_t allocator_segment_bytes(std::int64_t rounded_bytes);

/// One device's caching allocator with the default configuration (PYTORCH_CUDA_ALLOC_CONF unset: max_split_size
/// unlimited, expandable_segments off, no garbage_collection_threshold, no roundup_power2_divisions):
///  * malloc: round the request (allocator_round_size); take the smallest cached free block of the request's pool
///    (small: <= 1 MiB, large: above) and stream that is large enough, ties by address (get_free_block,
///    BlockComparatorSize); else cudaMalloc a segment of allocator_segment_bytes (alloc_block); when the device
///    has no room for it, free every cached block that is a whole segment (release_cached_blocks) and retry; when
///    that fails too it is an out-of-memory (counted, and the segment is taken anyway so that a replay can go on
///    and report by how much the device is short);
///  * the block found is split when the rest is worth keeping (should_split: small pool, rest >= 512 B; large
///    pool, rest > 1 MiB); the rest stays cached in the pool, on the same stream;
///  * free: the block returns to its pool on the stream it was allocated on and merges with free neighbours of
///    its segment (free_block, try_merge_blocks); nothing is returned to the driver.
///  * free with stream uses (record_stream): the allocated count drops at once, but the block stays out of the pool
///    until the event recorded on the other stream completes (insert_events, process_events); a replay at simulated
///    times says when (release). Before freeing cached segments for room, every pending block is returned
///    (synchronize_and_free_events in release_cached_blocks: the device is synchronised first).
/// Not modelled: CUDA graph private pools, expandable segments.
class CachingAllocator {
public:
  /// `device_limit_bytes`: what cudaMalloc can hand out in all (the device less the CUDA context and NCCL).
  explicit CachingAllocator(std::int64_t device_limit_bytes);

  /// Allocates `bytes` (> 0) on `stream`; returns the block's handle.
  int malloc(std::int64_t bytes, int stream);
  /// Frees a block that malloc returned and that is allocated, back into its pool at once.
  void free(int handle);
  /// Frees a block that another stream still uses (record_stream): the allocated count drops now, the block returns
  /// to its pool at release(token). Returns the token.
  int free_deferred(int handle);
  /// The other stream's work on a block freed with free_deferred is done: the block returns to its pool. A token
  /// already settled (a synchronisation for room returned the block earlier) is ignored.
  void release(int token);
  std::int64_t pending() const { return pending_bytes_; } ///< bytes freed but awaiting their stream's events

  std::int64_t reserved() const { return reserved_; }           ///< bytes in segments (reserved_bytes.all.current)
  std::int64_t peak_reserved() const { return peak_reserved_; } ///< reserved_bytes.all.peak
  std::int64_t allocated() const { return allocated_; }         ///< bytes in allocated blocks (allocated_bytes)
  std::int64_t peak_allocated() const { return peak_allocated_; }
  int segments() const { return segments_; }
  int alloc_retries() const { return retries_; } ///< release_cached_blocks calls (num_alloc_retries)
  int ooms() const { return ooms_; }             ///< segments taken beyond the device limit (num_ooms)
  /// reset_peak_memory_stats(): the peaks restart from the current values.
  void reset_peaks();

private:
  struct Block {
    std::int64_t address = 0;
    std::int64_t size = 0;
    int stream = 0;
    bool small = false;
    bool allocated = false;
    bool pending = false; ///< freed, awaiting another stream's event (not in the pool, not mergeable)
    bool dead = false;    ///< merged into a neighbour or released to the driver
    int prev = -1;        ///< neighbour in the segment (lower address)
    int next = -1;        ///< neighbour in the segment (higher address)
  };
  /// Free-block order of a pool: (small, stream, size, address) as BlockComparatorSize, then the handle.
  using Key = std::tuple<bool, int, std::int64_t, std::int64_t, int>;

  Key key(int h) const;
  void insert_free(int h);
  void erase_free(int h);
  int find_free(bool small, int stream, std::int64_t size) const;
  int new_segment(bool small, int stream, std::int64_t size);
  void release_cached_blocks();
  void check_allocated(int handle) const;
  void free_block(int handle);

  std::int64_t limit_;
  std::vector<Block> blocks_;
  std::set<Key> free_;
  std::map<int, int> pending_; ///< token -> block freed with free_deferred and not yet released
  int next_token_ = 0;
  std::int64_t pending_bytes_ = 0;
  std::int64_t next_address_ = 0;
  std::int64_t reserved_ = 0, peak_reserved_ = 0;
  std::int64_t allocated_ = 0, peak_allocated_ = 0;
  int segments_ = 0, retries_ = 0, ooms_ = 0;
};

} // namespace zerosim::memory

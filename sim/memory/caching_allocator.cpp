#include "memory/caching_allocator.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <string>

namespace zerosim::memory {

namespace {

std::int64_t round_up(std::int64_t bytes, std::int64_t unit)
{
  return (bytes + unit - 1) / unit * unit;
}

} // namespace

std::int64_t allocator_round_size(std::int64_t bytes)
{
  return std::max(ALLOCATOR_BLOCK_BYTES, round_up(bytes, ALLOCATOR_BLOCK_BYTES));
}

std::int64_t allocator_segment_bytes(std::int64_t rounded_bytes)
{
  if (rounded_bytes <= ALLOCATOR_SMALL_SIZE_BYTES)
    return ALLOCATOR_SMALL_BUFFER_BYTES;
  if (rounded_bytes < ALLOCATOR_LARGE_ALLOC_BYTES)
    return ALLOCATOR_LARGE_BUFFER_BYTES;
  return round_up(rounded_bytes, ALLOCATOR_ROUND_LARGE_BYTES);
}

CachingAllocator::CachingAllocator(std::int64_t device_limit_bytes) : limit_(device_limit_bytes) {}

CachingAllocator::Key CachingAllocator::key(int h) const
{
  const Block& b = blocks_[static_cast<size_t>(h)];
  return {b.small, b.stream, b.size, b.address, h};
}

void CachingAllocator::insert_free(int h)
{
  free_.insert(key(h));
}

void CachingAllocator::erase_free(int h)
{
  free_.erase(key(h));
}

int CachingAllocator::find_free(bool small, int stream, std::int64_t size) const
{
  // get_free_block: pool.blocks.lower_bound(search key) in (stream, size, address) order; a block of another
  // stream (or pool) at the bound means none of this stream is large enough.
  auto it = free_.lower_bound(Key{small, stream, size, 0, -1});
  if (it == free_.end() || std::get<0>(*it) != small || std::get<1>(*it) != stream)
    return -1;
  return std::get<4>(*it);
}

int CachingAllocator::new_segment(bool small, int stream, std::int64_t size)
{
  Block b;
  b.address = next_address_;
  b.size = size;
  b.stream = stream;
  b.small = small;
  next_address_ += size;
  blocks_.push_back(b);
  reserved_ += size;
  peak_reserved_ = std::max(peak_reserved_, reserved_);
  ++segments_;
  return static_cast<int>(blocks_.size() - 1);
}

void CachingAllocator::release_cached_blocks()
{
  // synchronize_and_free_events: the device is synchronised, so every block awaiting another stream's event returns
  // to its pool first. Then every cached block that is a whole segment (not split) goes back to the driver
  // (release_blocks on the large and the small pool); split segments stay.
  ++retries_;
  while (!pending_.empty())
    release(pending_.begin()->first);
  for (auto it = free_.begin(); it != free_.end();) {
    Block& b = blocks_[static_cast<size_t>(std::get<4>(*it))];
    if (b.prev < 0 && b.next < 0) {
      reserved_ -= b.size;
      --segments_;
      b.dead = true;
      it = free_.erase(it);
    } else {
      ++it;
    }
  }
}

int CachingAllocator::malloc(std::int64_t bytes, int stream)
{
  if (bytes <= 0)
    throw core::InternalError("caching allocator: a request of " + std::to_string(bytes) + " bytes");
  const std::int64_t size = allocator_round_size(bytes);
  const bool small = size <= ALLOCATOR_SMALL_SIZE_BYTES;
  int h = find_free(small, stream, size);
  if (h >= 0) {
    erase_free(h);
  } else {
    const std::int64_t segment = allocator_segment_bytes(size);
    if (reserved_ + segment > limit_) {
      release_cached_blocks();
      if (reserved_ + segment > limit_)
        ++ooms_;
    }
    h = new_segment(small, stream, segment);
  }
  // alloc_found_block: split off the rest when should_split says it is worth keeping.
  const std::int64_t remaining = blocks_[static_cast<size_t>(h)].size - size;
  if (small ? remaining >= ALLOCATOR_BLOCK_BYTES : remaining > ALLOCATOR_SMALL_SIZE_BYTES) {
    Block rest = blocks_[static_cast<size_t>(h)];
    rest.address += size;
    rest.size = remaining;
    rest.prev = h;
    rest.allocated = false;
    blocks_.push_back(rest);
    const int r = static_cast<int>(blocks_.size() - 1);
    Block& b = blocks_[static_cast<size_t>(h)];
    if (b.next >= 0)
      blocks_[static_cast<size_t>(b.next)].prev = r;
    b.next = r;
    b.size = size;
    insert_free(r);
  }
  Block& b = blocks_[static_cast<size_t>(h)];
  b.allocated = true;
  allocated_ += b.size;
  peak_allocated_ = std::max(peak_allocated_, allocated_);
  return h;
}

void CachingAllocator::check_allocated(int handle) const
{
  if (handle < 0 || handle >= static_cast<int>(blocks_.size()) || !blocks_[static_cast<size_t>(handle)].allocated ||
      blocks_[static_cast<size_t>(handle)].dead)
    throw core::InternalError("caching allocator: free of a block that is not allocated");
}

void CachingAllocator::free(int handle)
{
  check_allocated(handle);
  Block& b = blocks_[static_cast<size_t>(handle)];
  b.allocated = false;
  allocated_ -= b.size;
  free_block(handle);
}

int CachingAllocator::free_deferred(int handle)
{
  check_allocated(handle);
  Block& b = blocks_[static_cast<size_t>(handle)];
  b.allocated = false;
  b.pending = true;
  allocated_ -= b.size;
  pending_bytes_ += b.size;
  const int token = next_token_++;
  pending_.emplace(token, handle);
  return token;
}

void CachingAllocator::release(int token)
{
  const auto it = pending_.find(token);
  if (it == pending_.end())
    return;
  const int handle = it->second;
  pending_.erase(it);
  Block& b = blocks_[static_cast<size_t>(handle)];
  b.pending = false;
  pending_bytes_ -= b.size;
  free_block(handle);
}

void CachingAllocator::free_block(int handle)
{
  // free_block: merge with the free neighbours of the segment (try_merge_blocks), then cache the block. A neighbour
  // allocated or awaiting another stream's event is not free.
  for (int side : {blocks_[static_cast<size_t>(handle)].prev, blocks_[static_cast<size_t>(handle)].next}) {
    if (side < 0)
      continue;
    Block& n = blocks_[static_cast<size_t>(side)];
    if (n.allocated || n.pending)
      continue;
    erase_free(side);
    Block& d = blocks_[static_cast<size_t>(handle)];
    if (side == d.prev) { // [n d]
      d.address = n.address;
      d.prev = n.prev;
      if (d.prev >= 0)
        blocks_[static_cast<size_t>(d.prev)].next = handle;
    } else { // [d n]
      d.next = n.next;
      if (d.next >= 0)
        blocks_[static_cast<size_t>(d.next)].prev = handle;
    }
    d.size += n.size;
    n.dead = true;
  }
  insert_free(handle);
}

void CachingAllocator::reset_peaks()
{
  peak_reserved_ = reserved_;
  peak_allocated_ = allocated_;
}

} // namespace zerosim::memory

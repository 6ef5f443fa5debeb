// A memory resource that keeps the blocks freed into it for the next allocation of the same size. Node containers
// rebuilt for every batch (the reference planner's page map and page set) then stop calling malloc once warm: with
// glibc, their hundreds of same-size frees at once overflow the per-thread cache, and the next batch's allocations
// miss it (tools/bench/tcache_sim.c counted half of `replay --backend ref`'s misses there).
#ifndef KVSHARD_CORE_RECYCLING_RESOURCE_H_
#define KVSHARD_CORE_RECYCLING_RESOURCE_H_

#include <cstddef>
#include <memory_resource>
#include <vector>

namespace kvshard {

// Not thread-safe: one owner's containers. Its blocks go back to the heap when it is destroyed, so the containers
// using it must go first. Blocks are recycled last freed, first reused, per (size, alignment).
class RecyclingResource final : public std::pmr::memory_resource {
 public:
  RecyclingResource() = default;
  RecyclingResource(const RecyclingResource&) = delete;
  RecyclingResource& operator=(const RecyclingResource&) = delete;
  ~RecyclingResource() override;

  // Blocks freed into it and not yet reused (for tests).
  size_t free_blocks() const;

 private:
  struct FreeBlock {
    FreeBlock* next;
  };
  // The free blocks of one size and alignment (a container has one or two node sizes, so a short list).
  struct SizeClass {
    size_t bytes = 0, align = 0;
    FreeBlock* head = nullptr;
  };
  SizeClass& ClassOf(size_t bytes, size_t align);
  void* do_allocate(size_t bytes, size_t align) override;
  void do_deallocate(void* p, size_t bytes, size_t align) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

  std::vector<SizeClass> classes_;
};

}  // namespace kvshard

#endif  // KVSHARD_CORE_RECYCLING_RESOURCE_H_

// RecyclingResource: a free list per block size, over ::operator new.
#include "core/recycling_resource.h"

#include <algorithm>
#include <new>

namespace kvshard {
namespace {

// Every block holds a free-list link once freed.
size_t BlockBytes(size_t bytes) { return std::max(bytes, sizeof(void*)); }

void* NewBlock(size_t bytes, size_t align) {
  if (align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) return ::operator new(bytes);
  return ::operator new(bytes, std::align_val_t(align));
}

// Unsized: the blocks are deleted only when the resource goes, so a sized delete would save little, and clang before
// 19 (the fuzz build's) has none unless -fsized-deallocation is given.
void DeleteBlock(void* p, size_t align) {
  if (align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
    ::operator delete(p);
  } else {
    ::operator delete(p, std::align_val_t(align));
  }
}

}  // namespace

RecyclingResource::~RecyclingResource() {
  for (SizeClass& c : classes_) {
    while (c.head != nullptr) {
      FreeBlock* next = c.head->next;
      DeleteBlock(c.head, std::max(c.align, alignof(FreeBlock)));  // as NewBlock had it
      c.head = next;
    }
  }
}

size_t RecyclingResource::free_blocks() const {
  size_t n = 0;
  for (const SizeClass& c : classes_) {
    for (const FreeBlock* b = c.head; b != nullptr; b = b->next) ++n;
  }
  return n;
}

RecyclingResource::SizeClass& RecyclingResource::ClassOf(size_t bytes, size_t align) {
  for (SizeClass& c : classes_) {
    if (c.bytes == bytes && c.align == align) return c;
  }
  classes_.push_back({bytes, align, nullptr});
  return classes_.back();
}

void* RecyclingResource::do_allocate(size_t bytes, size_t align) {
  bytes = BlockBytes(bytes);
  SizeClass& c = ClassOf(bytes, align);
  if (c.head == nullptr) return NewBlock(bytes, std::max(align, alignof(FreeBlock)));
  FreeBlock* b = c.head;
  c.head = b->next;
  return b;
}

void RecyclingResource::do_deallocate(void* p, size_t bytes, size_t align) {
  SizeClass& c = ClassOf(BlockBytes(bytes), align);
  FreeBlock* b = ::new (p) FreeBlock{c.head};
  c.head = b;
}

}  // namespace kvshard

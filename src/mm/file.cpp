// File lifetime: the page cache is released when the last reference to a
// File goes (truncate_inode_pages_final on inode eviction).
#include "mm/file.h"

#include <utility>
#include <vector>

#include "mm/filemap.h"
#include "mm/hugetlb.h"
#include "trace/trace.h"

namespace mmlab {

File::File() = default;

File::~File() {
  // Nothing maps the file any more (every VMA held a reference), so no PTE
  // points at these folios; a folio pinned by GUP outlives the cache on its
  // pin references, no longer in any page cache. hugetlbfs evicts its own
  // cache, giving back the reservations of the pages it frees.
  if (hstate) hugetlb_evict_inode(this);
  shmem_evict_swap(this);  // shmem_evict_inode: the slots of swapped-out pages
  std::map<uint64_t, Folio*> cache;
  {
    MutexGuard g(&lock);
    cache.swap(pages);
  }
  for (auto& [index, folio] : cache) {
    MM_TRACE("mm_filemap_delete_from_page_cache", "pfn={:#x} ofs={} order={}", folio_pfn(folio), index,
             folio_order(folio));
    aref(folio->page.mapping).store(0, std::memory_order_release);  // delete_from_page_cache
    folio_put_refs(folio, static_cast<int>(folio_nr_pages(folio)));
  }
}

Folio* filemap_lookup(File* f, uint64_t index) REQUIRES(f->lock) {
  auto it = f->pages.upper_bound(index);
  if (it == f->pages.begin()) return nullptr;
  --it;
  Folio* folio = it->second;
  if (index >= it->first + static_cast<uint64_t>(folio_nr_pages(folio))) return nullptr;
  return folio;
}

FileTable::FileTable() = default;

FileTable::~FileTable() {
  // Destroy the files outside the lock: ~File may free folios, and a file
  // must never be destroyed while the table's lock is held.
  std::map<int, std::shared_ptr<File>> gone;
  {
    MutexGuard g(&lock);
    gone.swap(files);
  }
  gone.clear();
}

}  // namespace mmlab

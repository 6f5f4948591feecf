// The anon_vma half of mm/rmap.c (include/linux/rmap.h): attaching,
// cloning, unlinking and reference-counting anon_vmas. Defined in
// mm/anon_vma.cpp.
#pragma once

#include "pgtable/mm_types.h"

namespace mmlab {

// Attach an anon_vma to vma if it has none (anon_vma_prepare). Returns 0 or -ENOMEM.
[[nodiscard]] int anon_vma_prepare(Vma* vma);

// Link a new VMA (split or copy) into every anon_vma of src (anon_vma_clone).
void anon_vma_clone(Vma* dst, const Vma* src);

// Unlink vma from its anon_vmas, freeing ones that become unused (unlink_anon_vmas).
void unlink_anon_vmas(Vma* vma);

// anon_vma references beyond the VMA links (an rmap walker that must keep
// one alive after dropping its lock). put_anon_vma frees it at zero.
void get_anon_vma(AnonVma* av);

void put_anon_vma(AnonVma* av);

}  // namespace mmlab

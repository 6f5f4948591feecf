// The named TLB geometries of `tune tlb.geometry`, each capacity with its
// source. The model keeps the data TLBs (L1 dTLB and the unified L2), set
// associative with LRU replacement within a set; docs/TLB.md says what it
// leaves out.
#include "tlb/tlb.h"

namespace mmlab {
namespace {

constexpr uint8_t k4K = tlb_size_bit(kTlb4K), k16K = tlb_size_bit(kTlb16K), k64K = tlb_size_bit(kTlb64K);
constexpr uint8_t k2M = tlb_size_bit(kTlb2M), k1G = tlb_size_bit(kTlb1G);

// Intel Skylake (client and server core): Intel 64 and IA-32 Architectures
// Optimization Reference Manual, "TLB Parameters of the Skylake
// Microarchitecture" table (also Agner Fog, "The microarchitecture of Intel,
// AMD and VIA CPUs", Skylake chapter):
//   DTLB  4K: 64 entries, 4-way; 2M/4M: 32 entries, 4-way; 1G: 4 entries, 4-way (fully associative)
//   STLB  4K and 2M shared: 1536 entries, 12-way; 1G: 16 entries, 4-way
// Intel has no PTE coalescing.
constexpr TlbGeometryDesc kSkylake = {
    "x86-intel",
    "Intel Skylake",
    {{{64, 4, k4K}, {32, 4, k2M}, {4, 4, k1G}}, 3},
    {{{1536, 12, static_cast<uint8_t>(k4K | k2M)}, {16, 4, k1G}}, 2},
    false,
    false,
};

// AMD Zen 4: Software Optimization Guide for AMD Family 19h Processors
// (pub. 57647), "Translation Lookaside Buffer" sections, and Chips and
// Cheese, "AMD's Zen 4 Part 2: Memory Subsystem and Conclusion":
//   L1 DTLB: 72 entries, fully associative, 4K, 16K (coalesced), 2M and 1G
//   L2 DTLB: 3072 entries, 24-way, 4K, 16K (coalesced) and 2M; a 1G page is
//            held there smashed into the 2M entry of the accessed 2M
// PTE coalescing (since Zen 1): four 4K PTEs that are virtually and
// physically contiguous, 16K aligned, with the same attributes fill one 16K
// entry. Modelled: a fill of a 4K translation reads the aligned group of
// four PTEs around it.
constexpr TlbGeometryDesc kZen4 = {
    "x86-amd",
    "AMD Zen 4",
    {{{72, 72, static_cast<uint8_t>(k4K | k16K | k2M | k1G)}}, 1},
    {{{3072, 24, static_cast<uint8_t>(k4K | k16K | k2M)}}, 1},
    true,
    false,
};

// Arm Neoverse N1 (= Cortex-A76's MMU): Arm Neoverse N1 Core Technical
// Reference Manual (100616), "Memory Management Unit" chapter, "TLB
// organization":
//   L1 data TLB: 48 entries, fully associative, every page and block size
//   L2 TLB: 1280 entries, 5-way, every page and block size
// A block of 16 contiguous 4K PTEs with the contiguous bit set is cached as
// one 64K entry (the reach that arm64's contpte folding buys).
constexpr TlbGeometryDesc kNeoverseN1 = {
    "arm64",
    "Arm Neoverse N1",
    {{{48, 48, static_cast<uint8_t>(k4K | k64K | k2M | k1G)}}, 1},
    {{{1280, 5, static_cast<uint8_t>(k4K | k64K | k2M | k1G)}}, 1},
    false,
    true,
};

}  // namespace

const TlbGeometryDesc* tlb_geometry_desc(TlbGeometry g) {
  switch (g) {
    case TlbGeometry::kOff: return nullptr;
    case TlbGeometry::kX86Intel: return &kSkylake;
    case TlbGeometry::kX86Amd: return &kZen4;
    case TlbGeometry::kArm64: return &kNeoverseN1;
  }
  return nullptr;
}

const char* tlb_geometry_name(TlbGeometry g) {
  const TlbGeometryDesc* d = tlb_geometry_desc(g);
  return d ? d->name : "off";
}

}  // namespace mmlab

// Package target describes the Tenstorrent Blackhole chip as codegen and the
// simulator see it: the worker grid, the L1 layout and budget, kernel code
// limits, DRAM banks and alignment, NoC limits, circular-buffer and
// runtime-argument limits, DEST capacity, the tt::DataFormat code of every
// storage format, and the ethernet cores (Ethernet: channels, their NoC
// coordinates and L1 region, the canonical ring cabling of a 1xN mesh and
// the link cost estimates).
//
// The numbers come from the chip reference (reference/blackhole.md). They are
// kept in one struct so that a different firmware release (for example a
// moved kernel-usable L1 base) is a change in one place: every rule in
// codegen/kir and every address in sim/kexec reads them from a *Target.
package target

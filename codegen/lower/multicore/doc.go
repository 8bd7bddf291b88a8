// Package multicore holds the named protocols by which the cores of one
// device program share work: each is a few kernel-IR fragments, the
// semaphores and CBs they use, and the per-core argument values that name
// the partner cores, so a lowering composes a protocol instead of writing
// semaphore handshakes by hand. Package blocks holds what one core does;
// this package what cores do together.
//
//   - Exchange: a group reduction with a broadcast back. Every core of a
//     group writes a partial page into its leader's gather CB and counts
//     it in the leader's semaphore; the leader combines the partials and
//     multicasts the result page and then a "valid" word to the others.
//     The split-row norms and the GDN recurrence's output norm use it.
//   - Multicast: one sender per NoC column group reads pages once and
//     multicasts them, chunk by chunk, into the same CB of every other
//     core, after a ready handshake. The decode matmuls share their
//     activation row this way.
//   - Push: producers write pages straight into a CB of the consuming
//     cores, whose address the first consumer publishes by a semaphore
//     multicast, and count each page in the consumer's semaphore. The
//     all_reduce_add_rmsnorm ring pushes into the norm tail this way.
//
// Each type's doc states its semaphore protocol, its NoC use and why it
// cannot deadlock. All three multicast to rectangles of cores: Rect and
// FollowerRects cover a run of row-major cores with rectangles that
// never span a NoC column or row gap (Blackhole's DRAM and PCIe columns),
// Slot is such a rectangle as kernel arguments (corners in the issuing
// kernel's NoC order, kir.McastCorners) and EachSlot emits a multicast per
// used slot.
//
// The protocols rely on two facts of the programs they are part of: a CB
// allocated for the program has the same L1 address on every core of it,
// so a core's own get_write_ptr names the partner's page; and program
// semaphores start at 0 on every launch. Writes to a partner are followed
// by a write barrier before the semaphore that announces them (an
// increment, or a set multicast after the data on the same NoC), so the
// announcement never overtakes the data.
package multicore

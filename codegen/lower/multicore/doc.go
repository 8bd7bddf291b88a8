// Package multicore holds the named protocols by which the cores of a
// device program (or, Ring, of a mesh's cards) share work, each a few
// kernel-IR fragments with the semaphores and CBs they use and the
// per-core argument values naming the partner cores; package blocks holds
// what one core does, this package what cores do together:
//
//   - Exchange: a group reduction with a broadcast back (the split-row
//     norms, the GDN recurrence's output norm);
//   - Multicast: one sender per NoC column group shares pages with the
//     other cores (the decode matmuls' activation row; Rounds: the
//     prefill matmuls' activation rows, one round per tile row);
//   - Push: producers write pages straight into the consumers' CB, whose
//     address the consumers publish (the all_reduce_add_rmsnorm ring into
//     its norm tail);
//   - SplitCombine: the exact merge of split-softmax partials (running
//     max, running sum, partial output per core) on a two-level tree
//     (subgroups on their first core, those on the group's leader), what
//     flash-decoding needs when a decode attention splits its KV
//     positions over cores; the writers move each merge's maxima and
//     weights between tiles so that one exp serves all its partials;
//   - Ring: the packet pipeline between cards: per ethernet link a sender,
//     the next card's receiver and worker cores that consume and produce
//     its packets (the collectives).
//
// Each type's doc states its semaphore protocol, its NoC use and why it
// cannot deadlock. The others multicast to rectangles of cores:
// FollowerRects covers a run of row-major cores without spanning a NoC
// column gap (Blackhole's DRAM and PCIe columns), a Slot is a rectangle as
// kernel arguments (corners in the kernel's NoC order, kir.McastCorners).
//
// The protocols rely on a CB having the same L1 address on every core of
// its program (a core's own get_write_ptr names the partner's page), on
// semaphores starting at 0 on every launch, and on a write barrier (or a
// multicast on the same NoC) between data and the semaphore that
// announces it.
package multicore

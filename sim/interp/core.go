package interp

import "github.com/tcc-dev/tcc/codegen/kir"

// SemaphoreStride is the L1 distance between consecutive semaphores.
const SemaphoreStride = 16

// Core is one worker or ethernet core of a device as its kernels see it:
// where it is on the NoC, its CBs and its semaphores. Machines embed it in
// their own per-core state.
type Core struct {
	C kir.Core
	// NX, NY are the core's NoC coordinates (my_x, my_y).
	NX, NY int
	// Eth marks an ethernet core.
	Eth bool
	// CBs are the core's circular buffers by index (nil: not configured).
	CBs []*CB
	// SemBase is the L1 address of the core's semaphore 0.
	SemBase uint64
	// Phases is the books of a persistent program's phases, nil otherwise.
	Phases *Phases
	sems   []bool // by id: created on this core
}

// CB returns CB idx of the core, or nil when it is not configured.
func (c *Core) CB(idx int) *CB {
	if idx < 0 || idx >= len(c.CBs) {
		return nil
	}
	return c.CBs[idx]
}

// AddCB configures cfg on the core with its ring at L1 address base and
// returns its books (empty ring). It fails when the index is outside
// c.CBs or already configured.
func (c *Core) AddCB(cfg *kir.CB, base uint64) (*CB, *Fault) {
	if cfg.Index < 0 || cfg.Index >= len(c.CBs) {
		return nil, faultf(kir.RuleCBCount, cfg.Index, "CB index %d is outside 0..%d", cfg.Index, len(c.CBs)-1)
	}
	if c.CBs[cfg.Index] != nil {
		return nil, faultf(kir.RuleCBCount, cfg.Index, "CB index %d is configured more than once on this core", cfg.Index)
	}
	cb := &CB{Config: cfg, Base: base, Pages: cfg.Pages, PageSize: cfg.PageSize}
	c.CBs[cfg.Index] = cb
	return cb, nil
}

// AddSemaphore creates semaphore id on the core and returns its L1
// address, where the machine stores its initial value.
func (c *Core) AddSemaphore(id int) uint64 {
	for len(c.sems) <= id {
		c.sems = append(c.sems, false)
	}
	c.sems[id] = true
	return c.SemaphoreAddr(uint64(id))
}

// HasSemaphore reports whether semaphore id was created on the core.
func (c *Core) HasSemaphore(id uint64) bool { return id < uint64(len(c.sems)) && c.sems[id] }

// SemaphoreAddr is the L1 address of the core's semaphore id.
func (c *Core) SemaphoreAddr(id uint64) uint64 { return c.SemBase + id*SemaphoreStride }

// SemaphoreAt is the id of the semaphore created on the core at L1
// address addr, or -1 when addr holds none.
func (c *Core) SemaphoreAt(addr uint64) int {
	if addr < c.SemBase || (addr-c.SemBase)%SemaphoreStride != 0 {
		return -1
	}
	id := (addr - c.SemBase) / SemaphoreStride
	if !c.HasSemaphore(id) {
		return -1
	}
	return int(id)
}

package blocks

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// CBClass is the index range a CB is allocated from (tt-metal's convention).
type CBClass uint8

const (
	// InputCB: c_0..c_15, fed by a reader.
	InputCB CBClass = iota
	// OutputCB: c_16..c_23, drained by a writer.
	OutputCB
	// ScratchCB: c_24..c_31, produced and consumed inside one kernel or
	// between compute stages.
	ScratchCB
)

func (c CBClass) bounds() (lo, hi int) {
	switch c {
	case InputCB:
		return 0, 16
	case OutputCB:
		return 16, 24
	}
	return 24, 32
}

// CBPlan allocates the CBs of one program on one set of cores. Each method
// adds the CB configuration to the program and returns its index: the
// lowest free index of its class, or, when the class is full, the lowest
// free index of any class. When all indices are taken the method records an
// error (Err) and returns -1.
type CBPlan struct {
	p     *kir.Program
	t     *target.Target
	cores []ir.CoreRange
	used  []bool
	err   error
}

// NewCBPlan starts a plan for CBs of p on cores (indices already configured
// in p on any of these cores are treated as taken).
func NewCBPlan(p *kir.Program, t *target.Target, cores []ir.CoreRange) *CBPlan {
	pl := &CBPlan{p: p, t: t, cores: cores, used: make([]bool, t.MaxCBs)}
	for _, cb := range p.CBs {
		if cb.Index >= 0 && cb.Index < len(pl.used) {
			pl.used[cb.Index] = true
		}
	}
	return pl
}

func (pl *CBPlan) pick(class CBClass) int {
	lo, hi := class.bounds()
	for i := lo; i < hi && i < len(pl.used); i++ {
		if !pl.used[i] {
			pl.used[i] = true
			return i
		}
	}
	for i := range pl.used {
		if !pl.used[i] {
			pl.used[i] = true
			return i
		}
	}
	if pl.err == nil {
		pl.err = fmt.Errorf("rule cb-count: program %s needs more than %d CBs per core", pl.p.Name, len(pl.used))
	}
	return -1
}

// Pages adds a CB of `pages` pages of pageSize bytes in format dt (for
// row-major staging: ids, table rows, scratch words).
func (pl *CBPlan) Pages(class CBClass, name string, dt ir.DType, pageSize, pages int) int {
	idx := pl.pick(class)
	if idx < 0 {
		return -1
	}
	pl.p.AddCB(kir.CB{Index: idx, PageSize: pageSize, Pages: pages, Format: dt, Cores: pl.cores, Name: name})
	return idx
}

// Input adds an input CB of `pages` tiles of dt (page size
// dt.TileBytes()); Output and Scratch likewise in their classes.
func (pl *CBPlan) Input(name string, dt ir.DType, pages int) int {
	return pl.Pages(InputCB, name, dt, dt.TileBytes(), pages)
}

// Output adds an output CB of `pages` tiles of dt.
func (pl *CBPlan) Output(name string, dt ir.DType, pages int) int {
	return pl.Pages(OutputCB, name, dt, dt.TileBytes(), pages)
}

// Scratch adds an intermediate CB of `pages` tiles of dt.
func (pl *CBPlan) Scratch(name string, dt ir.DType, pages int) int {
	return pl.Pages(ScratchCB, name, dt, dt.TileBytes(), pages)
}

// cbFormat is the format of the first CB of p with index idx (0: none).
func cbFormat(p *kir.Program, idx int) ir.DType {
	for _, cb := range p.CBs {
		if cb.Index == idx {
			return cb.Format
		}
	}
	return 0
}

// Bytes is the L1 the program's CBs on the plan's cores take per core,
// 16-byte aligned each, plus the per-core pages of the L1 buffers the
// program declares.
func (pl *CBPlan) Bytes() int {
	used := 0
	for _, cb := range pl.p.CBs {
		if cb.Backing == "" {
			used += target.AlignUp(cb.Bytes(), pl.t.L1Align)
		}
	}
	for i := range pl.p.Buffers {
		b := &pl.p.Buffers[i]
		if !b.Mem.Kind.IsDRAM() {
			used += b.PagesPerCore(pl.t.GridX, pl.t.GridY) * target.AlignUp(b.PageSize, pl.t.L1Align)
		}
	}
	return used
}

// Err returns the first allocation error, or, when the CBs and L1 buffers
// do not fit the L1 budget, an error saying so with what, a description of
// what the program keeps per core.
func (pl *CBPlan) Err(what string) error {
	if pl.err != nil {
		return pl.err
	}
	if used := pl.Bytes(); used > pl.t.L1Budget() {
		return fmt.Errorf("rule l1-budget: %s: its CBs need %d bytes per core, the L1 budget is %d bytes", what, used, pl.t.L1Budget())
	}
	return nil
}

package sfpu

import (
	isa "github.com/tcc-dev/tcc/ir/sfpuisa"
)

// The scheduler: a program body as the builders emit it runs each
// instruction in source order with an SFPNOP after a MAD-class
// instruction whose result the next one reads. schedule reorders the
// body so that independent instructions fill those slots, which computes
// the same values (TestScheduleSameValues) in fewer cycles.

// setsCC reports whether in changes the lanes' condition codes outside
// the SFPPUSHC/SFPPOPC pair of a conditional block (such an instruction
// at the top level is a barrier nothing moves across).
func setsCC(in isa.Insn) bool {
	switch in.Op {
	case isa.SFPSETCC, isa.SFPENCC, isa.SFPCOMPC, isa.SFPPUSHC, isa.SFPPOPC:
		return true
	case isa.SFPIADD:
		return in.Mod&4 == 0 || in.Mod&8 != 0
	case isa.SFPEXEXP:
		return in.Mod == 2 || in.Mod == 10
	case isa.SFPLZ:
		return in.Mod&2 != 0
	}
	return false
}

// unit is what the scheduler moves: one top-level instruction or a whole
// conditional block (SFPPUSHC to its SFPPOPC, in its own order).
type unit struct {
	insns         []isa.Insn
	reads, writes uint16 // LREG sets (bits 0-15)
	dest, destW   bool   // reads / writes DEST
	barrier       bool
	height        int // cycles from its start to the body's end on the longest dependent path
	preds         int // predecessors not yet issued
	succs         []int
}

// hazard reports whether in may not issue right after prev: prev is
// MAD-class and in reads or writes its result.
func hazard(prev, in isa.Insn) bool {
	if !prev.IsMAD() {
		return false
	}
	w, _ := prev.Writes()
	if r, ok := in.Writes(); ok && r == w && in.Op != isa.SFPSTORE {
		return true
	}
	for _, r := range in.Reads() {
		if r == w {
			return true
		}
	}
	return false
}

// withNOPs is insns with an SFPNOP wherever hazard requires one.
func withNOPs(insns []isa.Insn) []isa.Insn {
	var out []isa.Insn
	for _, in := range insns {
		if n := len(out); n > 0 && hazard(out[n-1], in) {
			out = append(out, isa.Insn{Op: isa.SFPNOP})
		}
		out = append(out, in)
	}
	return out
}

// units splits a NOP-free body into units.
func units(body []isa.Insn) []*unit {
	var us []*unit
	depth := 0
	for _, in := range body {
		if depth == 0 {
			us = append(us, &unit{})
		}
		u := us[len(us)-1]
		u.insns = append(u.insns, in)
		switch in.Op {
		case isa.SFPPUSHC:
			depth++
		case isa.SFPPOPC:
			depth--
		}
		if depth == 0 && len(u.insns) == 1 && setsCC(in) {
			u.barrier = true
		}
	}
	for _, u := range us {
		cond := len(u.insns) > 1
		for _, in := range u.insns {
			for _, r := range in.Reads() {
				u.reads |= 1 << r
			}
			ws := uint16(0)
			if w, ok := in.Writes(); ok {
				ws |= 1 << w
			}
			if in.Op == isa.SFPSWAP && in.C < 8 {
				ws |= 1 << in.C // SFPSWAP writes both its LREGs
			}
			u.writes |= ws
			if cond {
				u.reads |= ws // a masked write keeps the other lanes' value
			}
			switch in.Op {
			case isa.SFPLOAD:
				u.dest = true
			case isa.SFPSTORE:
				u.dest, u.destW = true, true
			}
		}
	}
	return us
}

// dependent reports whether b (later in source order) must stay after a.
func dependent(a, b *unit) bool {
	return a.barrier || b.barrier ||
		a.writes&(b.reads|b.writes) != 0 || a.reads&b.writes != 0 ||
		(a.destW && b.dest) || (a.dest && b.destW)
}

// schedule returns body (with or without NOPs) list-scheduled: among
// the units whose predecessors have issued, the one with the longest
// path to the end (then the first in source order) that may issue now;
// an SFPNOP when none may. Inside a conditional block the order is the
// source's.
func schedule(body []isa.Insn) []isa.Insn {
	var src []isa.Insn
	for _, in := range body {
		if in.Op != isa.SFPNOP {
			src = append(src, in)
		}
	}
	us := units(src)
	for i, a := range us {
		for j := i + 1; j < len(us); j++ {
			if dependent(a, us[j]) {
				a.succs = append(a.succs, j)
				us[j].preds++
			}
		}
	}
	for i := len(us) - 1; i >= 0; i-- {
		u := us[i]
		n := len(withNOPs(u.insns))
		if u.insns[len(u.insns)-1].IsMAD() {
			n++
		}
		h := 0
		for _, j := range u.succs {
			h = max(h, us[j].height)
		}
		u.height = n + h
	}
	done := make([]bool, len(us))
	var out []isa.Insn
	for left := len(us); left > 0; {
		best := -1
		for i, u := range us {
			if done[i] || u.preds > 0 {
				continue
			}
			if n := len(out); n > 0 && hazard(out[n-1], u.insns[0]) {
				continue
			}
			if best < 0 || u.height > us[best].height {
				best = i
			}
		}
		if best < 0 {
			out = append(out, isa.Insn{Op: isa.SFPNOP})
			continue
		}
		u := us[best]
		done[best] = true
		left--
		out = append(out, withNOPs(u.insns)...)
		for _, j := range u.succs {
			us[j].preds--
		}
	}
	return out
}

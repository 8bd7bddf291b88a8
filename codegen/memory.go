package codegen

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// operandsNamed returns, for every op of g, the operands the op table
// (ir.OpKind.Info) names one of names.
func operandsNamed(g *ir.Graph, names ...string) []*ir.Value {
	var out []*ir.Value
	for _, op := range g.Ops() {
		info := op.Kind.Info()
		for i, v := range op.Operands {
			if i >= len(info.Operands) {
				break
			}
			for _, n := range names {
				if info.Operands[i] == n {
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// KVCaches returns the states of g that are KV caches: the states an op
// reads at an operand the op table calls "cache" (update_cache,
// fill_cache) or "k_cache" / "v_cache" (attn_prologue and its prefill
// form). Their shape is [B, kv heads, L, D]: L rows of the cache, one per
// position.
func KVCaches(g *ir.Graph) map[*ir.Value]bool {
	out := map[*ir.Value]bool{}
	for _, v := range operandsNamed(g, "cache", "k_cache", "v_cache") {
		if v.Kind == ir.KindState {
			out[v] = true
		}
	}
	return out
}

// PositionInputs returns the inputs of g that hold the step's position:
// the inputs an op reads at the operand the op table calls "pos" (the
// position operand of update_cache, fill_cache, sdpa_decode, sdpa_prefill
// and the fused attention ops; rule decode-pos: [1] uint32, the first
// position the step writes), in g.Inputs order, then the states read
// there in g.States order (a device-loop decode step's position, which
// the step advances itself). The host uploads the position into the
// inputs' buffers before every step, and into the states' once.
func PositionInputs(g *ir.Graph) []*ir.Value {
	pos := map[*ir.Value]bool{}
	for _, v := range operandsNamed(g, "pos") {
		if v.Kind == ir.KindInput || v.Kind == ir.KindState {
			pos[v] = true
		}
	}
	var out []*ir.Value
	for _, vs := range [][]*ir.Value{g.Inputs, g.States} {
		for _, v := range vs {
			if pos[v] {
				out = append(out, v)
			}
		}
	}
	return out
}

// MemoryUse is what a build's buffers occupy in one device's DRAM, in
// bytes as the allocator places them (every bank holds ceil(pages / banks)
// pages of each interleaved buffer at the DRAM page stride; weights placed
// in blocks their padded blocks): weights, KV caches (KVCaches), the other
// persistent state, and everything else (inputs, activations and
// scratch: every op result not written in place, the intermediates that
// share a buffer counted once per buffer). Every device of a mesh
// holds the same buffers (its shard of each), so one device's use is
// every device's.
type MemoryUse struct {
	Weights  int64 `json:"weights"`
	KV       int64 `json:"kv"`
	State    int64 `json:"state"`
	Other    int64 `json:"other"`
	Total    int64 `json:"total"`
	Capacity int64 `json:"capacity"`
}

// Free is Capacity - Total (negative when the buffers do not fit).
func (u MemoryUse) Free() int64 { return u.Capacity - u.Total }

// Fits reports whether the buffers fit the device's DRAM.
func (u MemoryUse) Fits() bool { return u.Total <= u.Capacity }

// String is one line: each kind, the total, the capacity and what is
// free or over.
func (u MemoryUse) String() string {
	room := "free " + target.HumanBytes(u.Free())
	if !u.Fits() {
		room = "over by " + target.HumanBytes(-u.Free())
	}
	return fmt.Sprintf("weights %s, KV caches %s, state %s, other %s; total %s of %s (%s)",
		target.HumanBytes(u.Weights), target.HumanBytes(u.KV), target.HumanBytes(u.State), target.HumanBytes(u.Other), target.HumanBytes(u.Total), target.HumanBytes(u.Capacity), room)
}

// add books one buffer.
func (u *MemoryUse) add(v *ir.Value, kv map[*ir.Value]bool, bytes int64) {
	switch {
	case v.Kind == ir.KindWeight:
		u.Weights += bytes
	case kv[v]:
		u.KV += bytes
	case v.Kind == ir.KindState:
		u.State += bytes
	default:
		u.Other += bytes
	}
	u.Total += bytes
}

// dramBytes is what buffer b occupies in t's DRAM (0 for an L1 buffer).
func dramBytes(t *target.Target, b kir.Buffer) int64 {
	if !b.Mem.Kind.IsDRAM() {
		return 0
	}
	return int64(t.DRAMBanks) * int64(b.DRAMBytesPerBank(t.DRAMBanks, t.DRAMPageSize(b.PageSize)))
}

// GraphMemory is what Compile(g, t) would allocate in each device's DRAM,
// computed from g alone, before any op is lowered: the buffers of g's
// inputs, weights and states and of every op result that is not a state
// written in place nor a view, each with its page layout
// (lower.PageLayout) and weight blocks, the intermediates that share a
// buffer (planReuse) counted once per shared buffer. It fails when a value has no page layout.
func GraphMemory(g *ir.Graph, t *target.Target) (MemoryUse, error) {
	alias, err := bufferAliases(g)
	if err != nil {
		return MemoryUse{Capacity: t.DRAMBytes()}, err
	}
	return graphMemory(g, t, alias, planReuse(g, alias), weightBlocks(g, t, lower.NewContext(t).Fidelity))
}

// graphMemory is GraphMemory with the state aliases, shared buffers and
// weight blocks Compile uses: a shared buffer counts once, at the size of
// its largest value.
func graphMemory(g *ir.Graph, t *target.Target, alias map[*ir.Value]*ir.Value, plan *reusePlan, blocks map[*ir.Value]*kir.BlockLayout) (MemoryUse, error) {
	u := MemoryUse{Capacity: t.DRAMBytes()}
	kv := KVCaches(g)
	add := func(v *ir.Value) error {
		ps, pages, err := lower.PageLayout(v.Type)
		if err != nil {
			return fmt.Errorf("codegen: %s %s (%q, %s): %w", v.Kind, v, v.Name, v.Type, err)
		}
		u.add(v, kv, dramBytes(t, kir.Buffer{Mem: v.Type.Mem, PageSize: ps, Pages: pages, Blocks: blocks[v]}))
		return nil
	}
	for _, list := range [][]*ir.Value{g.Inputs, g.Weights, g.States} {
		for _, v := range list {
			if err := add(v); err != nil {
				return u, err
			}
		}
	}
	for _, op := range g.Ops() {
		for _, r := range op.Results {
			if _, inPlace := alias[r]; inPlace {
				continue
			}
			if s, ok := plan.slot[r]; ok {
				if plan.slots[s].Values[0] == r {
					if err := add(plan.slots[s].Largest); err != nil {
						return u, err
					}
				}
				continue
			}
			if err := add(r); err != nil {
				return u, err
			}
		}
	}
	return u, nil
}

// Memory is what b's buffers occupy in each device's DRAM.
func (b *Build) Memory() MemoryUse {
	u := MemoryUse{Capacity: b.Target.DRAMBytes()}
	kv := KVCaches(b.Graph)
	for i := range b.Buffers {
		s := &b.Buffers[i]
		u.add(s.Value, kv, dramBytes(b.Target, s.Buffer()))
	}
	return u
}

// DRAMError is a build whose buffers do not fit a device's DRAM (rule
// dram-capacity).
type DRAMError struct {
	Graph, Target string
	Use           MemoryUse
}

func (e *DRAMError) Error() string {
	return fmt.Sprintf("codegen: graph %q: rule dram-capacity: its buffers need %s of DRAM per device, a %s device has %s: over by %s (per device: %s); shorten the KV caches or serve fewer users, or spread the model over more devices",
		e.Graph, target.HumanBytes(e.Use.Total), e.Target, target.HumanBytes(e.Use.Capacity), target.HumanBytes(-e.Use.Free()), e.Use)
}

// CheckMemory fails with a *DRAMError when g's buffers (GraphMemory) do
// not fit one device of t; it runs before anything is lowered.
func CheckMemory(g *ir.Graph, t *target.Target) (MemoryUse, error) {
	u, err := GraphMemory(g, t)
	if err != nil {
		return u, err
	}
	return u, fits(g, t, u)
}

func fits(g *ir.Graph, t *target.Target, u MemoryUse) error {
	if !u.Fits() {
		return &DRAMError{Graph: g.Name, Target: t.Name, Use: u}
	}
	return nil
}

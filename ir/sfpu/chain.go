package sfpu

import (
	"fmt"
	"math"
	"strings"
	"sync"

	isa "github.com/tcc-dev/tcc/ir/sfpuisa"
)

// Step is one op of an element-wise chain and its scalar (the parameter
// of add_scalar and mul_scalar; ignored by the others).
type Step struct {
	Op    Op
	Param float32
}

func (s Step) String() string {
	if s.Op.HasParam() {
		return fmt.Sprintf("%s:%g", s.Op, s.Param)
	}
	return s.Op.String()
}

// ChainProgram is one program running steps back to back on a DEST
// tile, one pass over DEST where each step's own program is a pass of
// its own: one SFPLOAD, the steps' instructions with LREGs allocated
// across them and the whole body scheduled (one step's instructions fill
// another's MAD slots), one SFPSTORE. Where DEST is fp32 (fp32 true) an
// intermediate stays in its LREG (the step's SFPSTORE and the next
// step's SFPLOAD moved it unchanged); where DEST is 16-bit each
// intermediate is stored and loaded back within the pass, so that it is
// rounded as the step's program leaves it (SFPSTORE into a bf16 DEST
// flushes denormals and truncates). Either way the chain computes, bit
// for bit, what the steps' programs compute one after the other
// (TestChainProgram), in fewer cycles where the steps' constants fit the
// LREGs beside each other (ChainCycles tells; a chain of ops that each
// need every LREG, such as rsqrt then log, can take more). Scalars are constants of the
// program (Setup loads them once per face while the LREGs allow, else
// the body where used: the steps' own constants likewise).
//
// Errors: an empty chain, a binary op or an op without a tcc program
// (Code.For).
func ChainProgram(steps []Step, fp32 bool) (*Program, error) {
	if len(steps) == 0 {
		return nil, fmt.Errorf("sfpu chain: no steps")
	}
	for i, s := range steps {
		if int(s.Op) >= len(unaryBodies) || unaryBodies[s.Op] == nil {
			return nil, fmt.Errorf("sfpu chain: step %d (%s) is not a one-operand op with a tcc program", i, s.Op)
		}
	}
	// The constants (the steps' and the scalars) are hoisted to Setup
	// where LREGs are free, else loaded where used: of every choice of
	// constants to load inline (all of them first, which always fits),
	// the one with the fewest cycles per tile that fits, the first
	// such in the enumeration's order.
	all, ok := buildChain(steps, fp32, nil, true)
	if !ok {
		return nil, fmt.Errorf("sfpu chain %s: needs more than 8 LREGs", ChainName(steps))
	}
	best, bestCycles := all.p, all.tileCycles()
	ks := all.seen
	if len(ks) > maxChainConsts {
		ks = ks[:maxChainConsts] // the rest stay inline
	}
	for mask := range 1 << len(ks) {
		inlineK := map[uint32]bool{}
		for i, k := range all.seen {
			if i >= len(ks) || mask>>i&1 != 0 {
				inlineK[k] = true
			}
		}
		b, ok := buildChain(steps, fp32, inlineK, false)
		if ok && b.tileCycles() < bestCycles {
			best, bestCycles = b.p, b.tileCycles()
		}
	}
	return best, nil
}

// maxChainConsts bounds the constants whose placement ChainProgram
// chooses (2^n builds).
const maxChainConsts = 8

// built is a chain's program and the constants it asked hoist for.
type built struct {
	p    *Program
	seen []uint32
}

func (b built) tileCycles() float64 { return tileCycles(b.p.FaceCycles(), b.p.Cycles()) }

// buildChain builds the chain with the constants of inlineK (or all of
// them, inline) loaded where used and the others hoisted to Setup where
// an LREG is free; ok is false when the LREGs run out.
func buildChain(steps []Step, fp32 bool, inlineK map[uint32]bool, inline bool) (b built, ok bool) {
	a := &asm{inlineK: inlineK, inline: inline}
	defer func() {
		if r := recover(); r != nil {
			if s, isStr := r.(string); isStr && strings.Contains(s, "more than 8 LREGs") {
				b, ok = built{}, false
				return
			}
			panic(r)
		}
	}()
	x := a.reg()
	a.load(x, isa.ArgNone)
	for i, s := range steps {
		u := unaryBodies[s.Op]
		param := uint8(noLReg)
		if u.param {
			param = a.hoist(math.Float32bits(s.Param))
		}
		r := u.body(a, x, param)
		if u.nan {
			a.nanIn(x, r)
		}
		if r != x {
			a.free(x)
		}
		a.endStep()
		x = r
		if !fp32 && i < len(steps)-1 {
			a.store(x, isa.ArgNone)
			a.load(x, isa.ArgNone)
		}
	}
	a.store(x, isa.ArgNone)
	return built{p: a.program(), seen: a.seen}, true
}

// ChainName is the chain's steps joined by "_then_" (scalars by their
// bits), an identifier-safe name for its C++ function.
func ChainName(steps []Step) string { return joinSteps(steps, "_", "_then_") }

// ChainCycles is the cycles of one tile call of the chain's program
// (tileCycles of its Setup and per-iteration cycles), against the sum of
// the steps' own tile calls under CodeTCC (Op.CyclesFor).
func ChainCycles(p *Program, steps []Step) (fused, perOp float64) {
	for _, s := range steps {
		perOp += s.Op.CyclesFor(CodeTCC)
	}
	return tileCycles(p.FaceCycles(), p.Cycles()), perOp
}

// FormatChain is the text of a chain in a kir.SFPU statement's Chain:
// the steps' names, a scalar's as name:bits (8 hex digits of its fp32
// bits), comma-separated. ParseChain reads it back.
func FormatChain(steps []Step) string { return joinSteps(steps, ":", ",") }

// joinSteps is the steps' op names joined by sep, a scalar step's name
// followed by paramSep and the 8 hex digits of its fp32 bits.
func joinSteps(steps []Step, paramSep, sep string) string {
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = Table[s.Op].Name
		if s.Op.HasParam() {
			parts[i] += fmt.Sprintf("%s%08x", paramSep, math.Float32bits(s.Param))
		}
	}
	return strings.Join(parts, sep)
}

// ParseChain parses FormatChain's text; an unknown op, a scalar without
// its bits or bits on an op without a scalar is an error naming the step.
func ParseChain(text string) ([]Step, error) {
	var steps []Step
	for i, p := range strings.Split(text, ",") {
		name, bits, hasBits := strings.Cut(p, ":")
		o, ok := ByName(name)
		if !ok {
			return nil, fmt.Errorf("sfpu chain %q: step %d: unknown op %q", text, i, name)
		}
		s := Step{Op: o}
		if o.HasParam() != hasBits {
			return nil, fmt.Errorf("sfpu chain %q: step %d (%s): a scalar op takes \":bits\", the others none", text, i, name)
		}
		if hasBits {
			var b uint32
			if _, err := fmt.Sscanf(bits, "%08x", &b); err != nil || len(bits) != 8 {
				return nil, fmt.Errorf("sfpu chain %q: step %d (%s): bits %q are not 8 hex digits", text, i, name, bits)
			}
			s.Param = math.Float32frombits(b)
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// chainCache holds ChainProgram's results by FormatChain text and mode
// (the choice of constants builds up to 2^maxChainConsts programs).
var chainCache sync.Map

type chainKey struct {
	text string
	fp32 bool
}

// CachedChain is ChainProgram of the chain text (FormatChain) with its
// steps, built once per text and mode.
func CachedChain(text string, fp32 bool) (*Program, []Step, error) {
	type entry struct {
		p     *Program
		steps []Step
		err   error
	}
	if e, ok := chainCache.Load(chainKey{text, fp32}); ok {
		e := e.(entry)
		return e.p, e.steps, e.err
	}
	steps, err := ParseChain(text)
	var p *Program
	if err == nil {
		p, err = ChainProgram(steps, fp32)
	}
	chainCache.Store(chainKey{text, fp32}, entry{p, steps, err})
	return p, steps, err
}

// ChainTileCycles is the cycles of one tile call of a chain's program.
func ChainTileCycles(p *Program) float64 { return tileCycles(p.FaceCycles(), p.Cycles()) }

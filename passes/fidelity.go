package passes

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tcc-dev/tcc/ir"
)

// WeightFidelity is a math-fidelity policy by weight format for the ops
// whose only fidelity-dependent products are activation x weight
// (ir.WeightMatmulOperands): a lossy, cheaper fidelity the user chooses
// for a weight format (e.g. prefill at HiFi2 for bfp8_b, as the measured
// stacks run it), against ir.OpFidelity's default, which keeps HiFi4's
// products.
type WeightFidelity map[ir.DType]ir.MathFidelity

// ParseWeightFidelity parses "exact" (or "", no policy) or a comma list of
// format=fidelity, e.g. "bfp8_b=HiFi2,bfp4_b=LoFi".
func ParseWeightFidelity(s string) (WeightFidelity, error) {
	if s == "" || s == "exact" {
		return nil, nil
	}
	out := WeightFidelity{}
	for _, part := range strings.Split(s, ",") {
		name, fid, ok := strings.Cut(strings.TrimSpace(part), "=")
		dt, err := ir.ParseDType(name)
		if !ok || err != nil {
			return nil, fmt.Errorf("fidelity policy %q: %q is not format=fidelity with a weight format (bf16, bfp8_b, bfp4_b, ...)", s, part)
		}
		f, err := ir.ParseMathFidelity(fid)
		if err != nil {
			return nil, fmt.Errorf("fidelity policy %q: %s: %w", s, name, err)
		}
		out[dt] = f
	}
	return out, nil
}

// String is the policy in ParseWeightFidelity's form, formats sorted.
func (p WeightFidelity) String() string {
	if len(p) == 0 {
		return "exact"
	}
	var parts []string
	for dt, f := range p {
		parts = append(parts, dt.String()+"="+f.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// SetWeightFidelity sets the fidelity attribute of every op of g with
// weights (ir.WeightMatmulOperands) and no fidelity attribute yet, when
// the policy names every one of its weights' formats: the highest of their
// fidelities (the most demanding weight decides), if below the op's
// default (ir.OpFidelity at HiFi4). It returns how many ops it set. The
// reference evaluator reads the same attribute, so checks against it stay
// like for like; the accuracy cost shows against fp32 math.
func SetWeightFidelity(g *ir.Graph, p WeightFidelity) int {
	n := 0
	for _, op := range g.Ops() {
		if _, set := op.Attrs[ir.FidelityAttr]; set {
			continue
		}
		ws, ok := ir.WeightMatmulOperands(op)
		if !ok {
			continue
		}
		f, named := ir.LoFi, true
		for _, i := range ws {
			wf, ok := p[op.Operands[i].Type.DType]
			named = named && ok
			f = max(f, wf)
		}
		def, err := ir.OpFidelity(op, ir.HiFi4)
		if !named || err != nil || f >= def {
			continue
		}
		if op.Attrs == nil {
			op.Attrs = ir.Attrs{}
		}
		op.Attrs[ir.FidelityAttr] = f.String()
		n++
	}
	return n
}

package ir

import (
	"fmt"
	"strconv"
	"strings"
)

// LayoutStep is one data movement of a layout_chain: a slice, reshape,
// repeat_interleave or transpose with the attributes the op itself takes.
type LayoutStep struct {
	Op    OpKind
	Attrs Attrs
}

// LayoutChainOps are the op kinds a layout_chain may hold.
func LayoutChainOps() []OpKind {
	return []OpKind{OpSlice, OpReshape, OpRepeatInterleave, OpTranspose}
}

// layoutStep is what a layout_chain needs of a step kind: its text name,
// its attributes in the order the text form lists them (one int where
// ints says so, else an int list) and its shape rule. It is spelled out,
// not read from the op table, because the table refers to
// shapeLayoutChain.
type layoutStep struct {
	name  string
	attrs []string
	ints  map[string]bool
	shape ShapeRule
}

var layoutSteps = map[OpKind]layoutStep{
	OpSlice:            {"slice", []string{"begin", "end"}, nil, shapeSlice},
	OpReshape:          {"reshape", []string{"shape"}, nil, shapeReshape},
	OpRepeatInterleave: {"repeat_interleave", []string{"repeats", "axis"}, map[string]bool{"repeats": true, "axis": true}, shapeRepeatInterleave},
	OpTranspose:        {"transpose", []string{"dim0", "dim1"}, map[string]bool{"dim0": true, "dim1": true}, shapeTranspose},
}

// String is the step's text form: its op name, then each attribute after
// a colon, lists comma-separated.
func (s LayoutStep) String() string {
	ls := layoutSteps[s.Op]
	parts := []string{ls.name}
	for _, name := range ls.attrs {
		switch v := s.Attrs[name].(type) {
		case []int:
			strs := make([]string, len(v))
			for i, n := range v {
				strs[i] = strconv.Itoa(n)
			}
			parts = append(parts, strings.Join(strs, ","))
		case int:
			parts = append(parts, strconv.Itoa(v))
		}
	}
	return strings.Join(parts, ":")
}

// FormatLayoutChain is the steps attribute of a layout_chain: the steps'
// text forms joined by "|".
func FormatLayoutChain(steps []LayoutStep) string {
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = s.String()
	}
	return strings.Join(parts, "|")
}

// ParseLayoutChain parses a layout_chain steps attribute: at least two
// "|"-separated steps, each an op name of LayoutChainOps followed by its
// attributes (slice:begin:end, reshape:shape, repeat_interleave:repeats:
// axis, transpose:dim0:dim1; lists comma-separated). It is the inverse of
// FormatLayoutChain.
func ParseLayoutChain(s string) ([]LayoutStep, error) {
	parts := strings.Split(s, "|")
	if len(parts) < 2 {
		return nil, fmt.Errorf("rule layout-chain-length: steps %q names %d step(s); a chain has at least 2", s, len(parts))
	}
	steps := make([]LayoutStep, 0, len(parts))
	for i, p := range parts {
		fields := strings.Split(p, ":")
		k, ls, ok := layoutStepNamed(fields[0])
		names := ls.attrs
		if !ok {
			return nil, fmt.Errorf("rule layout-chain-op: step %d %q of %q is not slice, reshape, repeat_interleave or transpose", i, fields[0], s)
		}
		if len(fields)-1 != len(names) {
			return nil, fmt.Errorf("rule layout-chain-attrs: step %d %q of %q takes %s", i, p, s, strings.Join(names, ":"))
		}
		st := LayoutStep{Op: k, Attrs: Attrs{}}
		for j, name := range names {
			ints, err := parseInts(fields[j+1])
			if err != nil {
				return nil, fmt.Errorf("rule layout-chain-attrs: step %d %q of %q: %s: %v", i, p, s, name, err)
			}
			if ls.ints[name] {
				if len(ints) != 1 {
					return nil, fmt.Errorf("rule layout-chain-attrs: step %d %q of %q: %s is one int", i, p, s, name)
				}
				st.Attrs[name] = ints[0]
			} else {
				st.Attrs[name] = ints
			}
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// layoutStepNamed is the step kind called name.
func layoutStepNamed(name string) (OpKind, layoutStep, bool) {
	for k, ls := range layoutSteps {
		if ls.name == name {
			return k, ls, true
		}
	}
	return InvalidOp, layoutStep{}, false
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// LayoutChainTypes is the type after each step of a layout_chain on x
// (each step's own shape rule), last the result's.
func LayoutChainTypes(x TensorType, steps []LayoutStep) ([]TensorType, error) {
	out := make([]TensorType, 0, len(steps))
	cur := x
	for i, st := range steps {
		ls, ok := layoutSteps[st.Op]
		if !ok {
			return nil, fmt.Errorf("rule layout-chain-op: step %d is %s, not slice, reshape, repeat_interleave or transpose", i, st.Op)
		}
		ts, err := ls.shape([]TensorType{cur}, st.Attrs)
		if err != nil {
			return nil, fmt.Errorf("layout_chain step %d (%s) on %s: %w", i, st, cur.Shape, err)
		}
		cur = ts[0]
		out = append(out, cur)
	}
	return out, nil
}

// shapeLayoutChain: the steps attribute parses (ParseLayoutChain) and each
// step's shape rule accepts the previous step's result; out is the last,
// of dtype when the dtype attribute is set (bf16 to fp32 only).
func shapeLayoutChain(in []TensorType, a Attrs) ([]TensorType, error) {
	steps, err := ParseLayoutChain(a["steps"].(string))
	if err != nil {
		return nil, err
	}
	ts, err := LayoutChainTypes(in[0], steps)
	if err != nil {
		return nil, err
	}
	out := ts[len(ts)-1]
	if dt, ok := a["dtype"].(DType); ok && dt != out.DType {
		if out.DType != BF16 || dt != FP32 {
			return nil, fmt.Errorf("rule layout-chain-dtype: a layout_chain converts only bf16 to fp32 (exact), not %s to %s", out.DType, dt)
		}
		out.DType = dt
	}
	return []TensorType{out}, nil
}

// shapeLayoutNormPlainChain: typed as layout_chain(x) {steps, dtype}
// (shapeLayoutChain), whose result the norm keeps; ops names one chain
// step or more (ParseChainSteps).
func shapeLayoutNormPlainChain(in []TensorType, a Attrs) ([]TensorType, error) {
	if _, err := ParseChainSteps(a["ops"].(string)); err != nil {
		return nil, err
	}
	return shapeLayoutChain(in, a)
}

// shapeNormLayoutGate: x a float tensor, w its norm weight; the
// layout_chain of steps (no dtype) moves x's shape to z's; out typed as z.
func shapeNormLayoutGate(in []TensorType, a Attrs) ([]TensorType, error) {
	x, z := in[0], in[2]
	if !x.DType.IsFloat() || !in[1].DType.IsFloat() || !z.DType.IsFloat() {
		return nil, fmt.Errorf("rule float-operand: norm_layout_gate of %s, %s and %s", x.DType, in[1].DType, z.DType)
	}
	moved, err := shapeLayoutChain(in[:1], Attrs{"steps": a["steps"]})
	if err != nil {
		return nil, err
	}
	if !moved[0].Shape.Equal(z.Shape) {
		return nil, fmt.Errorf("rule norm-layout-gate-shape: the steps move x %s to %s, z is %s", x.Shape, moved[0].Shape, z.Shape)
	}
	return []TensorType{like(z, z.Shape.Clone(), z.DType)}, nil
}

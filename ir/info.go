package ir

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir/opspec"
)

// ShapeRule infers result types from operand types and attributes, or
// returns an error naming the rule that the operands break.
type ShapeRule func(in []TensorType, attrs Attrs) ([]TensorType, error)

// OpInfo is one generated op-table entry.
type OpInfo struct {
	Name     string
	Doc      string
	Operands []string
	Variadic bool
	Attrs    []opspec.Attr
	Results  int
	Shape    ShapeRule
	Class    string // op class (opspec.Op.Class); fusion rules come in families, ops in classes
	Fused    bool
	// SFPU: the op is one SFPU op per element (the ir/sfpu Table
	// entry of the same name) and chains into eltwise_chain.
	SFPU bool
}

// Info returns the table entry for k; it panics on an invalid kind.
func (k OpKind) Info() *OpInfo {
	if k <= InvalidOp || int(k) >= len(opInfos) {
		panic(fmt.Sprintf("ir: invalid op kind %d", int(k)))
	}
	return &opInfos[k]
}

func (k OpKind) String() string {
	if k <= InvalidOp || int(k) >= len(opInfos) {
		return fmt.Sprintf("op(%d)", int(k))
	}
	return opInfos[k].Name
}

// AllOpKinds lists every valid op kind in table order.
func AllOpKinds() []OpKind {
	ks := make([]OpKind, 0, len(opInfos)-1)
	for k := InvalidOp + 1; int(k) < len(opInfos); k++ {
		ks = append(ks, k)
	}
	return ks
}

// LookupOp finds an op kind by its table name.
func LookupOp(name string) (OpKind, bool) {
	for k := InvalidOp + 1; int(k) < len(opInfos); k++ {
		if opInfos[k].Name == name {
			return k, true
		}
	}
	return InvalidOp, false
}

// checkAttrs verifies attribute presence and Go types against the table.
func checkAttrs(info *OpInfo, attrs Attrs) error {
	known := map[string]bool{}
	for _, a := range info.Attrs {
		known[a.Name] = true
		v, ok := attrs[a.Name]
		if !ok {
			if !a.Optional {
				return fmt.Errorf("missing attribute %q", a.Name)
			}
			continue
		}
		okType := false
		switch a.Kind {
		case opspec.AttrInt:
			_, okType = v.(int)
		case opspec.AttrFloat:
			_, okType = v.(float64)
		case opspec.AttrString:
			_, okType = v.(string)
		case opspec.AttrInts:
			_, okType = v.([]int)
		case opspec.AttrDType:
			_, okType = v.(DType)
		}
		if !okType {
			return fmt.Errorf("attribute %q has Go type %T, want %s", a.Name, v, attrKindName(a.Kind))
		}
	}
	for _, k := range attrs.Keys() {
		if k == FidelityAttr {
			s, ok := attrs[k].(string)
			if !ok {
				return fmt.Errorf("attribute %q has Go type %T, want string", k, attrs[k])
			}
			if _, err := ParseMathFidelity(s); err != nil {
				return fmt.Errorf("attribute %q: %w", k, err)
			}
			continue
		}
		if !known[k] {
			return fmt.Errorf("unknown attribute %q", k)
		}
	}
	return nil
}

func attrKindName(k opspec.AttrKind) string {
	return [...]string{"int", "float", "string", "ints", "dtype"}[k]
}

// InferTypes runs the op table's checks and shape rule for kind on the given
// operands and attributes.
func InferTypes(kind OpKind, operands []*Value, attrs Attrs) ([]TensorType, error) {
	info := kind.Info()
	n := len(info.Operands)
	if (!info.Variadic && len(operands) != n) || (info.Variadic && len(operands) < n) {
		return nil, fmt.Errorf("%s takes %d operands (%v), got %d", info.Name, n, info.Operands, len(operands))
	}
	if err := checkAttrs(info, attrs); err != nil {
		return nil, fmt.Errorf("%s: %w", info.Name, err)
	}
	in := make([]TensorType, len(operands))
	for i, v := range operands {
		if v == nil {
			return nil, fmt.Errorf("%s: operand %d is nil", info.Name, i)
		}
		in[i] = v.Type
	}
	out, err := info.Shape(in, attrs)
	if err != nil {
		return nil, fmt.Errorf("%s%s: %w", info.Name, operandShapes(in), err)
	}
	if len(out) != info.Results {
		return nil, fmt.Errorf("%s: shape rule returned %d results, table says %d", info.Name, len(out), info.Results)
	}
	return out, nil
}

func operandShapes(in []TensorType) string {
	s := "("
	for i, t := range in {
		if i > 0 {
			s += ", "
		}
		s += t.Shape.String() + " " + t.DType.String()
	}
	return s + ")"
}

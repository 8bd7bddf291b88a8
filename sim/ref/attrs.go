package ref

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
)

// Attribute accessors that fail, instead of defaulting, when an attribute
// is absent or has the wrong Go type.

func attrFloat(op *ir.Op, name string) (float64, error) {
	v, ok := op.Attrs[name]
	if !ok {
		return 0, fmt.Errorf("missing float attribute %q", name)
	}
	f, ok := v.(float64)
	if !ok {
		return 0, fmt.Errorf("attribute %q is %T, want float64", name, v)
	}
	return f, nil
}

func attrDType(op *ir.Op, name string) (ir.DType, error) {
	v, ok := op.Attrs[name]
	if !ok {
		return ir.InvalidDType, fmt.Errorf("missing dtype attribute %q", name)
	}
	d, ok := v.(ir.DType)
	if !ok {
		return ir.InvalidDType, fmt.Errorf("attribute %q is %T, want ir.DType", name, v)
	}
	return d, nil
}

func attrInts(op *ir.Op, name string) ([]int, error) {
	v, ok := op.Attrs[name]
	if !ok {
		return nil, fmt.Errorf("missing ints attribute %q", name)
	}
	s, ok := v.([]int)
	if !ok {
		return nil, fmt.Errorf("attribute %q is %T, want []int", name, v)
	}
	return s, nil
}

func attrInt(op *ir.Op, name string) (int, error) {
	v, ok := op.Attrs[name]
	if !ok {
		return 0, fmt.Errorf("missing int attribute %q", name)
	}
	i, ok := v.(int)
	if !ok {
		return 0, fmt.Errorf("attribute %q is %T, want int", name, v)
	}
	return i, nil
}

func attrString(op *ir.Op, name string) (string, error) {
	v, ok := op.Attrs[name]
	if !ok {
		return "", fmt.Errorf("missing string attribute %q", name)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("attribute %q is %T, want string", name, v)
	}
	return s, nil
}

// attrAxis reads int attribute name as an axis of a rank-r tensor; a
// negative axis counts from the end (-1 is the last dim).
func attrAxis(op *ir.Op, name string, r int) (int, error) {
	a, err := attrInt(op, name)
	if err != nil {
		return 0, err
	}
	return resolveAxis(a, r)
}

// resolveAxis resolves a possibly negative axis against rank r.
func resolveAxis(axis, r int) (int, error) {
	a := axis
	if a < 0 {
		a += r
	}
	if a < 0 || a >= r {
		return 0, fmt.Errorf("rule axis: axis %d is out of range for rank %d", axis, r)
	}
	return a, nil
}

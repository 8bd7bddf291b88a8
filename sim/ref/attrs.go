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

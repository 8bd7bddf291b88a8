package ir

import "fmt"

// Option sets an optional attribute in a generated builder method.
type Option func(Attrs)

// With returns an Option that sets attribute name to value.
func With(name string, value any) Option { return func(a Attrs) { a[name] = value } }

// WithDType sets the optional "dtype" attribute (the result dtype).
func WithDType(dt DType) Option { return With("dtype", dt) }

// Builder appends ops to a graph. The first error is kept and returned by
// Finish; after an error, methods keep returning placeholder values so model
// code needs no error checks per op.
type Builder struct {
	G   *Graph
	cur *Region
	err error
}

// NewBuilder starts a graph named name.
func NewBuilder(name string) *Builder { return &Builder{G: NewGraph(name)} }

// Err returns the first error recorded so far.
func (b *Builder) Err() error { return b.err }

// Fail records err (if it is the first error).
func (b *Builder) Fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Input declares a host-fed activation.
func (b *Builder) Input(name string, t TensorType) *Value {
	v := b.G.NewValue(KindInput, name, t)
	b.G.Inputs = append(b.G.Inputs, v)
	return v
}

// Weight declares a parameter; name is its checkpoint name.
func (b *Builder) Weight(name string, t TensorType) *Value {
	v := b.G.NewValue(KindWeight, name, t)
	b.G.Weights = append(b.G.Weights, v)
	return v
}

// State declares persistent device state.
func (b *Builder) State(name string, t TensorType) *Value {
	v := b.G.NewValue(KindState, name, t)
	b.G.States = append(b.G.States, v)
	return v
}

// UpdateState records that state s holds v's contents after the step.
func (b *Builder) UpdateState(s, v *Value) {
	if s.Kind != KindState {
		b.Fail(fmt.Errorf("UpdateState: %s (%q) is a %s, not state", s, s.Name, s.Kind))
		return
	}
	if !s.Type.Shape.Equal(v.Type.Shape) || s.Type.DType != v.Type.DType {
		b.Fail(fmt.Errorf("UpdateState: state %q is %s, new value is %s", s.Name, s.Type, v.Type))
		return
	}
	b.G.StateUpdates[s] = v
}

// Region starts a new region; following ops go into it.
func (b *Builder) Region(kind RegionKind, index int) *Region {
	r := &Region{Kind: kind, Index: index}
	b.G.Regions = append(b.G.Regions, r)
	b.cur = r
	return r
}

// Output marks values as graph outputs.
func (b *Builder) Output(vs ...*Value) { b.G.Outputs = append(b.G.Outputs, vs...) }

// Emit appends an op of kind to the current region and returns its results.
// Types are inferred by the op's shape rule; on error the error is recorded
// (naming the op and region) and placeholder results are returned.
func (b *Builder) Emit(kind OpKind, operands []*Value, attrs Attrs) []*Value {
	if b.cur == nil {
		b.Region("main", -1)
	}
	if attrs == nil {
		attrs = Attrs{}
	}
	op := &Op{ID: b.G.NewOpID(), Kind: kind, Operands: operands, Attrs: attrs, Region: b.cur}
	types, err := InferTypes(kind, operands, attrs)
	if err != nil {
		b.Fail(fmt.Errorf("%s: %w", b.cur.Label(), err))
		types = make([]TensorType, kind.Info().Results)
		for i := range types {
			types[i] = T(FP32, 1)
		}
	}
	for _, t := range types {
		r := b.G.NewValue(KindResult, "", t)
		r.Def = op
		op.Results = append(op.Results, r)
	}
	b.cur.Ops = append(b.cur.Ops, op)
	return op.Results
}

// Finish returns the graph, or the first error; the graph is verified.
func (b *Builder) Finish() (*Graph, error) {
	if b.err != nil {
		return nil, b.err
	}
	if err := Verify(b.G); err != nil {
		return nil, err
	}
	return b.G, nil
}

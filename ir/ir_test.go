package ir

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir/internal/opgen"
	"github.com/tcc-dev/tcc/ir/opspec"
)

// TestOpsGenFresh fails when ops_gen.go differs from what the generator
// produces from the op table; fix with `go generate ./ir`.
func TestOpsGenFresh(t *testing.T) {
	want, err := opgen.Generate(opspec.All())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("ops_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Fatalf("ops_gen.go is stale: run `go generate ./ir`")
	}
	if !bytes.HasPrefix(got, []byte("// Code generated ")) || !bytes.Contains(got, []byte("DO NOT EDIT.")) {
		t.Fatalf("ops_gen.go lacks the generated-code header")
	}
}

func TestOpTableMatchesSpec(t *testing.T) {
	specs := opspec.All()
	kinds := AllOpKinds()
	if len(kinds) != len(specs) {
		t.Fatalf("%d kinds, %d specs", len(kinds), len(specs))
	}
	for i, k := range kinds {
		if k.String() != specs[i].Name || k.Info().Doc != specs[i].Doc {
			t.Errorf("kind %d: got %q, want %q", k, k.String(), specs[i].Name)
		}
		if got, ok := LookupOp(specs[i].Name); !ok || got != k {
			t.Errorf("LookupOp(%q) = %v, %v", specs[i].Name, got, ok)
		}
	}
}

func TestGeneratorRejectsBadTable(t *testing.T) {
	base := opspec.Op{Name: "x", Go: "X", Doc: "d", Shape: "shapeSame", Results: 1}
	tests := []struct {
		name string
		ops  []opspec.Op
		want string
	}{
		{"duplicate", []opspec.Op{base, base}, "duplicate"},
		{"no doc", []opspec.Op{{Name: "x", Go: "X", Shape: "s", Results: 1}}, "required"},
		{"multiline doc", []opspec.Op{{Name: "x", Go: "X", Doc: "a\nb", Shape: "s", Results: 1}}, "one line"},
		{"no results", []opspec.Op{{Name: "x", Go: "X", Doc: "d", Shape: "s"}}, "no results"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := opgen.Generate(tc.ops)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestBuilderInfersTypes(t *testing.T) {
	b := NewBuilder("t")
	x := b.Input("x", T(BF16, 1, 32, 64))
	w := b.Weight("w", T(BFP8B, 64, 128))
	b.Region("mlp", 0)
	y := b.Matmul(x, w)
	z := b.Matmul(x, w, WithDType(FP32))
	s := b.Add(y, b.Mean(y))
	b.Output(s, z)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Shape{1, 32, 128}, s.Type.Shape); diff != "" {
		t.Errorf("add shape (-want +got):\n%s", diff)
	}
	if y.Type.DType != BF16 || z.Type.DType != FP32 {
		t.Errorf("matmul dtypes %s, %s; want bf16, fp32", y.Type.DType, z.Type.DType)
	}
	if g.NumOps() != 4 {
		t.Errorf("got %d ops, want 4", g.NumOps())
	}
}

func TestBuilderErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *Builder)
		want  string
	}{
		{"matmul inner", func(b *Builder) {
			b.Matmul(b.Input("x", T(BF16, 32, 64)), b.Weight("w", T(BF16, 32, 128)))
		}, "rule matmul-inner"},
		{"broadcast", func(b *Builder) {
			b.Add(b.Input("x", T(BF16, 32, 64)), b.Input("y", T(BF16, 32, 48)))
		}, "rule broadcast"},
		{"embedding ids", func(b *Builder) {
			b.Embedding(b.Input("ids", T(BF16, 1, 4)), b.Weight("e", T(BF16, 100, 64)))
		}, "rule embedding-ids"},
		{"reshape numel", func(b *Builder) {
			b.Reshape(b.Input("x", T(BF16, 32, 64)), []int{3, 7})
		}, "rule reshape-numel"},
		{"norm weight", func(b *Builder) {
			b.RMSNorm(b.Input("x", T(BF16, 32, 64)), b.Weight("w", T(BF16, 63)), 1e-6, 0)
		}, "rule norm-weight"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuilder("t")
			b.Region("mlp", 2)
			tc.build(b)
			_, err := b.Finish()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "layer 2") {
				t.Fatalf("got %v, want error naming layer 2 and %q", err, tc.want)
			}
		})
	}
}

func TestVerifyCatchesCorruption(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(g *Graph, x, y *Value)
		want    string
	}{
		{"use before def", func(g *Graph, x, y *Value) {
			ops := g.Regions[0].Ops
			ops[0], ops[1] = ops[1], ops[0]
		}, "rule ssa-order"},
		{"wrong result type", func(g *Graph, x, y *Value) { y.Type.Shape = Shape{1, 2} }, "rule result-type"},
		{"block float row major", func(g *Graph, x, y *Value) { y.Type.DType = BFP8B; y.Type.Layout = RowMajorLayout }, "rule block-float-layout"},
		{"shard spec missing", func(g *Graph, x, y *Value) { x.Type.Mem = MemoryConfig{Kind: L1HeightSharded} }, "rule shard-spec"},
		{"transposed tiles on an input", func(g *Graph, x, y *Value) { x.Type.TilesTransposed = true }, "rule transposed-tiles"},
		{"transposed tiles on a result", func(g *Graph, x, y *Value) { y.Type.TilesTransposed = true }, "rule transposed-tiles"},
		{"undefined output", func(g *Graph, x, y *Value) { g.Outputs = append(g.Outputs, &Value{ID: 99}) }, "rule output"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuilder("t")
			x := b.Input("x", T(BF16, 32, 64))
			b.Region("mlp", 0)
			y := b.SiLU(x)
			b.Output(b.Exp(y))
			g, err := b.Finish()
			if err != nil {
				t.Fatal(err)
			}
			tc.corrupt(g, x, y)
			err = Verify(g)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestShapeHelpers(t *testing.T) {
	s := Shape{2, 33, 70}
	if diff := cmp.Diff(Shape{2, 64, 96}, s.Padded()); diff != "" {
		t.Errorf("Padded (-want +got):\n%s", diff)
	}
	if got := s.Tiles(); got != 2*2*3 {
		t.Errorf("Tiles = %d, want 12", got)
	}
	m, err := ParseMesh("1x4")
	if err != nil || m.Devices() != 4 {
		t.Errorf("ParseMesh: %v %v", m, err)
	}
	for _, bad := range []string{"", "0x2", "1x", "ax2", "1x2x3"} {
		if _, err := ParseMesh(bad); err == nil {
			t.Errorf("ParseMesh(%q) accepted", bad)
		}
	}
	for _, d := range AllDTypes {
		got, err := ParseDType(d.String())
		if err != nil || got != d {
			t.Errorf("ParseDType(%q) = %v, %v", d, got, err)
		}
	}
}

func TestFidelityPasses(t *testing.T) {
	for _, tc := range []struct {
		f    MathFidelity
		want int
	}{{LoFi, 1}, {HiFi2, 2}, {HiFi3, 3}, {HiFi4, 4}, {MathFidelity(1), 0}, {MathFidelity(5), 0}} {
		t.Run(tc.f.String(), func(t *testing.T) {
			if got := tc.f.Passes(); got != tc.want {
				t.Errorf("%s.Passes() = %d, want %d", tc.f, got, tc.want)
			}
		})
	}
}

// A matmul whose weight is stored in transposed tiles feeds it to SrcB,
// and OpFidelity takes ExactMatmulFidelityOn's SrcB column (HiFi2 for
// block floats); the same weight in tile layout keeps the SrcA column.
func TestOpFidelityWeightsOnSrcB(t *testing.T) {
	for _, tc := range []struct {
		dt         DType
		transposed bool
		want       MathFidelity
	}{
		{BFP8B, false, HiFi4}, {BFP8B, true, HiFi2},
		{BFP4B, false, HiFi3}, {BFP4B, true, HiFi2},
		{BF16, true, HiFi4},
	} {
		t.Run(fmt.Sprintf("%s/transposed_%v", tc.dt, tc.transposed), func(t *testing.T) {
			b := NewBuilder("t")
			x := b.Input("x", T(BF16, 32, 64))
			wt := T(tc.dt, 64, 32)
			wt.TilesTransposed = tc.transposed
			w := b.Weight("w", wt)
			b.Region("mlp", 0)
			y := b.Matmul(x, w)
			b.Output(y)
			if _, err := b.Finish(); err != nil {
				t.Fatal(err)
			}
			if got := WeightSourceOf(w) == WeightsOnSrcB; got != tc.transposed {
				t.Errorf("WeightSourceOf = SrcB %v, want %v", got, tc.transposed)
			}
			if f, err := OpFidelity(y.Def, HiFi4); err != nil || f != tc.want {
				t.Errorf("OpFidelity = %v, %v; want %v", f, err, tc.want)
			}
		})
	}
}

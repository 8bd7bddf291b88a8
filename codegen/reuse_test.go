package codegen

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/passes"
)

// checkReads runs b's programs in order on a model of its buffers that
// records which value each buffer holds, and fails when a program reads a
// buffer (through an operand) whose last write was another value's: a
// shared buffer must still hold every value its readers expect. It also
// checks that the values of each shared buffer have disjoint live ranges
// and that the buffer is as large as the largest.
func checkReads(t *testing.T, b *Build) {
	t.Helper()
	holds := map[string]*ir.Value{}
	for _, s := range b.Buffers {
		if s.Values == nil {
			holds[s.Name] = s.Value // inputs, weights, states, unshared results
		}
	}
	for i, p := range b.Programs {
		for _, v := range p.Op.Operands {
			s := b.BufferOf(v)
			if s == nil {
				t.Fatalf("program %d (%s): operand %s has no buffer", i, p.Op.Where(), v)
			}
			if got, want := holds[s.Name], b.Holder(v); got != want {
				t.Errorf("program %d (%s) reads %s from buffer %q, which holds %v", i, p.Op.Where(), want, s.Name, got)
			}
		}
		for _, r := range p.Op.Results {
			if s := b.BufferOf(r); s != nil {
				holds[s.Name] = b.Holder(r)
			}
		}
	}
	for _, s := range b.Buffers {
		for _, v := range s.Values {
			ps, pages, err := lower.PageLayout(v.Type)
			if err != nil || ps != s.PageSize || pages > s.Pages || v.Type.DType != s.DType || v.Type.Layout != s.Layout {
				t.Errorf("buffer %q (%d pages of %d B %s %s) holds %s %s (%d pages of %d B, %v)", s.Name, s.Pages, s.PageSize, s.DType, s.Layout, v, v.Type, pages, ps, err)
			}
		}
	}
}

// sharing lists each shared buffer's values by name, in b.Buffers order.
func sharing(b *Build) [][]string {
	var out [][]string
	for _, s := range b.Buffers {
		if len(s.Values) < 2 {
			continue
		}
		var names []string
		for _, v := range s.Values {
			names = append(names, v.Name)
		}
		out = append(out, names)
	}
	return out
}

func named(v *ir.Value, name string) *ir.Value { v.Name = name; return v }

// TestBufferReuse checks which intermediates share a buffer: values whose
// live ranges (writer to last reader, through views) do not overlap, and
// never an operand with a result of the same op, a value still read
// later, or a graph output.
func TestBufferReuse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(b *ir.Builder)
		want  [][]string
	}{
		{
			// e1 [0,1] e2 [1,2] e3 [2,3] e4 [3,4]: every other one shares.
			name: "chain",
			build: func(b *ir.Builder) {
				x := b.Input("x", ir.T(ir.BF16, 1, 1, 64, 32))
				e1 := named(b.Exp(x), "e1")
				e2 := named(b.Exp(e1), "e2")
				e3 := named(b.Exp(e2), "e3")
				e4 := named(b.Exp(e3), "e4")
				b.Output(b.Exp(e4))
			},
			want: [][]string{{"e1", "e3"}, {"e2", "e4"}},
		},
		{
			// e1 is read again by the add (op 3): e3 must not take its
			// buffer; the add's result takes e2's, free after op 2.
			name: "long-lived",
			build: func(b *ir.Builder) {
				x := b.Input("x", ir.T(ir.BF16, 1, 1, 64, 32))
				e1 := named(b.Exp(x), "e1")
				e2 := named(b.Exp(e1), "e2")
				e3 := named(b.Exp(e2), "e3")
				a := named(b.Add(e1, e3), "a")
				b.Output(b.Exp(a))
			},
			want: [][]string{{"e2", "a"}},
		},
		{
			// e1 is read through its view by op 4: it lives until then
			// although no op reads e1 itself after the reshape (op 1).
			name: "view",
			build: func(b *ir.Builder) {
				x := b.Input("x", ir.T(ir.BF16, 1, 2, 64, 32))
				e1 := named(b.Exp(x), "e1")
				v := b.Reshape(e1, []int{1, 2, 2, 32, 32})
				e2 := named(b.Exp(x), "e2")
				e3 := named(b.Exp(e2), "e3")
				f := named(b.Exp(v), "f")
				e4 := named(b.Exp(e3), "e4")
				b.Output(f, e4)
			},
			want: nil,
		},
		{
			// A smaller value takes a free larger buffer.
			name: "smaller",
			build: func(b *ir.Builder) {
				x := b.Input("x", ir.T(ir.BF16, 1, 1, 64, 64))
				y := b.Input("y", ir.T(ir.BF16, 1, 1, 32, 32))
				big := named(b.Exp(x), "big")       // 4 tiles, ops 0..2
				small := named(b.Exp(y), "small")   // 1 tile, ops 1..3
				big2 := named(b.Exp(big), "big2")   // ops 2..4
				small2 := named(b.Exp(small), "s2") // op 3: big's buffer is free
				b.Output(b.Exp(big2), b.Exp(small2))
			},
			want: [][]string{{"big", "s2"}},
		},
		{
			// A larger value grows a free smaller buffer to its size.
			name: "larger",
			build: func(b *ir.Builder) {
				x := b.Input("x", ir.T(ir.BF16, 1, 1, 64, 64))
				y := b.Input("y", ir.T(ir.BF16, 1, 1, 32, 32))
				small := named(b.Exp(y), "small")   // 1 tile, ops 0..2
				big := named(b.Exp(x), "big")       // 4 tiles, ops 1..3
				small2 := named(b.Exp(small), "s2") // ops 2..4
				big2 := named(b.Exp(big), "big2")   // op 3: small's buffer is free
				b.Output(b.Exp(small2), b.Exp(big2))
			},
			want: [][]string{{"small", "big2"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bld := ir.NewBuilder(tc.name)
			tc.build(bld)
			g, err := bld.Finish()
			if err != nil {
				t.Fatal(err)
			}
			b, err := Compile(g, target.Blackhole())
			if err != nil {
				t.Fatal(err)
			}
			checkReads(t, b)
			if diff := cmp.Diff(tc.want, sharing(b)); diff != "" {
				t.Errorf("shared buffers (-want +got):\n%s", diff)
			}
			for _, v := range g.Outputs {
				if s := b.BufferOf(v); s == nil || s.Values != nil {
					t.Errorf("output %s is in buffer %+v, want its own", v, s)
				}
			}
		})
	}
}

// fusedQwen is the fused qwen27b graph with flags on mesh 1x2.
func fusedQwen(t *testing.T, flags map[string]string) *ir.Graph {
	t.Helper()
	m := qwen27b.Model{}
	args, err := models.DefaultArgs(m, flags)
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Build(args, ir.Mesh{Rows: 1, Cols: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := passes.Run(g, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	return g
}

// qwenBuild compiles fusedQwen(flags).
func qwenBuild(t *testing.T, flags map[string]string) *Build {
	t.Helper()
	b, err := Compile(fusedQwen(t, flags), target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestQwenBufferReuse: in the small qwen27b's prefill and decode builds
// every program reads the value it expects from every buffer, the shared
// buffers hold most intermediates, GraphMemory counts what the build
// allocates, and compiling again gives the same names and sizes.
func TestQwenBufferReuse(t *testing.T) {
	small := filepath.Join("..", "models", "qwen27b", "testdata", "small.json")
	for _, tc := range []struct {
		name  string
		flags map[string]string
	}{
		{"decode", map[string]string{"config": small}},
		{"prefill", map[string]string{"config": small, "mode": "prefill", "seq": "64"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := qwenBuild(t, tc.flags)
			checkReads(t, b)
			if u, err := GraphMemory(b.Graph, b.Target); err != nil || u != b.Memory() {
				t.Errorf("graph memory %+v (%v), the build's %+v", u, err, b.Memory())
			}
			shared, values := 0, 0
			for _, s := range b.Buffers {
				if s.Values != nil {
					shared++
					values += len(s.Values)
				}
			}
			if shared == 0 || values < 5*shared {
				t.Errorf("%d shared buffers hold %d values; want many values per buffer", shared, values)
			}
			again := qwenBuild(t, tc.flags)
			list := func(b *Build) []string {
				var out []string
				for _, s := range b.Buffers {
					out = append(out, fmt.Sprintf("%s %d %d", s.Name, s.Pages, len(s.Values)))
				}
				return out
			}
			if diff := cmp.Diff(list(b), list(again)); diff != "" {
				t.Errorf("buffers differ between two compiles (-first +second):\n%s", diff)
			}
			t.Logf("%d buffers, %d shared holding %d values", len(b.Buffers), shared, values)
		})
	}
}

// TestPrefillChunkFitsLongCache: a 512-token prefill step of the full
// qwen27b with a 262,144-row KV cache fits a Blackhole's DRAM on 1x2 once
// its intermediates share buffers (each its own: 11.47 GiB of them, 32.06
// GiB in all, over by 192 MiB).
func TestPrefillChunkFitsLongCache(t *testing.T) {
	g := fusedQwen(t, map[string]string{"mode": "prefill", "seq": "512", "max-seq": "262144"})
	u, err := GraphMemory(g, target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	if !u.Fits() || u.Other > 1<<30 {
		t.Errorf("512-token prefill at --max-seq 262144: %s; want it to fit with at most 1 GiB of intermediates", u)
	}
	t.Logf("%s", u)
}

package codegen

import (
	"encoding/binary"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/models/tinymlp"
	"github.com/tcc-dev/tcc/passes"
	"github.com/tcc-dev/tcc/sim/kexec"
	"github.com/tcc-dev/tcc/sim/ref"
)

var sizes = tinymlp.Sizes{Layers: 2, Hidden: 128, Intermediate: 256, Vocab: 512, Batch: 1}

// fusedTinyMLP is tiny-mlp after the default pipeline (fuse, place).
func fusedTinyMLP(t *testing.T, s tinymlp.Sizes) *ir.Graph {
	t.Helper()
	g := tinymlp.BuildGraph(s)
	if _, err := passes.Run(g, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestCompileTinyMLPStructure(t *testing.T) {
	g := fusedTinyMLP(t, sizes)
	b, err := Compile(g, target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range b.Programs {
		got = append(got, p.Op.Name())
	}
	layer := []string{"rms_norm", "matmul_swiglu", "matmul_add"}
	want := append(append(append([]string{"embedding"}, layer...), layer...), "rmsnorm_matmul", "argmax")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("program ops (-want +got):\n%s", diff)
	}
	// 1 input, 3 + 4 per layer weights, the two outputs (logits, next
	// token) and three buffers the seven intermediates share by liveness
	// (a layer's residual input, its norm and its MLP hidden are live at
	// once).
	if got, want := len(b.Buffers), 1+3+4*sizes.Layers+2+3; got != want {
		t.Errorf("%d buffers, want %d", got, want)
	}
	emb := b.Buffer("model.embed_tokens.weight")
	if emb == nil || emb.Layout != ir.RowMajorLayout || emb.PageSize != 2*sizes.Hidden || emb.Pages != sizes.Vocab {
		t.Errorf("embedding table buffer = %+v, want %d row-major pages of %d bytes", emb, sizes.Vocab, 2*sizes.Hidden)
	}
	gate := b.Buffer("model.layers.0.mlp.gate_proj.weight")
	if gate == nil || gate.PageSize != 1088 || gate.Pages != 4*8 {
		t.Errorf("gate weight buffer = %+v, want 32 bfp8_b tiles", gate)
	}
	// Deterministic: compiling again gives the same programs.
	b2, err := Compile(fusedTinyMLP(t, sizes), target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	for i := range b.Programs {
		if diff := cmp.Diff(b.Programs[i].Kernel, b2.Programs[i].Kernel); diff != "" {
			t.Fatalf("program %d differs between two compiles (-first +second):\n%s", i, diff)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	// Lowerings address DRAM-interleaved and L1 tensors; a DRAM-sharded
	// value is an error naming each op, its layer and shapes.
	g := tinymlp.BuildGraph(sizes)
	for _, r := range g.Regions {
		if r.Kind == "mlp" || r.Kind == "head" {
			r.Ops[0].Result().Type.Mem = ir.MemoryConfig{Kind: ir.DRAMWidthSharded, Shard: &ir.ShardSpec{Grid: ir.CoreRange{X1: 7}, Shape: [2]int{32, 32}}}
		}
	}
	_, err := Compile(g, target.Blackhole())
	if err == nil {
		t.Fatal("Compile of a graph with L1 values succeeded")
	}
	for _, w := range []string{"op square", "layer 0 (mlp)", "layer 1 (mlp)", "head", "[1,128] bf16 tile", "rule placement"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not mention %q:\n%v", w, err)
		}
	}
	if _, err := Compile(nil, target.Blackhole()); err == nil {
		t.Error("Compile(nil) succeeded")
	}
}

// upload writes a value's logical row-major data to its buffer.
func upload(t *testing.T, d *kexec.Device, s BufferSpec, data []float32) {
	t.Helper()
	if s.Layout == ir.TileLayout {
		b, r, c := dims(s.Shape)
		if err := d.WriteTiles(s.Name, numerics.TilizeBatch(data, b, r, c)); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw := make([]byte, 0, len(data)*4)
	for _, x := range data {
		switch s.DType {
		case ir.BF16:
			raw = binary.LittleEndian.AppendUint16(raw, numerics.BF16Bits(x))
		case ir.UInt32:
			raw = binary.LittleEndian.AppendUint32(raw, uint32(x))
		default:
			t.Fatalf("upload %s: unsupported row-major dtype %s", s.Name, s.DType)
		}
	}
	if err := d.WritePages(s.Name, 0, raw); err != nil {
		t.Fatal(err)
	}
}

func download(t *testing.T, d *kexec.Device, s *BufferSpec) []float32 {
	t.Helper()
	if s.Layout == ir.TileLayout {
		tiles, err := d.ReadTiles(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		b, r, c := dims(s.Shape)
		return numerics.UntilizeBatch(tiles, b, r, c)
	}
	if s.DType != ir.UInt32 {
		t.Fatalf("download %s: unsupported row-major dtype %s", s.Name, s.DType)
	}
	raw, err := d.ReadPages(s.Name, 0, s.Pages)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, s.Shape.Numel())
	for i := range out {
		out[i] = float32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// dims is the (batch, rows, cols) matrix view of a tile-layout shape.
func dims(s ir.Shape) (int, int, int) {
	if s.Rank() == 1 {
		return 1, 1, s[0]
	}
	r, c := s[len(s)-2], s[len(s)-1]
	return s.Numel() / (r * c), r, c
}

// TestTinyMLPOnSim compiles fused tiny-mlp, runs every program in order on
// the simulator and compares the logits and the argmax with ref.Eval.
func TestTinyMLPOnSim(t *testing.T) {
	for _, batch := range []int{1, 5} {
		s := sizes
		s.Batch = batch
		g := fusedTinyMLP(t, s)
		b, err := Compile(g, target.Blackhole())
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewSource(int64(batch)))
		env := map[*ir.Value]ref.Tensor{}
		for _, v := range g.Inputs {
			ids := make([]float32, v.Type.Shape.Numel())
			for i := range ids {
				ids[i] = float32(rng.Intn(s.Vocab))
			}
			env[v] = ref.Tensor{Shape: v.Type.Shape, Data: ids}
		}
		for _, v := range g.Weights {
			env[v] = ref.Tensor{Shape: v.Type.Shape, Data: tinymlp.Model{}.InitWeight(v, rng)}
		}
		want, err := ref.Eval(g, env, ref.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}

		d := kexec.NewDevice(b.Target)
		for _, spec := range b.Buffers {
			if _, err := d.Alloc(spec.Buffer()); err != nil {
				t.Fatal(err)
			}
			if v, ok := env[spec.Value]; ok {
				upload(t, d, spec, v.Data)
			}
		}
		for _, p := range b.Programs {
			if _, err := d.Run(p.Kernel, kexec.RunOptions{}); err != nil {
				t.Fatalf("%s: %v", p.Op.Where(), err)
			}
		}
		logits, ids := g.Outputs[0], g.Outputs[1]
		got := download(t, d, b.BufferOf(logits))
		pcc, rel := numerics.PCC(want[logits].Data, got), numerics.MaxRelErr(want[logits].Data, got)
		t.Logf("batch %d: logits PCC %.6f, max rel err %.3g", batch, pcc, rel)
		if pcc < 0.999 {
			t.Errorf("batch %d: logits PCC %.6f < 0.999", batch, pcc)
		}
		gotIDs := download(t, d, b.BufferOf(ids))
		for r := range gotIDs {
			row := got[r*s.Vocab : (r+1)*s.Vocab]
			first := 0
			for i, x := range row {
				if x > row[first] {
					first = i
				}
			}
			// The device argmax of the device logits is exact.
			if int(gotIDs[r]) != first {
				t.Errorf("batch %d row %d: device argmax %v, first maximum of the device logits is %d", batch, r, gotIDs[r], first)
			}
			// Against the reference, only a near-tie may flip the index.
			w := int(want[ids].Data[r])
			if w != first && math.Abs(float64(row[w]-row[first])) > 1e-2*math.Abs(float64(row[first])) {
				t.Errorf("batch %d row %d: argmax %d (logit %v), reference %d (logit %v)", batch, r, first, row[first], w, row[w])
			}
		}
	}
}

// TestReshapeViews checks that a reshape keeping every page (a view) gets
// no program and no buffer of its own, that its readers read its operand's
// buffer, and that the results on the simulator are the reference's; a
// reshape that moves values, and one whose result is a graph output, keep
// their programs.
func TestReshapeViews(t *testing.T) {
	b := ir.NewBuilder("views")
	x := b.Input("x", ir.T(ir.BF16, 1, 2, 64, 32))
	e := b.Exp(x)
	view := b.Reshape(e, []int{1, 2, 2, 32, 32}) // [.., 64, 32] -> [.., 2, 32, 32]: same pages
	moved := b.Reshape(b.Exp(view), []int{1, 64, 64})
	out := b.Reshape(b.Exp(moved), []int{1, 2, 2048}) // moves values, and an output
	b.Output(out)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	bd, err := Compile(g, target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, p := range bd.Programs {
		kinds = append(kinds, p.Op.Kind.String())
	}
	if diff := cmp.Diff([]string{"exp", "exp", "reshape", "exp", "reshape"}, kinds); diff != "" {
		t.Errorf("programs (-want +got):\n%s", diff)
	}
	if bd.BufferOf(view) == nil || bd.BufferOf(view).Name != bd.BufferOf(e).Name {
		t.Errorf("the view's buffer is %v, want its operand's %v", bd.BufferOf(view), bd.BufferOf(e))
	}
	rng := rand.New(rand.NewSource(1))
	data := make([]float32, x.Type.Shape.Numel())
	for i := range data {
		data[i] = float32(rng.NormFloat64())
	}
	env := map[*ir.Value]ref.Tensor{x: {Shape: x.Type.Shape, Data: data}}
	want, err := ref.Eval(g, env, ref.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	d := kexec.NewDevice(bd.Target)
	for _, spec := range bd.Buffers {
		if _, err := d.Alloc(spec.Buffer()); err != nil {
			t.Fatal(err)
		}
		if spec.Value == x {
			upload(t, d, spec, data)
		}
	}
	for _, p := range bd.Programs {
		if _, err := d.Run(p.Kernel, kexec.RunOptions{}); err != nil {
			t.Fatalf("%s: %v", p.Op.Where(), err)
		}
	}
	got := download(t, d, bd.BufferOf(out))
	if pcc := numerics.PCC(want[out].Data, got); pcc < 0.9999 {
		t.Errorf("output PCC %.6f against the reference", pcc)
	}
}

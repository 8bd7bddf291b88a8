package ir

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir/opspec"
)

// ---- helpers ----

// textDecompBuilder builds a Decomposition with its own ID space (starting at 0,
// so its numbers shadow the enclosing graph's).
type textDecompBuilder struct {
	t    testing.TB
	r    *Region
	next int
	d    *Decomposition
}

func newTextDecomp(t testing.TB, r *Region) *textDecompBuilder {
	return &textDecompBuilder{t: t, r: r, d: &Decomposition{}}
}

func (db *textDecompBuilder) in(kind ValueKind, name string, ty TensorType) *Value {
	v := &Value{ID: db.next, Name: name, Kind: kind, Type: ty}
	db.next++
	db.d.Inputs = append(db.d.Inputs, v)
	return v
}

func (db *textDecompBuilder) op(kind OpKind, attrs Attrs, operands ...*Value) []*Value {
	op := textMkOp(db.t, db.r, db.next, kind, attrs, operands...)
	db.next += 1 + len(op.Results)
	db.d.Ops = append(db.d.Ops, op)
	return op.Results
}

// textMkOp makes an op with ID id and results id+1, ... typed by InferTypes.
func textMkOp(t testing.TB, r *Region, id int, kind OpKind, attrs Attrs, operands ...*Value) *Op {
	t.Helper()
	if attrs == nil {
		attrs = Attrs{}
	}
	ts, err := InferTypes(kind, operands, attrs)
	if err != nil {
		t.Fatal(err)
	}
	op := &Op{ID: id, Kind: kind, Operands: operands, Attrs: attrs, Region: r}
	for i, ty := range ts {
		op.Results = append(op.Results, &Value{ID: id + 1 + i, Kind: KindResult, Type: ty, Def: op})
	}
	return op
}

// textAddRMSNormDecomp is the decomposed form of add_rmsnorm(a, b, w) with
// the given attrs: the add, then rms_norm of the sum; outputs the sum and
// the norm. b is a state.
func textAddRMSNormDecomp(t testing.TB, r *Region, a, b, w TensorType, eps, offset float64) *Decomposition {
	db := newTextDecomp(t, r)
	av := db.in(KindInput, "a", a)
	bv := db.in(KindState, "b", b)
	wv := db.in(KindWeight, "", w)
	h := db.op(OpAdd, nil, av, bv)[0]
	n := db.op(OpRMSNorm, Attrs{"eps": eps, "offset": offset}, h, wv)[0]
	db.d.Outputs = []*Value{h, n}
	return db.d
}

// textTinyMLP is the golden graph: every declaration kind, sharded and
// split types, prologue, one layer with a fused two-result add_rmsnorm and
// epilogue.
func textTinyMLP(t testing.TB) *Graph {
	t.Helper()
	b := NewBuilder("tiny_mlp")
	b.G.Mesh = Mesh{1, 2}
	tokens := b.Input("tokens", TensorType{Shape: Shape{1, 1}, DType: UInt32, Layout: RowMajorLayout, Mem: DRAM, Dist: Replicated})
	emb := b.Weight("model.embed_tokens.weight", T(BF16, 512, 64))
	nw := b.Weight("model.layers.0.post_attention_layernorm.weight", T(BF16, 64))
	upT := T(BFP8B, 64, 128)
	upT.Dist = Dist{Axis: 1}
	up := b.Weight("model.layers.0.mlp.up_proj.weight", upT)
	head := b.Weight("lm_head.weight", T(BFP4B, 64, 512))
	st := b.State("conv_state.0", TensorType{Shape: Shape{1, 1, 64}, DType: BF16, Layout: TileLayout,
		Mem: MemoryConfig{Kind: L1HeightSharded, Shard: &ShardSpec{Grid: CoreRange{0, 0, 7, 0}, Shape: [2]int{32, 64}}}, Dist: Replicated})
	b.Region("embed", -1)
	h := b.Embedding(tokens, emb)
	r := b.Region("mlp", 0)
	hn := b.AddRMSNorm(h, st, nw, 1e-6, 1)
	hn[1].Name = "normed"
	hn[0].Def.Rule = "FuseAddRMSNorm"
	hn[0].Def.Decomp = textAddRMSNormDecomp(t, r, h.Type, st.Type, nw.Type, 1e-6, 1)
	u := b.Matmul(hn[1], up, WithDType(FP32))
	s := b.SiLU(b.Typecast(u, BF16))
	y := b.Add(hn[0], b.Mean(s))
	b.UpdateState(st, y)
	b.Region("head", -1)
	logits := b.Matmul(b.Reshape(y, []int{1, 64}), head)
	b.Output(b.Argmax(logits), b.MulScalar(logits, 0.5))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Snapshots turn a graph into plain data so parsed and built graphs can be
// compared with cmp.
type textValSnap struct {
	ID   int
	Name string
	Kind ValueKind
	Type string
	Def  int // defining op's ID, -1 if none
}

type textOpSnap struct {
	ID       int
	Kind     string
	Operands []int
	Results  []textValSnap
	Attrs    Attrs
	Region   string
	Rule     string
	Decomp   *textDecompSnap
}

type textDecompSnap struct {
	Inputs  []textValSnap
	Ops     []textOpSnap
	Outputs []int
}

type textGraphSnap struct {
	Name                    string
	Mesh                    Mesh
	Inputs, Weights, States []textValSnap
	Regions                 [][]textOpSnap
	Labels                  []string
	Outputs                 []int
	Updates                 map[int]int
}

func textSnapVal(v *Value) textValSnap {
	s := textValSnap{ID: v.ID, Name: v.Name, Kind: v.Kind, Type: typeText(v.Type), Def: -1}
	if v.Def != nil {
		s.Def = v.Def.ID
	}
	return s
}

func textSnapVals(vs []*Value) []textValSnap {
	var out []textValSnap
	for _, v := range vs {
		out = append(out, textSnapVal(v))
	}
	return out
}

func textIDs(vs []*Value) []int {
	var out []int
	for _, v := range vs {
		out = append(out, v.ID)
	}
	return out
}

func textSnapOps(ops []*Op) []textOpSnap {
	var out []textOpSnap
	for _, op := range ops {
		s := textOpSnap{ID: op.ID, Kind: op.Name(), Operands: textIDs(op.Operands), Results: textSnapVals(op.Results),
			Attrs: op.Attrs, Region: op.Region.Label(), Rule: op.Rule}
		if d := op.Decomp; d != nil {
			s.Decomp = &textDecompSnap{Inputs: textSnapVals(d.Inputs), Ops: textSnapOps(d.Ops), Outputs: textIDs(d.Outputs)}
		}
		out = append(out, s)
	}
	return out
}

func textSnapGraph(g *Graph) textGraphSnap {
	s := textGraphSnap{Name: g.Name, Mesh: g.Mesh, Inputs: textSnapVals(g.Inputs), Weights: textSnapVals(g.Weights),
		States: textSnapVals(g.States), Outputs: textIDs(g.Outputs), Updates: map[int]int{}}
	for _, r := range g.Regions {
		s.Regions = append(s.Regions, textSnapOps(r.Ops))
		s.Labels = append(s.Labels, r.Label())
	}
	for st, v := range g.StateUpdates {
		s.Updates[st.ID] = v.ID
	}
	return s
}

// assertTextRoundTrip checks that Print(g) parses into a graph equal to g that
// prints identically, and returns the text.
func assertTextRoundTrip(t *testing.T, g *Graph) string {
	t.Helper()
	if err := Verify(g); err != nil {
		t.Fatalf("input graph does not verify: %v", err)
	}
	text := Print(g)
	g2, err := Parse(text)
	if err != nil {
		t.Fatalf("Parse(Print(g)): %v\n%s", err, text)
	}
	if diff := cmp.Diff(textSnapGraph(g), textSnapGraph(g2)); diff != "" {
		t.Errorf("parsed graph differs from the printed one (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(text, Print(g2)); diff != "" {
		t.Errorf("Print(Parse(text)) differs (-want +got):\n%s", diff)
	}
	return text
}

const textHdr = "graph t mesh 1x1 {\n"

// textX32 declares %0 "x" : [1,32] bf16 so snippets have an operand.
const textX32 = "  input %0 \"x\" : [1,32] bf16 tile dram_interleaved\n"

// ---- tests ----

func TestPrintGolden(t *testing.T) {
	g := textTinyMLP(t)
	got := assertTextRoundTrip(t, g)
	path := filepath.Join("testdata", "tiny_mlp.graph")
	if os.Getenv("TCC_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (regenerate with TCC_UPDATE_GOLDEN=1 go test ./ir -run TestPrintGolden)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("Print differs from %s (-want +got):\n%s", path, diff)
	}
	g2, err := Parse(string(want))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), Print(g2)); diff != "" {
		t.Errorf("Print(Parse(golden)) (-want +got):\n%s", diff)
	}
}

func TestPrintConstructs(t *testing.T) {
	tests := []struct {
		name  string
		body  string // between textHdr and the closing "}\n"
		check func(t *testing.T, g *Graph)
	}{
		{"empty graph", "", func(t *testing.T, g *Graph) {
			if g.Name != "t" || g.Mesh != (Mesh{1, 1}) || len(g.Regions) != 0 {
				t.Errorf("got %q %v %d regions", g.Name, g.Mesh, len(g.Regions))
			}
		}},
		{"declarations", "  input %0 \"ids\" : [1,4] uint32 row_major dram_interleaved\n" +
			"  weight %1 \"w\\\"q\\n\" : [4,64] bfp8_b tile l1_interleaved\n" +
			"  state %2 : [1,3,256] fp32 tile dram_interleaved split(2)\n", func(t *testing.T, g *Graph) {
			want := []textValSnap{
				{ID: 0, Name: "ids", Kind: KindInput, Type: "[1,4] uint32 row_major dram_interleaved", Def: -1},
				{ID: 1, Name: "w\"q\n", Kind: KindWeight, Type: "[4,64] bfp8_b tile l1_interleaved", Def: -1},
				{ID: 2, Kind: KindState, Type: "[1,3,256] fp32 tile dram_interleaved split(2)", Def: -1},
			}
			got := append(append(textSnapVals(g.Inputs), textSnapVals(g.Weights)...), textSnapVals(g.States)...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if g.States[0].Type.Dist != (Dist{Axis: 2}) || g.Weights[0].Type.Layout != TileLayout {
				t.Errorf("dist %v layout %v", g.States[0].Type.Dist, g.Weights[0].Type.Layout)
			}
		}},
		{"shard spec", "  input %0 : [64,128] bf16 tile l1_block_sharded<(1,2)-(3,5) 16x32>\n" +
			"  input %1 : [64,128] bf16 tile dram_width_sharded<(0,0)-(7,0) 64x16>\n", func(t *testing.T, g *Graph) {
			want := MemoryConfig{Kind: L1BlockSharded, Shard: &ShardSpec{Grid: CoreRange{1, 2, 3, 5}, Shape: [2]int{16, 32}}}
			if diff := cmp.Diff(want, g.Inputs[0].Type.Mem); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		}},
		{"rank 0 shape", "  input %0 : [] fp32 row_major dram_interleaved\n", func(t *testing.T, g *Graph) {
			if g.Inputs[0].Type.Shape.Rank() != 0 {
				t.Errorf("rank %d", g.Inputs[0].Type.Shape.Rank())
			}
		}},
		{"regions", textX32 + "  region embed {\n  }\n  region \"odd kind\" {\n  }\n  region mlp 0 {\n    %2 \"h\" = silu(%0) : [1,32] bf16 tile dram_interleaved\n  }\n" +
			"  region attention 3 {\n  }\n", func(t *testing.T, g *Graph) {
			var got []string
			for _, r := range g.Regions {
				got = append(got, r.Label())
			}
			if diff := cmp.Diff([]string{"embed", "odd kind", "layer 0 (mlp)", "layer 3 (attention)"}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			op := g.Regions[2].Ops[0]
			if op.ID != 1 || op.Result().Name != "h" || op.Region != g.Regions[2] || op.Result().Def != op {
				t.Errorf("op id %d name %q", op.ID, op.Result().Name)
			}
		}},
		{"int float dtype ints attrs", textX32 + "  region main {\n" +
			"    %2 = mul_scalar(%0) {value = 1.0} : [1,32] bf16 tile dram_interleaved\n" +
			"    %4 = add_scalar(%2) {value = -1e-06} : [1,32] bf16 tile dram_interleaved\n" +
			"    %6 = typecast(%4) {dtype = fp32} : [1,32] fp32 tile dram_interleaved\n" +
			"    %8 = reshape(%6) {shape = [2,16]} : [2,16] fp32 tile dram_interleaved\n  }\n", func(t *testing.T, g *Graph) {
			ops := g.Ops()
			got := []any{ops[0].Attrs["value"], ops[1].Attrs["value"], ops[2].Attrs["dtype"], ops[3].Attrs["shape"]}
			if diff := cmp.Diff([]any{1.0, -1e-06, FP32, []int{2, 16}}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		}},
		{"special floats", textX32 + "  region main {\n" +
			"    %2 = mul_scalar(%0) {value = +Inf} : [1,32] bf16 tile dram_interleaved\n" +
			"    %4 = mul_scalar(%0) {value = -0.0} : [1,32] bf16 tile dram_interleaved\n" +
			"    %6 = mul_scalar(%0) {value = NaN} : [1,32] bf16 tile dram_interleaved\n  }\n", func(t *testing.T, g *Graph) {
			ops := g.Ops()
			if v := ops[0].Float("value"); !math.IsInf(v, 1) {
				t.Errorf("got %v, want +Inf", v)
			}
			if v := ops[1].Float("value"); v != 0 || !math.Signbit(v) {
				t.Errorf("got %v, want -0", v)
			}
			if v := ops[2].Float("value"); !math.IsNaN(v) {
				t.Errorf("got %v, want NaN", v)
			}
		}},
		{"optional attr absent and present", "  input %0 : [1,32,64] bf16 tile dram_interleaved\n  weight %1 : [64,64] bf16 tile dram_interleaved\n  region main {\n" +
			"    %3 = matmul(%0, %1) : [1,32,64] bf16 tile dram_interleaved\n" +
			"    %5 = matmul(%0, %1) {dtype = fp32} : [1,32,64] fp32 tile l1_interleaved\n  }\n", nil},
		{"annotation sets layout memory dist", "  input %0 : [1,32] bf16 tile dram_interleaved\n  region main {\n" +
			"    %2 = exp(%0) : [1,32] bf16 row_major l1_width_sharded<(0,0)-(1,0) 32x16> split(1)\n  }\n", func(t *testing.T, g *Graph) {
			ty := g.Ops()[0].Result().Type
			if ty.Layout != RowMajorLayout || ty.Mem.Kind != L1WidthSharded || ty.Dist.Axis != 1 {
				t.Errorf("got %s", ty)
			}
		}},
		{"explicit op id and rule", textX32 + "  region main {\n    %2 = silu(%0) : [1,32] bf16 tile dram_interleaved id 7 rule \"r\\t1\"\n  }\n", func(t *testing.T, g *Graph) {
			op := g.Ops()[0]
			if op.ID != 7 || op.Rule != "r\t1" {
				t.Errorf("id %d rule %q", op.ID, op.Rule)
			}
			if v := g.NewValue(KindResult, "", T(BF16, 1)); v.ID != 8 {
				t.Errorf("next fresh ID %d, want 8", v.ID)
			}
		}},
		{"outputs and sorted updates", "  state %0 \"a\" : [1,32] bf16 tile dram_interleaved\n  state %1 \"b\" : [1,32] bf16 tile dram_interleaved\n" +
			"  region main {\n    %3 = exp(%1) : [1,32] bf16 tile dram_interleaved\n  }\n  output %3, %0, %3\n  update %0 = %3\n  update %1 = %0\n", func(t *testing.T, g *Graph) {
			if diff := cmp.Diff([]int{3, 0, 3}, textIDs(g.Outputs)); diff != "" {
				t.Errorf("outputs (-want +got):\n%s", diff)
			}
			if g.StateUpdates[g.States[0]].ID != 3 || g.StateUpdates[g.States[1]] != g.States[0] {
				t.Errorf("updates %v", g.StateUpdates)
			}
		}},
		{"decomposition", "  input %0 : [1,32] bf16 tile dram_interleaved\n  weight %1 : [32] bf16 tile dram_interleaved\n" +
			"  weight %2 : [32,32] bf16 tile dram_interleaved\n  region main {\n" +
			"    %4 = rmsnorm_matmul(%0, %1, %2) {eps = 1e-05, offset = 0.0} : [1,32] bf16 tile dram_interleaved rule \"fuse\" decomp {\n" +
			"      input %0 : [1,32] bf16 tile dram_interleaved\n" +
			"      result %1 : [32] bf16 tile dram_interleaved\n" +
			"      weight %2 : [32,32] bf16 tile dram_interleaved\n" +
			"      %4 = mul(%0, %1) : [1,32] bf16 tile dram_interleaved\n" +
			"      output %4\n    }\n  }\n", func(t *testing.T, g *Graph) {
			d := g.Ops()[0].Decomp
			if d == nil || len(d.Ops) != 1 || d.Inputs[1].Kind != KindResult || d.Outputs[0] != d.Ops[0].Result() {
				t.Fatalf("decomp %+v", d)
			}
			if d.Inputs[0] == g.Inputs[0] || d.Ops[0].Operands[0] != d.Inputs[0] || d.Ops[0].Region != g.Regions[0] {
				t.Errorf("decomp value %%0 must be local and ops must belong to the region")
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := textHdr + tc.body + "}\n"
			g, err := Parse(src)
			if err != nil {
				t.Fatalf("Parse: %v\n%s", err, src)
			}
			if diff := cmp.Diff(src, Print(g)); diff != "" {
				t.Errorf("Print(Parse(src)) (-want +got):\n%s", diff)
			}
			if tc.check != nil {
				tc.check(t, g)
			}
		})
	}
}

// TestParseNormalizes: non-canonical text parses and prints canonically.
func TestParseNormalizes(t *testing.T) {
	src := "// a comment\n\ngraph \"t\" mesh 1X1 {   // trailing\n\n\tinput %00 : [ 1 , 32 ] bf16 tile dram_interleaved\n" +
		"  region main -1 {\n    %2 = mul_scalar(%0) {value = 2} : [1,32] bf16 tile dram_interleaved rule \"\"\n  }\n  output %2\n  output %0\n}"
	want := textHdr + textX32[:len("  input %0")] + " : [1,32] bf16 tile dram_interleaved\n  region main {\n" +
		"    %2 = mul_scalar(%0) {value = 2.0} : [1,32] bf16 tile dram_interleaved\n  }\n  output %2, %0\n}\n"
	g, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, Print(g)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestParseAssignsFreshOpIDs: an op whose implicit ID (first result - 1) is
// taken gets a fresh one, which then prints explicitly.
func TestParseAssignsFreshOpIDs(t *testing.T) {
	src := textHdr + "  input %0 : [1,32] bf16 tile dram_interleaved\n  input %1 : [1,32] bf16 tile dram_interleaved\n" +
		"  region main {\n    %2 = add(%0, %1) : [1,32] bf16 tile dram_interleaved\n  }\n}\n"
	g, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Ops()[0].ID; got != 3 {
		t.Errorf("op ID %d, want 3 (fresh, since %%1 is a value)", got)
	}
	want := strings.Replace(src, "dram_interleaved\n  }", "dram_interleaved id 3\n  }", 1)
	if diff := cmp.Diff(want, Print(g)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestFormatFloat(t *testing.T) {
	tests := []struct {
		f    float64
		want string
	}{
		{1, "1.0"}, {0, "0.0"}, {-2, "-2.0"}, {0.5, "0.5"}, {1e-6, "1e-06"}, {1e21, "1e+21"},
		{123456789, "1.23456789e+08"}, {100000, "100000.0"}, {1e6, "1e+06"}, {0.1, "0.1"}, {math.Inf(1), "+Inf"}, {math.Inf(-1), "-Inf"},
		{math.NaN(), "NaN"}, {math.MaxFloat64, "1.7976931348623157e+308"}, {5e-324, "5e-324"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := formatFloat(tc.f); got != tc.want {
				t.Errorf("formatFloat(%v) = %q, want %q", tc.f, got, tc.want)
			}
		})
	}
}

// textNoGenericInstance are the fused kinds whose shape rules need what
// the generic search cannot make (chain and step strings, the model's head
// and chunk shapes): searching for them exhausts its budget, ~0.5 CPU-s a
// kind. Each is printed and parsed back by the rule data of passes/testdata
// (its "-- output --" graphs), where it is built from its decomposition.
var textNoGenericInstance = map[string]bool{
	"eltwise_chain": true, "rms_norm_plain_chain": true, "layout_norm_plain_chain": true, "conv_depthwise_chain": true,
	"norm_layout_gate": true, "layout_chain": true, "gdn_conv_gates": true, "gdn_recurrence": true, "gdn_chunk_step": true,
	"gdn_chunk_wy": true, "gdn_chunk_prep": true, "gdn_chunk_scan": true, "attn_prologue": true, "sdpa_decode_gated": true,
	"attn_prologue_prefill": true, "sdpa_prefill_gated": true, "conv_depthwise_state_chain": true,
}

// textGenericInstance finds operands (from pool) and attribute values for
// kind that its shape rule accepts with valid result types, trying first with
// every optional attribute set, then with none. It gives up at once on the
// kinds of textNoGenericInstance.
func textGenericInstance(kind OpKind, pool []TensorType) ([]int, Attrs, bool) {
	info := kind.Info()
	if textNoGenericInstance[info.Name] {
		return nil, nil, false
	}
	key := fmt.Sprint(info.Name, pool)
	textInstances.Lock()
	defer textInstances.Unlock()
	if in, ok := textInstances.m[key]; ok {
		attrs := Attrs{}
		maps.Copy(attrs, in.attrs)
		return in.tuple, attrs, in.ok
	}
	tuple, attrs, ok := textSearchInstance(kind, info, pool)
	if textInstances.m == nil {
		textInstances.m = map[string]textInstance{}
	}
	textInstances.m[key] = textInstance{tuple, attrs, ok}
	return tuple, attrs, ok
}

// textInstance is a memoized result of textGenericInstance.
type textInstance struct {
	tuple []int
	attrs Attrs
	ok    bool
}

// textInstances memoizes the search per op name and pool: FuzzParse and
// TestRoundTripAllOps build the same graph, and the kinds no instance
// exists for exhaust the search's budget (about 3 CPU-s each time).
var textInstances struct {
	sync.Mutex
	m map[string]textInstance
}

// textSearchInstance searches the operand tuples and attribute values for
// an instance of kind; it gives up after 30,000 tries per attribute set
// (the most an instance needed was 22,220, matmul4's).
func textSearchInstance(kind OpKind, info *OpInfo, pool []TensorType) ([]int, Attrs, bool) {
	cands := map[opspec.AttrKind][]any{
		opspec.AttrInt:    {1, 0, 2, -1, 32},
		opspec.AttrFloat:  {0.5, 1e-06},
		opspec.AttrString: {"x", "l1_interleaved"},
		opspec.AttrInts:   {[]int{32, 64}, []int{2048}, []int{1, 32, 64}, []int{-1}, []int{0}, []int{1}},
		opspec.AttrDType:  {BF16, FP32, BFP8B},
	}
	counts := []int{len(info.Operands)}
	if info.Variadic {
		counts = append(counts, len(info.Operands)+1)
	}
	for _, optional := range []bool{true, false} {
		var decls []opspec.Attr
		for _, a := range info.Attrs {
			if optional || !a.Optional {
				decls = append(decls, a)
			}
		}
		tries := 0
		for _, n := range counts {
			tuple := make([]int, n)
			for {
				combo := make([]int, len(decls))
				for {
					attrs := Attrs{}
					for i, a := range decls {
						attrs[a.Name] = cands[a.Kind][combo[i]]
					}
					operands := make([]*Value, n)
					for i, p := range tuple {
						operands[i] = &Value{Type: pool[p]}
					}
					if ts, err := safeInfer(kind, operands, attrs); err == nil && textValidTypes(ts) {
						return tuple, attrs, true
					}
					if tries++; tries > 30000 || !textOdometer(combo, func(i int) int { return len(cands[decls[i].Kind]) }) {
						break
					}
				}
				if tries > 30000 || !textOdometer(tuple, func(int) int { return len(pool) }) {
					break
				}
			}
		}
	}
	return nil, nil, false
}

// textOdometer advances digits (digit i counts to size(i)-1) and reports
// whether it did not wrap around.
func textOdometer(digits []int, size func(int) int) bool {
	for i := range digits {
		if digits[i]++; digits[i] < size(i) {
			return true
		}
		digits[i] = 0
	}
	return false
}

func textValidTypes(ts []TensorType) bool {
	for _, t := range ts {
		if t.DType == InvalidDType || t.DType.IsBlockFloat() && t.Layout != TileLayout || t.Mem.Kind.IsSharded() != (t.Mem.Shard != nil) ||
			!t.Dist.IsReplicated() && t.Dist.Axis >= t.Shape.Rank() {
			return false
		}
		for _, d := range t.Shape {
			if d <= 0 {
				return false
			}
		}
	}
	return true
}

// textAllOpsGraph builds one instance of every op kind in the table (found
// generically) and returns the graph and the names of the kinds covered.
func textAllOpsGraph(t testing.TB) (*Graph, []string) {
	t.Helper()
	rowMajorIDs := TensorType{Shape: Shape{1, 32}, DType: UInt32, Layout: RowMajorLayout, Mem: DRAM, Dist: Replicated}
	pos := TensorType{Shape: Shape{1}, DType: UInt32, Layout: RowMajorLayout, Mem: DRAM, Dist: Replicated}
	pool := []TensorType{T(BF16, 1, 32, 64), T(BF16, 64), T(BF16, 64, 128), rowMajorIDs, T(FP32, 1, 32, 64), T(BF16, 1, 32, 1), T(BF16, 64, 64),
		T(BF16, 1, 4, 32), T(BF16, 1, 2, 64, 32), pos}
	b := NewBuilder("all_ops")
	// Declarations with every memory kind, layout and dtype.
	for i, mk := range []MemKind{DRAMInterleaved, DRAMWidthSharded, L1Interleaved, L1HeightSharded, L1WidthSharded, L1BlockSharded} {
		ty := T(AllDTypes[i%len(AllDTypes)], 32, 64)
		if !ty.DType.IsBlockFloat() && i%2 == 1 {
			ty.Layout = RowMajorLayout
		}
		ty.Mem.Kind = mk
		if mk.IsSharded() {
			ty.Mem.Shard = &ShardSpec{Grid: CoreRange{0, 0, i, 1}, Shape: [2]int{32, 64 / (i + 1)}}
		}
		b.Weight(fmt.Sprintf("w.%s", mk), ty)
	}
	declared := map[int]*Value{}
	b.Region("main", -1)
	var covered []string
	for _, k := range AllOpKinds() {
		tuple, attrs, ok := textGenericInstance(k, pool)
		if !ok {
			if !textNoGenericInstance[k.String()] {
				t.Errorf("no generic instance found for op %s: give the pool what its shape rule needs, or list it in textNoGenericInstance with where it is round-tripped", k)
			}
			continue
		}
		operands := make([]*Value, len(tuple))
		for i, p := range tuple {
			if declared[p] == nil {
				declared[p] = b.Input(fmt.Sprintf("pool.%d", p), pool[p])
			}
			operands[i] = declared[p]
		}
		b.Output(b.Emit(k, operands, attrs)...)
		covered = append(covered, k.String())
	}
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g, covered
}

// TestRoundTripAllOps round-trips a graph with every op kind in the table.
func TestRoundTripAllOps(t *testing.T) {
	g, covered := textAllOpsGraph(t)
	assertTextRoundTrip(t, g)
	for _, name := range []string{"add", "sub", "mul", "add_scalar", "mul_scalar", "silu", "sigmoid", "exp", "rsqrt",
		"square", "mean", "argmax", "matmul", "rms_norm", "embedding", "typecast", "reshape"} {
		if _, inTable := LookupOp(name); inTable && !strings.Contains(" "+strings.Join(covered, " ")+" ", " "+name+" ") {
			t.Errorf("op %s is in the table but was not covered", name)
		}
	}
}

// withTextSyntheticOp temporarily turns the last op-table entry into a fused,
// variadic, two-result op with one attribute of every kind, so printing and
// parsing of those constructs is tested whatever the current table holds.
func withTextSyntheticOp(t *testing.T) OpKind {
	kinds := AllOpKinds()
	k := kinds[len(kinds)-1]
	saved := opInfos[k]
	t.Cleanup(func() { opInfos[k] = saved })
	opInfos[k] = OpInfo{
		Name: "test_pair", Doc: "test only", Operands: []string{"x", "rest"}, Variadic: true, Results: 2, Fused: true, Class: "fused",
		Attrs: []opspec.Attr{{Name: "n", Kind: opspec.AttrInt}, {Name: "f", Kind: opspec.AttrFloat}, {Name: "s", Kind: opspec.AttrString},
			{Name: "dims", Kind: opspec.AttrInts}, {Name: "dt", Kind: opspec.AttrDType}, {Name: "opt", Kind: opspec.AttrInt, Optional: true}},
		Shape: func(in []TensorType, a Attrs) ([]TensorType, error) {
			return []TensorType{like(in[0], in[0].Shape.Clone(), in[0].DType), like(in[0], Shape(a["dims"].([]int)).Clone(), a["dt"].(DType))}, nil
		},
	}
	return k
}

func TestRoundTripSyntheticOp(t *testing.T) {
	k := withTextSyntheticOp(t)
	attrs := func(n int) Attrs {
		return Attrs{"n": n, "f": 1e-06, "s": "a \"b\"\n", "dims": []int{2, 3}, "dt": BFP8B}
	}
	b := NewBuilder("synthetic op")
	b.G.Mesh = Mesh{2, 4}
	x := b.Input("x", T(BF16, 1, 32))
	r := b.Region("gdn", 5)
	res := b.Emit(k, []*Value{x, x, x}, attrs(-3))
	res[0].Name = "first"
	op := res[0].Def
	op.ID = 1000
	op.Rule = "rule with \\ backslash"
	// Decomposition with a nested decomposition; local IDs shadow %0 and %1.
	db := newTextDecomp(t, r)
	p0 := db.in(KindInput, "x", x.Type)
	p1 := db.in(KindState, "", x.Type)
	p2 := db.in(KindResult, "", x.Type)
	inner := db.op(k, Attrs{"n": 0, "f": 0.0, "s": "", "dims": []int{}, "dt": FP32, "opt": 7}, p0, p1)
	innerOp := inner[0].Def
	idb := newTextDecomp(t, r)
	idb.next = 50
	q := idb.in(KindInput, "", x.Type)
	idb.in(KindInput, "", x.Type)
	idb.d.Outputs = []*Value{idb.op(OpExp, nil, q)[0], q}
	innerOp.Decomp = idb.d
	e := db.op(OpAdd, nil, inner[0], p2)[0]
	db.d.Outputs = []*Value{e, inner[1]}
	op.Decomp = db.d
	b.Output(res...)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	text := assertTextRoundTrip(t, g)
	want := `graph "synthetic op" mesh 2x4 {
  input %0 "x" : [1,32] bf16 tile dram_interleaved
  region gdn 5 {
    %2 "first", %3 = test_pair(%0, %0, %0) {dims = [2,3], dt = bfp8_b, f = 1e-06, n = -3, s = "a \"b\"\n"} : [1,32] bf16 tile dram_interleaved, [2,3] bfp8_b tile dram_interleaved id 1000 rule "rule with \\ backslash" decomp {
      input %0 "x" : [1,32] bf16 tile dram_interleaved
      state %1 : [1,32] bf16 tile dram_interleaved
      result %2 : [1,32] bf16 tile dram_interleaved
      %4, %5 = test_pair(%0, %1) {dims = [], dt = fp32, f = 0.0, n = 0, opt = 7, s = ""} : [1,32] bf16 tile dram_interleaved, [] fp32 tile dram_interleaved decomp {
        input %50 : [1,32] bf16 tile dram_interleaved
        input %51 : [1,32] bf16 tile dram_interleaved
        %53 = exp(%50) : [1,32] bf16 tile dram_interleaved
        output %53, %50
      }
      %7 = add(%4, %2) : [1,32] bf16 tile dram_interleaved
      output %7, %5
    }
  }
  output %2, %3
}
`
	if diff := cmp.Diff(want, text); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	g2, _ := Parse(text)
	if v := g2.NewValue(KindResult, "", x.Type); v.ID != 1001 {
		t.Errorf("fresh ID after parse = %d, want 1001", v.ID)
	}
	// The multi-result count is checked against the table.
	bad := strings.Replace(text, `%2 "first", %3 = test_pair`, `%2 "first" = test_pair`, 1)
	if _, err := Parse(bad); err == nil || !strings.Contains(err.Error(), "4:18: op test_pair has 2 results, 1 are written") {
		t.Errorf("got %v, want a result-count error at 4:18", err)
	}
}

// TestFidelityAttrRoundTrip: any op may carry the fidelity attribute
// (ir.FidelityAttr); it prints and parses back.
func TestFidelityAttrRoundTrip(t *testing.T) {
	src := textHdr + textX32 + "  region main {\n    %2 = silu(%0) {fidelity = \"LoFi\"} : [1,32] bf16 tile dram_interleaved\n  }\n  output %2\n}\n"
	g, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	op := g.Regions[0].Ops[0]
	if f, err := OpFidelity(op, HiFi4); err != nil || f != LoFi {
		t.Errorf("OpFidelity = %v, %v; want LoFi", f, err)
	}
	if text := Print(g); !strings.Contains(text, `fidelity = "LoFi"`) {
		t.Errorf("printed graph lacks the attribute:\n%s", text)
	} else if _, err := Parse(text); err != nil {
		t.Errorf("reparse: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	const region = textHdr + textX32 + "  region main {\n"
	const ty = " : [1,32] bf16 tile dram_interleaved\n"
	tests := []struct {
		name, src, want string
	}{
		{"empty input", "", "1:1: expected \"graph\", found end of input"},
		{"unknown op", region + "    %2 = foo(%0)" + ty + "  }\n}\n", `4:10: unknown op "foo"`},
		{"undefined value", region + "    %2 = silu(%7)" + ty + "  }\n}\n", "4:15: undefined value %7"},
		{"use before def", region + "    %2 = silu(%4)" + ty + "    %4 = silu(%0)" + ty + "  }\n}\n", "4:15: undefined value %4"},
		{"decomp value not visible outside", region + "    %2 = silu(%0)" + ty + "  }\n  output %9\n}\n", "6:10: undefined value %9"},
		{"wrong type annotation", region + "    %2 = silu(%0) : [1,64] bf16 tile dram_interleaved\n  }\n}\n",
			"4:10: op silu: result 0 (%2) is annotated [1,64] bf16 but the shape rule gives [1,32] bf16"},
		{"wrong dtype annotation", region + "    %2 = silu(%0) : [1,32] fp32 tile dram_interleaved\n  }\n}\n", "4:10: op silu: result 0 (%2) is annotated [1,32] fp32"},
		{"shape rule error", region + "    %2 = reshape(%0) {shape = [3,7]}" + ty + "  }\n}\n", "4:10: op reshape: reshape([1,32] bf16): rule reshape-numel"},
		{"bad attribute kind", region + "    %2 = add_scalar(%0) {value = \"x\"}" + ty + "  }\n}\n",
			"4:34: bad attribute value of op add_scalar: want a float"},
		{"float for int list", region + "    %2 = reshape(%0) {shape = 1.5}" + ty + "  }\n}\n", "4:31: bad attribute shape of op reshape: want a list of ints"},
		{"float in int list", region + "    %2 = reshape(%0) {shape = [1.5]}" + ty + "  }\n}\n", "4:32: expected an integer or ']', found \"1.5\""},
		{"bad dtype attribute", region + "    %2 = typecast(%0) {dtype = bf17}" + ty + "  }\n}\n", `4:32: bad attribute dtype of op typecast: unknown dtype "bf17"`},
		{"unknown attribute", region + "    %2 = silu(%0) {alpha = 1.0}" + ty + "  }\n}\n", `4:20: op silu has no attribute "alpha"`},
		{"bad fidelity", region + "    %2 = silu(%0) {fidelity = \"HiFi5\"}" + ty + "  }\n}\n", `4:10: op silu: silu: attribute "fidelity": unknown math fidelity "HiFi5"`},
		{"duplicate attribute", region + "    %2 = add_scalar(%0) {value = 1.0, value = 2.0}" + ty + "  }\n}\n", `4:39: attribute "value" is given twice`},
		{"missing attribute", region + "    %2 = add_scalar(%0)" + ty + "  }\n}\n", `4:10: op add_scalar: add_scalar: missing attribute "value"`},
		{"float overflow", region + "    %2 = add_scalar(%0) {value = 1e999}" + ty + "  }\n}\n", "4:34: bad attribute value of op add_scalar"},
		{"operand count", region + "    %2 = add(%0)" + ty + "  }\n}\n", "4:10: op add: add takes 2 operands"},
		{"result count", region + "    %2, %3 = silu(%0)" + ty + "  }\n}\n", "4:14: op silu has 1 results, 2 are written"},
		{"redefined value", region + "    %0 = silu(%0)" + ty + "  }\n}\n", "4:5: value %0 is already defined"},
		{"bad dtype", textHdr + "  input %0 : [1,32] bf17 tile dram_interleaved\n}\n", `2:21: unknown dtype "bf17"`},
		{"block float row major", textHdr + "  input %0 : [1,32] bfp8_b row_major dram_interleaved\n}\n", "2:28: bfp8_b needs tile layout"},
		{"missing shard spec", textHdr + "  input %0 : [1,32] bf16 tile l1_height_sharded\n}\n", "2:48: expected a shard spec"},
		{"unexpected shard spec", textHdr + "  input %0 : [1,32] bf16 tile l1_interleaved<(0,0)-(0,0) 1x32>\n}\n", "2:45: l1_interleaved takes no shard spec"},
		{"bad shard shape", textHdr + "  input %0 : [1,32] bf16 tile l1_height_sharded<(0,0)-(0,0) 1y32>\n}\n", "2:61: expected shard shape RxC"},
		{"zero dim", textHdr + "  input %0 : [0,32] bf16 tile dram_interleaved\n}\n", "2:14: shape [0,32] has a non-positive dimension"},
		{"split axis", textHdr + "  input %0 : [1,32] bf16 tile dram_interleaved split(2)\n}\n", "2:54: split axis 2 is out of range for rank 2"},
		{"bad mesh", "graph t mesh 0x1 {\n}\n", `1:14: bad mesh "0x1"`},
		{"layer order", textHdr + "  region mlp 2 {\n  }\n  region mlp 1 {\n  }\n}\n", "4:3: region layer 1 (mlp) follows layer 2"},
		{"update non-state", textHdr + textX32 + "  update %0 = %0\n}\n", "3:10: update target %0 is a input, not a state"},
		{"update twice", textHdr + "  state %0 : [1] fp32 tile dram_interleaved\n  update %0 = %0\n  update %0 = %0\n}\n", "4:10: state %0 is updated twice"},
		{"op id taken", region + "    %2 = silu(%0)" + ty[:len(ty)-1] + " id 0\n  }\n}\n", "4:58: op id 0 is already the id of value %0"},
		{"decomp count", textHdr + "  input %0 : [1,32] bf16 tile dram_interleaved\n  weight %1 : [32] bf16 tile dram_interleaved\n  region main {\n" +
			"    %3, %4 = add_rmsnorm(%0, %0, %1) {eps = 1e-05, offset = 0.0} : [1,32] bf16 tile dram_interleaved, [1,32] bf16 tile dram_interleaved decomp {\n    }\n  }\n}\n", "5:14: op add_rmsnorm: decomposition has 0 inputs and 0 outputs for 3 operands and 2 results"},
		{"unterminated string", textHdr + "  input %0 \"x : [1] fp32 tile dram_interleaved\n}\n", "2:12: unterminated string literal"},
		{"bad escape", textHdr + "  input %0 \"\\q\" : [1] fp32 tile dram_interleaved\n}\n", "2:12: bad string literal"},
		{"bad character", textHdr + "  input %0 : [1] fp32 tile dram_interleaved ;\n}\n", "2:45: unexpected character ';'"},
		{"bare percent", textHdr + "  output %x\n}\n", "2:10: expected a value number after '%'"},
		{"huge value number", textHdr + "  output %99999999999\n}\n", "2:10: value number %99999999999 is out of range"},
		{"trailing garbage", textHdr + "}\n}\n", "3:1: expected end of input after the graph's '}', found '}'"},
		{"two statements on a line", textHdr + textX32[:len(textX32)-1] + " output %0\n}\n", `2:52: expected end of line, found "output"`},
		{"unknown statement", textHdr + "  inptu %0 : [1] fp32 tile dram_interleaved\n}\n", `2:3: expected input, weight, state, region, output, update or '}', found "inptu"`},
		{"truncated op", region + "    %2 = silu(%0", "4:17: expected ')', found end of input"},
		{"truncated region", region, "4:1: expected an op such as %5 = add(%3, %4) : ..., or '}', found end of input"},
		{"truncated graph", textHdr + textX32, "3:1: expected input, weight, state, region, output, update or '}', found end of input"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Parse(tc.src)
			if err == nil {
				t.Fatalf("Parse accepted:\n%s\nprinted:\n%s", tc.src, Print(g))
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is a %T, want *ParseError", err, err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("got  %v\nwant %s...", err, tc.want)
			}
		})
	}
}

// TestParseTruncated: every proper prefix of a printed graph is rejected
// with a positioned error, and prefixes ending at a line end say so.
func TestParseTruncated(t *testing.T) {
	text := Print(textTinyMLP(t))
	for i := 0; i < len(text)-1; i++ {
		_, err := Parse(text[:i])
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Fatalf("prefix of %d bytes: got %v, want a *ParseError", i, err)
		}
		if i > 0 && text[i-1] == '\n' && !strings.Contains(err.Error(), "end of input") {
			t.Errorf("prefix of %d bytes: %v does not mention the end of input", i, err)
		}
	}
}

func TestPrintDoesNotMutateAndIsDeterministic(t *testing.T) {
	g := textTinyMLP(t)
	b := NewBuilder("m")
	var states []*Value
	for i := range 8 {
		states = append(states, b.State(fmt.Sprintf("s%d", i), T(BF16, 1, 32)))
	}
	b.Region("main", -1)
	for i := len(states) - 1; i >= 0; i-- {
		b.UpdateState(states[i], b.Exp(states[i]))
	}
	g2, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []*Graph{g, g2} {
		before, id := textSnapGraph(g), g.nextID
		first := Print(g)
		for range 5 {
			if got := Print(g); got != first {
				t.Fatalf("Print is not deterministic:\n%s\nvs\n%s", first, got)
			}
		}
		if diff := cmp.Diff(before, textSnapGraph(g)); diff != "" || g.nextID != id {
			t.Errorf("Print mutated the graph (-before +after):\n%s", diff)
		}
		var sb strings.Builder
		if err := Fprint(&sb, g); err != nil || sb.String() != first {
			t.Errorf("Fprint = %q, %v; want Print's text", sb.String(), err)
		}
	}
	text := Print(g2)
	i0, i7 := strings.Index(text, "update %0 = "), strings.Index(text, "update %7 = ")
	if i0 < 0 || i7 < i0 {
		t.Errorf("updates not sorted by state ID:\n%s", text)
	}
}

func TestPrintRegion(t *testing.T) {
	g := textTinyMLP(t)
	got := PrintRegion(g, g.Regions[2])
	want := "region head {\n" +
		"  %22 = reshape(%20) {shape = [1,64]} : [1,64] bf16 tile dram_interleaved\n" +
		"  %24 = matmul(%22, %4) : [1,512] bf16 tile dram_interleaved\n" +
		"  %26 = argmax(%24) : [1,1] uint32 row_major dram_interleaved\n" +
		"  %28 = mul_scalar(%24) {value = 0.5} : [1,512] bf16 tile dram_interleaved\n" +
		"}\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !strings.Contains(Print(g), strings.ReplaceAll(want, "\n", "\n  ")[:len(want)]) {
		t.Errorf("PrintRegion text is not the region's text in Print, indented")
	}
}

func TestPrintMalformedGraphDoesNotPanic(t *testing.T) {
	g := NewGraph("bad")
	r := &Region{Kind: "main", Index: -1}
	g.Regions = []*Region{r, nil}
	r.Ops = []*Op{nil, {Kind: OpKind(9999), Operands: []*Value{nil}, Results: []*Value{nil},
		Attrs: Attrs{"x": float32(1)}, Decomp: &Decomposition{Inputs: []*Value{nil, {Kind: ValueKind(9)}}}}}
	g.Outputs = []*Value{nil}
	g.StateUpdates[&Value{ID: 1}] = nil
	g.StateUpdates[&Value{ID: 0}] = nil
	text := Print(g)
	if !strings.Contains(text, "%<nil> = op(9999)(%<nil>) {x = <float32>}") {
		t.Errorf("unexpected text:\n%s", text)
	}
	if _, err := Parse(text); err == nil {
		t.Errorf("Parse accepted a malformed graph's text")
	}
	if Print(nil) != "" {
		t.Errorf("Print(nil) is not empty")
	}
}

// FuzzParse checks that Parse never panics, that its errors carry a
// position, and that whatever it accepts prints to text that parses and
// prints identically.
func FuzzParse(f *testing.F) {
	f.Add(Print(textTinyMLP(f)))
	allOps, _ := textAllOpsGraph(f)
	f.Add(Print(allOps))
	f.Add(textHdr + textX32 + "  region main {\n    %2 = silu(%0) : [1,32] bf16 tile dram_interleaved id 7 rule \"r\"\n  }\n  output %2\n}\n")
	f.Add(textHdr + "  state %0 : [1,3,4] bf16 tile l1_width_sharded<(0,0)-(1,0) 3x2> split(2)\n  update %0 = %0\n}\n")
	f.Add(textHdr + "  input %0 : [1,32] bf16 tile dram_interleaved\n  weight %1 : [32] bf16 tile dram_interleaved\n  region main {\n" +
		"    %3 = rms_norm(%0, %1) {eps = 1e-05, offset = 0.0} : [1,32] bf16 tile dram_interleaved decomp {\n" +
		"      input %0 : [1,32] bf16 tile dram_interleaved\n      input %1 : [32] bf16 tile dram_interleaved\n" +
		"      %3 = mul_scalar(%0) {value = NaN} : [1,32] bf16 tile dram_interleaved\n      output %3\n    }\n  }\n}\n")
	f.Add("// c\ngraph \"t\" mesh 1X1 {\n\tinput %00 : [ 1 , 32 ] bf16 tile dram_interleaved\n  region main -1 {\n" +
		"    %2 = mul_scalar(%0) {value = 2} : [1,32] bf16 tile dram_interleaved rule \"\"\n  }\n  output %2\n  output %0\n}")
	f.Add(textHdr + "  input %0 : [1,32] bf16 tile dram_interleaved\n  input %1 : [1,32] bf16 tile dram_interleaved\n" +
		"  region main {\n    %2 = add(%0, %1) : [1,32] bf16 tile dram_interleaved\n  }\n  region mlp 0 {\n  }\n}\n")
	f.Add(textHdr + "  input %0 : [1,32] uint32 row_major dram_interleaved\n  weight %1 : [8,16] bf16 tile dram_interleaved\n  region e {\n" +
		"    %3 = embedding(%0, %1) : [1,32,16] bf16 tile dram_interleaved\n    %5 = reshape(%3) {shape = [32,16]} : [32,16] bf16 tile dram_interleaved\n" +
		"    %7 = typecast(%5) {dtype = bfp4_b} : [32,16] bfp4_b tile dram_interleaved\n  }\n}\n")
	f.Fuzz(func(t *testing.T, src string) {
		g, err := Parse(src)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is a %T, want *ParseError", err, err)
			}
			if strings.Contains(err.Error(), "fails verification") {
				t.Fatalf("Parse built a graph Verify rejects: %v", err)
			}
			return
		}
		text := Print(g)
		g2, err := Parse(text)
		if err != nil {
			t.Fatalf("Parse(Print(Parse(src))): %v\n%s", err, text)
		}
		if diff := cmp.Diff(text, Print(g2)); diff != "" {
			t.Fatalf("reprint differs (-want +got):\n%s", diff)
		}
	})
}

// A weight stored in transposed tiles prints as layout tile_t and parses
// back with TilesTransposed set; a plain tile weight does not.
func TestRoundTripTransposedTiles(t *testing.T) {
	b := NewBuilder("t")
	x := b.Input("x", T(BF16, 32, 64))
	wt := T(BFP8B, 64, 32)
	wt.TilesTransposed = true
	w := b.Weight("w", wt)
	u := b.Weight("u", T(BFP8B, 32, 32))
	b.Region("mlp", 0)
	b.Output(b.Matmul(b.Matmul(x, w), u))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	text := assertTextRoundTrip(t, g)
	if !strings.Contains(text, `"w" : [64,32] bfp8_b tile_t dram_interleaved`) || !strings.Contains(text, `"u" : [32,32] bfp8_b tile dram_interleaved`) {
		t.Errorf("want w in layout tile_t and u in tile:\n%s", text)
	}
	g2, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if !g2.Weights[0].Type.TilesTransposed || g2.Weights[1].Type.TilesTransposed {
		t.Errorf("parsed TilesTransposed = %v, %v; want true, false", g2.Weights[0].Type.TilesTransposed, g2.Weights[1].Type.TilesTransposed)
	}
	if wt.Equal(T(BFP8B, 64, 32)) || !wt.Equal(g2.Weights[0].Type) {
		t.Error("TensorType.Equal ignores TilesTransposed")
	}
}

package lower

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/kexec"
	"github.com/tcc-dev/tcc/sim/ref"
)

// matrixDims is the (batch, rows, cols) view of a tile-layout shape: the
// leading dims, the padded-tile rows and the last dim.
func matrixDims(s ir.Shape) (batch, rows, cols int) {
	switch s.Rank() {
	case 0:
		return 1, 1, 1
	case 1:
		return 1, 1, s[0]
	}
	return s.Numel() / (s[len(s)-1] * s[len(s)-2]), s[len(s)-2], s[len(s)-1]
}

// upload writes the logical row-major values data of v into its device
// buffer: tile layout through numerics.TilizeBatch (zero padding) and the
// buffer's dtype, row-major layout as little-endian elements.
func upload(d *kexec.Device, name string, v *ir.Value, data []float32) error {
	if len(data) != v.Type.Shape.Numel() {
		return fmt.Errorf("upload %s: %d values for shape %s", name, len(data), v.Type.Shape)
	}
	if v.Type.Layout == ir.TileLayout {
		b, r, c := matrixDims(v.Type.Shape)
		tiles := numerics.TilizeBatch(data, b, r, c)
		if v.Type.TilesTransposed {
			tiles = numerics.TransposeTiles(tiles) // layout tile_t: each tile stored transposed
		}
		return d.WriteTiles(name, tiles)
	}
	eb := v.Type.DType.ElemBytes()
	raw := make([]byte, len(data)*eb)
	for i, x := range data {
		switch v.Type.DType {
		case ir.BF16:
			binary.LittleEndian.PutUint16(raw[2*i:], numerics.BF16Bits(x))
		case ir.FP32:
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
		case ir.UInt32:
			binary.LittleEndian.PutUint32(raw[4*i:], uint32(x))
		case ir.Int32:
			binary.LittleEndian.PutUint32(raw[4*i:], uint32(int32(x)))
		default:
			return fmt.Errorf("upload %s: no row-major form for %s", name, v.Type.DType)
		}
	}
	return d.WritePages(name, 0, raw)
}

// download reads v's logical values back from its device buffer.
func download(d *kexec.Device, name string, v *ir.Value) ([]float32, error) {
	if v.Type.Layout == ir.TileLayout {
		tiles, err := d.ReadTiles(name)
		if err != nil {
			return nil, err
		}
		b, r, c := matrixDims(v.Type.Shape)
		return numerics.UntilizeBatch(tiles, b, r, c), nil
	}
	_, pages, err := PageLayout(v.Type)
	if err != nil {
		return nil, err
	}
	raw, err := d.ReadPages(name, 0, pages)
	if err != nil {
		return nil, err
	}
	out := make([]float32, v.Type.Shape.Numel())
	for i := range out {
		switch v.Type.DType {
		case ir.BF16:
			out[i] = numerics.FromBF16Bits(binary.LittleEndian.Uint16(raw[2*i:]))
		case ir.FP32:
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		case ir.UInt32:
			out[i] = float32(binary.LittleEndian.Uint32(raw[4*i:]))
		case ir.Int32:
			out[i] = float32(int32(binary.LittleEndian.Uint32(raw[4*i:])))
		}
	}
	return out, nil
}

// randomFor draws test values for v: token ids below the table size for
// integer values (below 2^20 for an integer op's only operand), |N(0,1)| + 0.05 for the operand of rsqrt, N(0,1)
// otherwise (the reference and the device round them the same way).
func randomFor(rng *rand.Rand, op *ir.Op, i int) []float32 {
	v := op.Operands[i]
	out := make([]float32, v.Type.Shape.Numel())
	for j := range out {
		switch {
		case !v.Type.DType.IsFloat() && len(op.Operands) == 1:
			out[j] = float32(rng.IntN(1 << 20)) // e.g. positions
		case !v.Type.DType.IsFloat():
			out[j] = float32(rng.IntN(op.Operands[1].Type.Shape[0]))
		case op.Kind == ir.OpRsqrt:
			out[j] = float32(math.Abs(rng.NormFloat64()) + 0.05)
		default:
			out[j] = float32(rng.NormFloat64())
		}
	}
	return out
}

// randomArgs draws random operands for op (one value, one buffer: an
// operand given twice gets the same data) and evaluates the reference.
func randomArgs(t *testing.T, op *ir.Op, rng *rand.Rand) ([][]float32, []ref.Tensor) {
	t.Helper()
	args := make([][]float32, len(op.Operands))
	targs := make([]ref.Tensor, len(op.Operands))
	for i, v := range op.Operands {
		args[i] = randomFor(rng, op, i)
		for j := range i {
			if op.Operands[j] == v {
				args[i] = args[j]
			}
		}
		targs[i] = ref.Tensor{Shape: v.Type.Shape, Data: args[i]}
	}
	want, err := ref.EvalOp(op, targs, ref.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return args, want
}

// runOnSim lowers op, runs it on a fresh simulated device with args and
// returns the result's values.
func runOnSim(t *testing.T, tgt *target.Target, op *ir.Op, args [][]float32) ([]float32, *kir.Program) {
	t.Helper()
	ctx := NewContext(tgt)
	p, err := Lower(op, ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := kexec.NewDevice(ctx.Target)
	for _, b := range p.Buffers {
		if _, err := d.Alloc(b); err != nil {
			t.Fatal(err)
		}
	}
	for i, v := range op.Operands {
		if err := upload(d, ctx.BufferName(v), v, args[i]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Run(p, kexec.RunOptions{}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got, err := download(d, ctx.BufferName(op.Result()), op.Result())
	if err != nil {
		t.Fatal(err)
	}
	return got, p
}

// smallGrid is Blackhole with a 2x1 worker grid, so that every lowering
// gives several work items to one core.
func smallGrid() *target.Target {
	t := *target.Blackhole()
	t.GridX, t.GridY = 2, 1
	return &t
}

func TestLoweringsOnSim(t *testing.T) {
	for _, tgt := range []*target.Target{target.Blackhole(), smallGrid()} {
		t.Run(fmt.Sprintf("%dx%d", tgt.GridX, tgt.GridY), func(t *testing.T) { testLoweringsOn(t, tgt) })
	}
}

func testLoweringsOn(t *testing.T, tgt *target.Target) {
	for ci, tc := range opCases {
		t.Run(tc.name, func(t *testing.T) {
			_, op := graphOp(t, tc.build)
			args, want := randomArgs(t, op, rand.New(rand.NewPCG(uint64(ci)+1, 99)))
			got, _ := runOnSim(t, tgt, op, args)
			compare(t, op, want[0].Data, got)
		})
	}
}

// maxRelErr bounds the element-wise error against the reference: a few
// bf16 ulps (2^-8 relative each), which the intermediate formats of rms_norm
// may cost. PCC alone would miss a uniform scale error.
const maxRelErr = 0.02

// compare checks device values against the reference: exactly for integer
// results and data movement, PCC >= 0.999 and MaxRelErr <= maxRelErr
// otherwise.
func compare(t *testing.T, op *ir.Op, want, got []float32) {
	t.Helper()
	exact := op.Kind == ir.OpArgmax || op.Kind == ir.OpEmbedding || !op.Result().Type.DType.IsFloat()
	if exact {
		for i := range want {
			if want[i] != got[i] {
				t.Fatalf("element %d: got %v, want %v (exact)", i, got[i], want[i])
			}
		}
		return
	}
	pcc, rel := numerics.PCC(want, got), numerics.MaxRelErr(want, got)
	t.Logf("%s: PCC %.6f, max rel err %.3g", op.Name(), pcc, rel)
	if pcc < 0.999 || rel > maxRelErr {
		t.Errorf("PCC %.6f (want >= 0.999), max rel err %.3g (want <= %g)", pcc, rel, maxRelErr)
	}
}

func TestMatmulSubblockPlan(t *testing.T) {
	got := PlanMatmul(1, 40, 110, ir.BF16, ir.BF16, ir.HiFi4)
	// cost(n) = 60n + ceil(40/n)*(64 + 2*59) + 2048/61: n=10 gives
	// 600+728+33 = 1361, the minimum (8: 1423, 9: 1483, 11: 1421, 14: 1419,
	// 20: 1597).
	if got.Cores != 10 || got.PerCore != 4 || got.Cost != 1361 {
		t.Errorf("PlanMatmul(1, 40) = %+v, want 10 cores of 4 tiles at 1361 cycles", got)
	}
}

// TestArgmaxHand checks the argmax scan on hand-made rows: ties, signed
// zeros, NaN, infinities and a maximum in the second tile.
func TestArgmaxHand(t *testing.T) {
	const n = 40
	nan, inf, negZero := float32(math.NaN()), float32(math.Inf(1)), float32(math.Copysign(0, -1))
	rows := []struct {
		set  map[int]float32 // column -> value
		fill float32         // every other column
		want float32
	}{
		{map[int]float32{0: -3, 1: -1, 2: -1, 3: -2}, -100, 1}, // first of two equal maxima
		{map[int]float32{0: negZero, 1: 0, 2: -5}, -100, 0},    // -0 == +0: the first wins
		{map[int]float32{0: 1, 1: nan, 2: 5, 3: nan}, -100, 1}, // the first NaN wins
		{nil, -inf, 0}, // all -inf
		{map[int]float32{0: 3, 35: 7, 39: 7}, -1, 35}, // maximum in the second tile
		{map[int]float32{5: 9, 37: 9}, -1, 5},         // equal maxima on two cores: the first range wins
		{map[int]float32{0: 5, 36: nan}, -1, 36},      // a NaN in the second range beats any number
	}
	data := make([]float32, len(rows)*n)
	for r, row := range rows {
		for c := range n {
			v, ok := row.set[c]
			if !ok {
				v = row.fill
			}
			data[r*n+c] = v
		}
	}
	_, op := graphOp(t, argmaxCase("", len(rows), n).build)
	if p, err := Lower(op, NewContext(target.Blackhole())); err != nil {
		t.Fatal(err)
	} else if cores := len(p.Cores()); cores != 2 {
		t.Fatalf("argmax over 2 tiles runs on %d cores, want 2 (one per tile, so the rows above cross cores)", cores)
	}
	got, _ := runOnSim(t, target.Blackhole(), op, [][]float32{data})
	want, err := ref.EvalOp(op, []ref.Tensor{{Shape: op.Operands[0].Type.Shape, Data: data}}, ref.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for r, row := range rows {
		if got[r] != row.want {
			t.Errorf("row %d: device argmax %v, want %v", r, got[r], row.want)
		}
		if want[0].Data[r] != row.want {
			t.Errorf("row %d: reference argmax %v, want %v", r, want[0].Data[r], row.want)
		}
	}
}

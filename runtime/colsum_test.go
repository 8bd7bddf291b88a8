package runtime

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/runtime/blackhole"
	"github.com/tcc-dev/tcc/runtime/blackhole/jit"
	"github.com/tcc-dev/tcc/sim/ref"
)

// Column sums (sum over the second-to-last dim: reduce_tile<SUM,
// REDUCE_COL>, GAPOOL) against what ttsim computes. The vectors in
// testdata/colsum_ttsim.txt were made by TestTTSimColumnSum with
// TCC_TTSIM_COLSUM_WRITE set (see the file's header).

// colSumShape is the operand of the column-sum program: 3 batches of 40
// rows (two tile rows, the second with 24 rows of zeroed padding) of 64
// columns, summed over the rows.
var colSumShape = ir.Shape{3, 40, 64}

// colSumBuild compiles sum(x, axis 1) of an fp32 x of colSumShape.
func colSumBuild(t *testing.T) (*codegen.Build, *ir.Value, *ir.Value) {
	t.Helper()
	b := ir.NewBuilder("colsum")
	x := b.Input("x", ir.T(ir.FP32, colSumShape...))
	out := b.Sum(x, 1)
	b.Output(out)
	g, err := b.Finish()
	require.NoError(t, err)
	build, err := codegen.Compile(g, target.Blackhole())
	require.NoError(t, err)
	return build, x, out
}

// colSumInputs are the operand's values, row-major: each column (batch,
// column) draws from one of six classes by column index, chosen to
// separate an mvmul lane's aligned fixed-point sum from a float32 running
// sum: full-mantissa fp32 in [-1, 1]; bf16 values over 2^-12..2^4; four
// bf16 taps in rows 0..3 over 2^-30..2^0 and the rest zero (a conv's
// products); pairs that cancel to a few ulps; fp32 over 2^-40..2^20; and
// zeros, values below the smallest normal and ordinary ones mixed.
func colSumInputs() []float32 {
	B, R, C := colSumShape[0], colSumShape[1], colSumShape[2]
	x := make([]float32, B*R*C)
	s := uint64(0x9E3779B97F4A7C15)
	next := func() uint64 {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		return s
	}
	unit := func() float64 { return float64(next()>>11) / (1 << 53) } // [0, 1)
	sign := func() float64 {
		if next()&1 == 1 {
			return -1
		}
		return 1
	}
	bf16 := func(v float64) float32 { return math.Float32frombits(math.Float32bits(float32(v)) &^ 0xFFFF) }
	pow := func(lo, hi int) float64 { return math.Ldexp(1+unit(), lo+int(next()%uint64(hi-lo+1))) }
	for b := range B {
		for c := range C {
			col := make([]float32, R)
			switch (b*C + c) % 6 {
			case 0:
				for r := range col {
					col[r] = float32(2*unit() - 1)
				}
			case 1:
				for r := range col {
					col[r] = bf16(sign() * pow(-12, 4))
				}
			case 2:
				for r := range 4 {
					col[r] = bf16(sign() * pow(-30, 0))
				}
			case 3:
				for r := 0; r+1 < R; r += 2 {
					v := sign() * pow(-4, 4)
					col[r] = float32(v)
					col[r+1] = float32(-v * (1 + math.Ldexp(float64(next()%16), -23)))
				}
			case 4:
				for r := range col {
					col[r] = float32(sign() * pow(-40, 20))
				}
			default:
				for r := range col {
					switch next() % 4 {
					case 0:
					case 1:
						col[r] = float32(sign() * math.Ldexp(1+unit(), -128))
					default:
						col[r] = float32(sign() * pow(-6, 2))
					}
				}
			}
			for r, v := range col {
				x[(b*R+r)*C+c] = v
			}
		}
	}
	return x
}

// colSumVectors reads testdata/colsum_ttsim.txt: per line one column's
// operand values (rows 0..39) and ttsim's sum, fp32 bits in hex.
func colSumVectors(t *testing.T) (in, want []float32) {
	t.Helper()
	f, err := os.Open("testdata/colsum_ttsim.txt")
	require.NoError(t, err)
	defer f.Close()
	B, R, C := colSumShape[0], colSumShape[1], colSumShape[2]
	in, want = make([]float32, B*R*C), make([]float32, B*C)
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<16)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		fs := strings.Fields(line)
		require.Len(t, fs, R+1, "line %q", line)
		require.Less(t, n, B*C, "more lines than columns")
		b, c := n/C, n%C
		for r, h := range fs {
			v, err := strconv.ParseUint(h, 16, 32)
			require.NoError(t, err, "line %q", line)
			if r < R {
				in[(b*R+r)*C+c] = math.Float32frombits(uint32(v))
			} else {
				want[n] = math.Float32frombits(uint32(v))
			}
		}
		n++
	}
	require.NoError(t, sc.Err())
	require.Equal(t, B*C, n, "columns in the file")
	return in, want
}

// bitsOf is a slice of float32 values as their bits, for exact diffs.
func bitsOf(v []float32) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = fmt.Sprintf("%08x", math.Float32bits(x))
	}
	return out
}

// TestColumnSumMatchesTTSim: the simulator's column sum (its reduce_tile
// REDUCE_COL: numerics.PoolTile per face) and the reference at the
// device's formats (colPoolSum) equal what ttsim computed, bit for bit,
// on all 192 columns. A float32 running sum of the products (the model
// before, which differed from ttsim in gdn_conv_gates' conv outputs)
// fails most of the classes.
func TestColumnSumMatchesTTSim(t *testing.T) {
	in, want := colSumVectors(t)
	build, x, out := colSumBuild(t)
	m, err := Open("sim", build.Graph.Mesh)
	require.NoError(t, err)
	e, err := Load(m, build)
	require.NoError(t, err)
	require.NoError(t, e.Upload(x, in))
	require.NoError(t, e.Run())
	got, err := e.Download(out)
	require.NoError(t, err)
	if d := cmp.Diff(bitsOf(want), bitsOf(got)); d != "" {
		t.Errorf("simulator's column sums differ from ttsim's (-ttsim +sim):\n%s", d)
	}
	xt := ref.NewTensor(colSumShape)
	copy(xt.Data, in)
	rs, err := ref.Eval(build.Graph, map[*ir.Value]ref.Tensor{x: xt}, ref.DefaultOptions())
	require.NoError(t, err)
	if d := cmp.Diff(bitsOf(want), bitsOf(rs[out].Data)); d != "" {
		t.Errorf("reference's column sums differ from ttsim's (-ttsim +ref):\n%s", d)
	}
}

// colSumFidelity is the math fidelity of the build's compute kernels.
func colSumFidelity(b *codegen.Build) ir.MathFidelity {
	for _, k := range b.Programs[0].Kernel.Kernels {
		if k.Processor == kir.ComputeProc {
			return k.Compute.MathFidelity
		}
	}
	return 0
}

// TestTTSimColumnSum runs the column-sum program on Tenstorrent's chip
// model when a developer has one (TCC_TTSIM names libttsim.so,
// TT_METAL_HOME the tt-metal tree; TCC_JIT_SFPI_INCLUDE and TCC_RISCV_GCC
// as for tcc run): it must match the simulator bit for bit. With
// TCC_TTSIM_COLSUM_WRITE=FILE it writes what ttsim computed as the
// vectors TestColumnSumMatchesTTSim replays.
func TestTTSimColumnSum(t *testing.T) {
	lib, env, ok := ttsimEnv(t)
	if !ok {
		return
	}
	build, x, out := colSumBuild(t)
	var chipOut []float32
	var outName string
	m, err := OpenChip("ttsim", build.Graph.Mesh, ChipOptions{TTSim: lib, Builder: blackhole.JITBuilder{Env: env},
		Compared: func(_ ProgramResult, tt Tensor, chip, _ []byte) {
			if tt.Name == outName {
				v, err := Decode(tt, chip)
				require.NoError(t, err)
				chipOut = v
			}
		}})
	require.NoError(t, err)
	defer m.Close()
	e, err := Load(m, build)
	require.NoError(t, err)
	outName, err = e.name(out)
	require.NoError(t, err)
	in := colSumInputs()
	require.NoError(t, e.Upload(x, in))
	require.NoError(t, e.Run())
	rs := m.ChipResults()
	require.NotEmpty(t, rs)
	for _, r := range rs {
		if r.Status != "matched" {
			t.Errorf("program %d %s launch %d: %s: %s", r.Index, r.Program, r.Launch, r.Status, r.Detail)
		}
	}
	require.Len(t, chipOut, colSumShape[0]*colSumShape[2], "the chip's sums")
	path := os.Getenv("TCC_TTSIM_COLSUM_WRITE")
	if path == "" {
		return
	}
	B, R, C := colSumShape[0], colSumShape[1], colSumShape[2]
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Column sums computed by Tenstorrent's ttsim (v1.10.0, 56694c8a) running tcc's sum over axis 1 of an fp32\n")
	fmt.Fprintf(&sb, "# [%d, %d, %d] tensor (reduce_tile<SUM, REDUCE_COL>, scaler 1.0, fp32 DEST, math fidelity %s) through tcc's JIT\n", B, R, C, colSumFidelity(build))
	fmt.Fprintf(&sb, "# and tt-metal 923191064229: TCC_TTSIM=libttsim.so TCC_TTSIM_COLSUM_WRITE=FILE go test ./runtime -run TestTTSimColumnSum\n")
	fmt.Fprintf(&sb, "# (inputs: colSumInputs). One line per column, batch-major: the %d operand values (rows), then ttsim's sum; fp32 bits.\n", R)
	for b := range B {
		for c := range C {
			for r := range R {
				fmt.Fprintf(&sb, "%08x ", math.Float32bits(in[(b*R+r)*C+c]))
			}
			fmt.Fprintf(&sb, "%08x\n", math.Float32bits(chipOut[b*C+c]))
		}
	}
	require.NoError(t, os.WriteFile(path, []byte(sb.String()), 0o644))
}

// ttsimEnv skips t unless TCC_TTSIM names libttsim.so and TT_METAL_HOME a
// tt-metal tree, and returns the library and the JIT's environment for it.
// ttsim initialises once per process: unless this process is already the
// test's own (TCC_TTSIM_CHILD names it), it runs the test in a new process
// of this binary, wants it to pass, and returns ok false: the caller
// returns (the child ran the test).
func ttsimEnv(t *testing.T) (lib string, env *jit.Env, ok bool) {
	t.Helper()
	return ttsimEnvOf(t, "TCC_TTSIM")
}

// ttsimEnvOf is ttsimEnv with the library named by the environment
// variable libVar (TCC_TTSIM_X2: ttsim's two-chip bh_x2).
func ttsimEnvOf(t *testing.T, libVar string) (lib string, env *jit.Env, ok bool) {
	t.Helper()
	lib, home := os.Getenv(libVar), os.Getenv("TT_METAL_HOME")
	if lib == "" || home == "" {
		t.Skip("set " + libVar + "=/path/to/libttsim.so and TT_METAL_HOME=/path/to/tt-metal to run on ttsim")
	}
	if os.Getenv("TCC_TTSIM_CHILD") != t.Name() {
		run := "^" + strings.Join(strings.Split(t.Name(), "/"), "$/^") + "$"
		c := exec.Command(os.Args[0], "-test.run", run, "-test.count=1", "-test.v")
		c.Env = append(os.Environ(), "TCC_TTSIM_CHILD="+t.Name())
		out, err := c.CombinedOutput()
		require.NoError(t, err, "%s on ttsim:\n%s", t.Name(), out)
		t.Logf("%s", out)
		return "", nil, false
	}
	require.NoError(t, jit.CheckTTMetalHome(home))
	tc, err := jit.FindToolchain(jit.ToolchainOptions{TTMetalHome: home, StockGCC: os.Getenv("TCC_RISCV_GCC")})
	require.NoError(t, err)
	return lib, &jit.Env{Toolchain: tc, TTMetalHome: home, SFPIInclude: os.Getenv("TCC_JIT_SFPI_INCLUDE"), TTSim: true}, true
}

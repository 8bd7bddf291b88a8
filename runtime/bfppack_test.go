package runtime

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/runtime/blackhole"
)

// The device packer's block-float path against what ttsim computes. The
// vectors in testdata/bfppack_ttsim.txt were made by TestTTSimBFPPack with
// TCC_TTSIM_BFPPACK_WRITE set (see the file's header): typecasts of
// awkward values into bfp8_b and bfp4_b, packed by ttsim's packer from an
// fp32 and from a bf16 DEST.

// bfpPackShape is each case's operand: two tiles.
var bfpPackShape = ir.Shape{32, 64}

// bfpPackCase is one typecast: an operand of dtype in packed into out.
type bfpPackCase struct {
	name    string
	in, out ir.DType
}

var bfpPackCases = []bfpPackCase{
	{"fp32_to_bfp8_b", ir.FP32, ir.BFP8B},
	{"bf16_to_bfp8_b", ir.BF16, ir.BFP8B},
	{"fp32_to_bfp4_b", ir.FP32, ir.BFP4B},
	{"bf16_to_bfp4_b", ir.BF16, ir.BFP4B},
}

// bfpPackBuild compiles typecast(x) for one case.
func bfpPackBuild(t *testing.T, c bfpPackCase) (*codegen.Build, *ir.Value, *ir.Value) {
	t.Helper()
	b := ir.NewBuilder("bfppack_" + c.name)
	x := b.Input("x", ir.T(c.in, bfpPackShape...))
	out := b.Typecast(x, c.out)
	b.Output(out)
	g, err := b.Finish()
	require.NoError(t, err)
	build, err := codegen.Compile(g, target.Blackhole())
	require.NoError(t, err)
	return build, x, out
}

// bfpPackFP32Dest reports whether the build's compute kernel runs with
// fp32_dest_acc_en.
func bfpPackFP32Dest(b *codegen.Build) bool {
	for _, p := range b.Programs {
		for _, k := range p.Kernel.Kernels {
			if k.Processor == kir.ComputeProc {
				return k.Compute.FP32DestAccEn
			}
		}
	}
	return false
}

// bfpPackInputs are the operand's values, row-major. Each shared-exponent
// group (16 columns of one row) draws from one class by group index:
// full-mantissa values in [-1, 1]; a wide exponent range (gaps of 8 and
// more); words whose last mantissa bit is set (the 6-bit rounding's ties)
// with random low bits; exponents within 7 of a group maximum 1.0 with
// random 7-bit mantissas (ties of the shift's rounding); mantissas of all
// ones that round up into the next exponent, the group's largest among
// them; zeros, negative zeros, fp32 subnormals and the smallest normals;
// large values near the top of the range. For a bf16 operand the values
// are rounded to bf16 (to nearest even) on upload.
func bfpPackInputs(seed uint64) []float32 {
	R, C := bfpPackShape[0], bfpPackShape[1]
	x := make([]float32, R*C)
	s := seed
	next := func() uint64 {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		return s
	}
	unit := func() float64 { return float64(next()>>11) / (1 << 53) }
	sign := func() uint32 { return uint32(next()&1) << 31 }
	word := func(sgn, e, m7 uint32) float32 { // a bf16 word with random low 16 bits
		return math.Float32frombits(sgn | e<<23 | m7<<16 | uint32(next()&0xFFFF))
	}
	for r := range R {
		for g := range C / 16 {
			vals := x[r*C+16*g : r*C+16*g+16]
			switch (r*(C/16) + g) % 7 {
			case 0:
				for i := range vals {
					vals[i] = float32(2*unit() - 1)
				}
			case 1:
				for i := range vals {
					vals[i] = float32(math.Ldexp(1+unit(), int(next()%41)-20))
					if next()&1 == 1 {
						vals[i] = -vals[i]
					}
				}
			case 2:
				for i := range vals {
					vals[i] = word(sign(), 120+uint32(next()%8), uint32(next()%128)|1)
				}
			case 3:
				for i := range vals {
					vals[i] = math.Float32frombits(sign() | (120+uint32(next()%8))<<23 | uint32(next()%128)<<16)
				}
				vals[next()%16] = 1
			case 4:
				for i := range vals {
					vals[i] = word(sign(), 122+uint32(next()%6), 0x7F)
				}
				vals[next()%16] = word(0, 127, 0x7F)
			case 5:
				for i := range vals {
					switch next() % 6 {
					case 0:
						vals[i] = 0
					case 1:
						vals[i] = float32(math.Copysign(0, -1))
					case 2:
						vals[i] = math.Float32frombits(sign() | uint32(next()%0x800000))
					case 3:
						vals[i] = math.Float32frombits(sign() | 1<<23 | uint32(next()%0x10000))
					case 4:
						vals[i] = math.Float32frombits(sign() | 0x7F<<16 | uint32(next()%0x10000))
					default:
						vals[i] = word(sign(), 1+uint32(next()%8), uint32(next()%128))
					}
				}
			default:
				for i := range vals {
					vals[i] = word(sign(), 246+uint32(next()%8), uint32(next()%128))
				}
			}
		}
	}
	return x
}

// bfpPackVectors reads testdata/bfppack_ttsim.txt: per case, per group a
// line "case tile group: 16 DEST values (fp32 bits) | shared exponent and
// 16 codes (hex)". It returns per case the operand's uploaded values
// (row-major) and ttsim's output bytes, and per case whether DEST was fp32.
func bfpPackVectors(t *testing.T) (in map[string][]float32, want map[string][]byte) {
	t.Helper()
	f, err := os.Open("testdata/bfppack_ttsim.txt")
	require.NoError(t, err)
	defer f.Close()
	in, want = map[string][]float32{}, map[string][]byte{}
	R, C := bfpPackShape[0], bfpPackShape[1]
	tiles := R * C / numerics.TileElems
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<16)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		fs := strings.Fields(line)
		require.Len(t, fs, 3+16+1+17, "line %q", line)
		name := fs[0]
		var c bfpPackCase
		for _, k := range bfpPackCases {
			if k.name == name {
				c = k
			}
		}
		require.NotEmpty(t, c.name, "unknown case in line %q", line)
		if in[name] == nil {
			in[name] = make([]float32, tiles*numerics.TileElems) // tiles, face order
			want[name] = make([]byte, tiles*c.out.TileBytes())
		}
		tile, err := strconv.Atoi(fs[1])
		require.NoError(t, err)
		grp, err := strconv.Atoi(fs[2])
		require.NoError(t, err)
		require.True(t, tile >= 0 && tile < tiles && grp >= 0 && grp < numerics.GroupsPerTile, "line %q", line)
		hex := func(s string, bits int) uint64 {
			v, err := strconv.ParseUint(s, 16, bits)
			require.NoError(t, err, "line %q", line)
			return v
		}
		for j := range 16 {
			in[name][tile*numerics.TileElems+grp*16+j] = math.Float32frombits(uint32(hex(fs[3+j], 32)))
		}
		require.Equal(t, "|", fs[19], "line %q", line)
		tb := want[name][tile*c.out.TileBytes() : (tile+1)*c.out.TileBytes()]
		tb[grp] = byte(hex(fs[20], 8))
		for j := range 16 {
			code := byte(hex(fs[21+j], 8))
			idx := grp*16 + j
			if c.out == ir.BFP8B {
				tb[numerics.GroupsPerTile+idx] = code
			} else {
				tb[numerics.GroupsPerTile+idx/2] |= code << (4 * uint(idx%2))
			}
		}
	}
	require.NoError(t, sc.Err())
	for _, c := range bfpPackCases {
		require.Contains(t, in, c.name, "case %s in the file", c.name)
	}
	return in, want
}

// bfpPackCodes splits one group's packed bytes into its 16 codes.
func bfpPackCodes(dt ir.DType, tile []byte, grp int) []byte {
	out := make([]byte, 16)
	for j := range out {
		idx := grp*16 + j
		if dt == ir.BFP8B {
			out[j] = tile[numerics.GroupsPerTile+idx]
		} else {
			out[j] = tile[numerics.GroupsPerTile+idx/2] >> (4 * uint(idx%2)) & 0xF
		}
	}
	return out
}

// bfpPackDiffer counts the groups whose exponent or codes pack differs
// from want.
func bfpPackDiffer(t *testing.T, dt ir.DType, dest []float32, want []byte, pack func(tile []float32) ([]byte, error)) (groups int, lines []string) {
	t.Helper()
	n := dt.TileBytes()
	for tl := 0; tl*numerics.TileElems < len(dest); tl++ {
		got, err := pack(dest[tl*numerics.TileElems : (tl+1)*numerics.TileElems])
		require.NoError(t, err)
		w := want[tl*n : (tl+1)*n]
		for g := range numerics.GroupsPerTile {
			if got[g] != w[g] || !cmp.Equal(bfpPackCodes(dt, got, g), bfpPackCodes(dt, w, g)) {
				groups++
				lines = append(lines, fmt.Sprintf("tile %d group %d: exp %02x codes % x, want exp %02x codes % x", tl, g, got[g], bfpPackCodes(dt, got, g), w[g], bfpPackCodes(dt, w, g)))
			}
		}
	}
	return groups, lines
}

// bfpPackDest is what DEST holds after copy_tile of the operand values op
// of dtype dt (as the simulator models it): an fp32 CB is unpacked to DEST
// unchanged, subnormals included; a bf16 one passes through SrcA, which
// flushes subnormals to zero of their sign.
func bfpPackDest(dt ir.DType, op []float32) []float32 {
	out := make([]float32, len(op))
	for i, v := range op {
		if dt == ir.BF16 && v != 0 && math.Abs(float64(v)) < 0x1p-126 {
			v = float32(math.Copysign(0, float64(v)))
		}
		out[i] = v
	}
	return out
}

// TestBFPPackMatchesTTSim: the device packer model (PackTileDevice) packs
// the DEST values ttsim packed into the same bytes, exponents included, in
// every group of every case; the simulator running the typecast returns
// the values those bytes hold. The host packer's model (PackTilesHost)
// and the exactly rounded pack (PackTile, round to nearest even of the
// full significand, which the simulator used before) differ from ttsim in
// most groups of every case.
func TestBFPPackMatchesTTSim(t *testing.T) {
	in, want := bfpPackVectors(t)
	for _, c := range bfpPackCases {
		t.Run(c.name, func(t *testing.T) {
			build, x, out := bfpPackBuild(t, c)
			fp32 := bfpPackFP32Dest(build)
			w := want[c.name]
			dest := bfpPackDest(c.in, in[c.name])
			n, lines := bfpPackDiffer(t, c.out, dest, w, func(tile []float32) ([]byte, error) {
				return numerics.PackTileDevice(c.out, tile, fp32)
			})
			if n != 0 {
				t.Errorf("PackTileDevice differs from ttsim in %d groups:\n%s", n, strings.Join(lines, "\n"))
			}
			hn, _ := bfpPackDiffer(t, c.out, dest, w, func(tile []float32) ([]byte, error) {
				return numerics.PackTilesHost(c.out, tile)
			})
			t.Logf("%s: the host packer's model differs from ttsim in %d of %d groups", c.name, hn, len(dest)/16)
			if hn == 0 {
				t.Errorf("the host packer's model matches ttsim everywhere: the vectors do not tell the models apart")
			}
			en, _ := bfpPackDiffer(t, c.out, dest, w, func(tile []float32) ([]byte, error) {
				return numerics.PackTile(c.out, tile)
			})
			t.Logf("%s: the exactly rounded pack (the simulator's model before) differs from ttsim in %d of %d groups", c.name, en, len(dest)/16)
			if en == 0 {
				t.Errorf("the exactly rounded pack matches ttsim everywhere: the vectors do not tell the models apart")
			}

			// The simulator: the operand is the DEST values (the copy
			// into DEST keeps them), the result what ttsim's bytes hold.
			m, err := Open("sim", build.Graph.Mesh)
			require.NoError(t, err)
			e, err := Load(m, build)
			require.NoError(t, err)
			R, C := bfpPackShape[0], bfpPackShape[1]
			require.NoError(t, e.Upload(x, numerics.Untilize(in[c.name], R, C)))
			require.NoError(t, e.Run())
			got, err := e.Download(out)
			require.NoError(t, err)
			tiles, err := numerics.UnpackTiles(c.out, w)
			require.NoError(t, err)
			if d := cmp.Diff(bitsOf(numerics.Untilize(tiles, R, C)), bitsOf(got)); d != "" {
				t.Errorf("simulator's typecast differs from ttsim's (-ttsim +sim):\n%s", d)
			}
		})
	}
}

// TestTTSimBFPPack runs the typecasts on Tenstorrent's chip model when a
// developer has one (as TestTTSimColumnSum; one process per case, as
// ttsim opens once per process): every launch must match the simulator
// bit for bit. With TCC_TTSIM_BFPPACK_WRITE=FILE it writes the operands
// and ttsim's packed bytes as the vectors TestBFPPackMatchesTTSim replays.
func TestTTSimBFPPack(t *testing.T) {
	path := os.Getenv("TCC_TTSIM_BFPPACK_WRITE")
	for ci, c := range bfpPackCases {
		t.Run(c.name, func(t *testing.T) { ttsimBFPPackCase(t, ci, c, path) })
	}
	if path == "" || os.Getenv("TCC_TTSIM_CHILD") != "" || t.Failed() {
		return
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Block-float packs computed by Tenstorrent's ttsim (v1.10.0, 56694c8a) running tcc's typecast of a\n")
	fmt.Fprintf(&sb, "# %v tensor (copy_tile into DEST, pack_tile into a bfp8_b or bfp4_b CB) through tcc's JIT and tt-metal\n", bfpPackShape)
	fmt.Fprintf(&sb, "# 923191064229: TCC_TTSIM=libttsim.so TCC_TTSIM_BFPPACK_WRITE=FILE go test ./runtime -run TestTTSimBFPPack\n")
	fmt.Fprintf(&sb, "# (inputs: bfpPackInputs, seed per case). One line per shared-exponent group: case, tile, group, the 16\n")
	fmt.Fprintf(&sb, "# operand values (fp32 bits, as uploaded), |, ttsim's shared exponent and 16 codes (hex).\n")
	for _, c := range bfpPackCases {
		part := path + "." + c.name
		b, err := os.ReadFile(part)
		require.NoError(t, err)
		sb.Write(b)
		require.NoError(t, os.Remove(part))
	}
	require.NoError(t, os.WriteFile(path, []byte(sb.String()), 0o644))
}

// ttsimBFPPackCase runs case c (seed index ci) on ttsim and, with path
// set, writes its lines to path.<case>.
func ttsimBFPPackCase(t *testing.T, ci int, c bfpPackCase, path string) {
	lib, env, ok := ttsimEnv(t)
	if !ok {
		return
	}
	build, x, out := bfpPackBuild(t, c)
	var sb strings.Builder
	fmt.Fprintf(&sb, "# %s: fp32_dest_acc_en %v\n", c.name, bfpPackFP32Dest(build))
	var chipOut []byte
	var outName string
	m, err := OpenChip("ttsim", build.Graph.Mesh, ChipOptions{TTSim: lib, Builder: blackhole.JITBuilder{Env: env},
		Compared: func(_ ProgramResult, tt Tensor, chip, _ []byte) {
			if tt.Name == outName {
				chipOut = append([]byte(nil), chip...)
			}
		}})
	require.NoError(t, err)
	defer m.Close()
	e, err := Load(m, build)
	require.NoError(t, err)
	outName, err = e.name(out)
	require.NoError(t, err)
	R, C := bfpPackShape[0], bfpPackShape[1]
	vals := bfpPackInputs(0x9E3779B97F4A7C15 + uint64(ci))
	if c.in == ir.BF16 {
		for i, v := range vals {
			vals[i] = numerics.RoundBF16(v)
		}
	}
	require.NoError(t, e.Upload(x, vals))
	require.NoError(t, e.Run())
	for _, r := range m.ChipResults() {
		if r.Status != "matched" {
			t.Errorf("program %d %s launch %d: %s: %s", r.Index, r.Program, r.Launch, r.Status, r.Detail)
		}
	}
	tiles := R * C / numerics.TileElems
	require.Len(t, chipOut, tiles*c.out.TileBytes(), "the chip's output bytes")
	dest := numerics.Tilize(vals, R, C)
	for tl := range tiles {
		tb := chipOut[tl*c.out.TileBytes() : (tl+1)*c.out.TileBytes()]
		for g := range numerics.GroupsPerTile {
			fmt.Fprintf(&sb, "%s %d %d", c.name, tl, g)
			for j := range 16 {
				fmt.Fprintf(&sb, " %08x", math.Float32bits(dest[tl*numerics.TileElems+g*16+j]))
			}
			fmt.Fprintf(&sb, " | %02x", tb[g])
			for _, code := range bfpPackCodes(c.out, tb, g) {
				fmt.Fprintf(&sb, " %02x", code)
			}
			sb.WriteString("\n")
		}
	}
	if path != "" {
		require.NoError(t, os.WriteFile(path+"."+c.name, []byte(sb.String()), 0o644))
	}
}

package runtime

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/kir/kirtest"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/runtime/blackhole"
	"github.com/tcc-dev/tcc/runtime/blackhole/access"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/fake"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware/fwtest"
)

// fakeBuilder returns small images and test firmware; skip names kernels
// it refuses as the JIT refuses SFPU kernels without the SFPI compiler.
type fakeBuilder struct {
	fwDir string
	skip  string
}

func (b fakeBuilder) Firmware() (firmware.Set, error) { return firmware.ReadSet(b.fwDir) }

func (b fakeBuilder) Kernel(_ string, p *hostcfg.ProgramConfig, k *hostcfg.KernelConfig) (map[int][]byte, error) {
	if k.Name == b.skip {
		return nil, &blackhole.SkipError{Reason: "kernel " + k.Name + " needs the SFPU"}
	}
	img := make([]byte, 64)
	switch k.Processor {
	case "RISCV_0":
		return map[int][]byte{0: img}, nil
	case "RISCV_1":
		return map[int][]byte{1: img}, nil
	}
	return map[int][]byte{2: img, 3: img, 4: img}, nil
}

// eltwiseBuild is a one-program build of kirtest's eltwise add program.
func eltwiseBuild(t *testing.T) *codegen.Build {
	t.Helper()
	return &codegen.Build{Graph: &ir.Graph{Mesh: ir.Mesh{Rows: 1, Cols: 1}}, Programs: []*codegen.Program{{Op: &ir.Op{}, Kernel: kirtest.EltwiseBinary(kir.EltAdd, ir.BF16, 4, []kir.Core{{X: 0, Y: 0}})}}}
}

// The chip's effect is played by the fake: it writes what the simulator
// computed, with one byte changed in the launches listed in corrupt: byte 0
// (element [0 0], defined) or the last byte (row 127 of the last tile,
// padding when the tensor has fewer rows). Every launch is compared.
func TestChipShadowCheck(t *testing.T) {
	dir := t.TempDir()
	if err := fwtest.WriteSet(dir); err != nil {
		t.Fatal(err)
	}
	type want struct{ status, detail string }
	for _, c := range []struct {
		name, skip string
		rows       int         // the tensors' rows; 0: all 128 rows of the 4 tiles
		corrupt    map[int]int // launch -> byte (-1: the last)
		launches   int
		want       []want
	}{
		{name: "matched", launches: 1, want: []want{{"matched", "3 buffers bit-exact"}}},
		{name: "differs", launches: 1, corrupt: map[int]int{0: 0},
			want: []want{{"differs", "buffer out: 1 of 4096 defined bf16 values differ (at most 1 ulp); first: element [0 0] is -6.03125 (0xc0c1) on the chip, -6 (0xc0c0) on the simulator"}}},
		{name: "padding differs", rows: 98, launches: 1, corrupt: map[int]int{0: -1},
			want: []want{{"matched", "3 buffers bit-exact on their defined elements; tile padding differs in 1"}}},
		{name: "defined row of a padded tensor differs", rows: 98, launches: 1, corrupt: map[int]int{0: 0},
			want: []want{{"differs", "buffer out: 1 of 3136 defined bf16 values differ (at most 1 ulp); first: element [0 0]"}}},
		{name: "a later launch differs", launches: 3, corrupt: map[int]int{1: 0},
			want: []want{{"matched", "bit-exact"}, {"differs", "first: element [0 0]"}, {"matched", "bit-exact"}}},
		{name: "skipped", skip: "compute", launches: 1, want: []want{{"skipped", "needs the SFPU"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fake.New()
			var announced []ProgramResult // BeforeLaunch's calls
			before := func(r ProgramResult) { announced = append(announced, r) }
			m, err := OpenChip("fake", ir.Mesh{Rows: 1, Cols: 1}, ChipOptions{Builder: fakeBuilder{fwDir: dir, skip: c.skip}, Fake: blackhole.Options{Fake: f}, BeforeLaunch: before})
			if err != nil {
				t.Fatal(err)
			}
			b := eltwiseBuild(t)
			rows := c.rows
			if rows == 0 {
				rows = 4 * 32
			}
			for _, buf := range b.Programs[0].Kernel.Buffers {
				if err := m.Alloc(Tensor{Buffer: buf, Shape: ir.Shape{rows, 32}}); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := hostcfg.ConfigValidated(b.Programs[0].Kernel, target.Blackhole())
			if err != nil {
				t.Fatal(err)
			}
			e := &Executable{Mesh: m, Build: b, binding: map[string]string{}, dir: t.TempDir(), configs: map[int]*hostcfg.ProgramConfig{0: cfg}}
			in := make([]float32, rows*32)
			for i := range in {
				in[i] = float32(i%7) - 3
			}
			for _, n := range []string{"a", "b"} {
				if err := m.Upload(0, n, in); err != nil {
					t.Fatal(err)
				}
			}
			// Play the kernels: copy the simulator's output into the fake's DRAM.
			launch := 0
			f.Program = func(fc *fake.Chip, ln *fake.Launch) error {
				if ln.Core != (fake.XY{X: 1, Y: 2}) {
					return nil
				}
				if len(announced) != launch+1 {
					t.Errorf("launch %d ran after %d BeforeLaunch calls, want %d", launch+1, len(announced), launch+1)
				}
				db, _ := m.devices[0].Buffer("out")
				page, _ := m.devices[0].ReadPages("out", 0, db.Pages)
				if k, ok := c.corrupt[launch]; ok {
					page = append([]byte(nil), page...)
					if k < 0 {
						k = len(page) - 1
					}
					page[k] ^= 1
				}
				launch++
				return m.chip.WritePages(placement(db), page)
			}
			for range c.launches {
				if err := e.RunProgram(0); err != nil {
					t.Fatal(err)
				}
			}
			rs := m.ChipResults()
			if len(announced) != c.launches {
				t.Errorf("BeforeLaunch called %d times, want once per launch (%d)", len(announced), c.launches)
			}
			for i, r := range announced {
				if r.Program != b.Programs[0].Kernel.Name || r.Launch != i+1 || r.Status != "" {
					t.Errorf("BeforeLaunch call %d: %+v, want program %q launch %d", i, r, b.Programs[0].Kernel.Name, i+1)
				}
			}
			if len(rs) != len(c.want) {
				t.Fatalf("%d results %+v, want %d", len(rs), rs, len(c.want))
			}
			for i, w := range c.want {
				if rs[i].Status != w.status || !strings.Contains(rs[i].Detail, w.detail) || rs[i].Launch != i+1 {
					t.Errorf("result %d: %+v, want launch %d %q saying %q", i, rs[i], i+1, w.status, w.detail)
				}
			}
			if len(f.Errors) > 0 {
				t.Errorf("fake chip: %v", f.Errors)
			}
		})
	}
}

func TestOpenChipErrors(t *testing.T) {
	if _, err := OpenChip("fake", ir.Mesh{Rows: 1, Cols: 2}, ChipOptions{Builder: fakeBuilder{}, Fake: blackhole.Options{Fake: fake.New()}}); err == nil ||
		!strings.Contains(err.Error(), "mesh 1x2 needs 2 chips (mesh device d on chip d), the backend has 1") {
		t.Errorf("two-device mesh on one chip: %v", err)
	}
	f := fake.New()
	f.SetDeviceID(0x401E)
	_, err := OpenChip("fake", ir.Mesh{Rows: 1, Cols: 1}, ChipOptions{Builder: fakeBuilder{}, Fake: blackhole.Options{Fake: f}})
	if err == nil || !strings.Contains(err.Error(), "the chip is wormhole_b0") {
		t.Errorf("wrong arch: %v", err)
	}
	if _, err := Open("blackhole", ir.Mesh{Rows: 1, Cols: 1}); err == nil {
		t.Error("Open(blackhole) without a builder: no error")
	}
}

// TestChipBuildDirRemoved checks that the sources a build writes for the
// chip's JIT are gone once the mesh is closed, and that opening a chip
// removes those a process that ended without closing its mesh left (a
// ttsim fatal ends the process).
func TestChipBuildDirRemoved(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	done := exec.Command(os.Args[0], "-test.run", "^$")
	require.NoError(t, done.Run())
	stale := filepath.Join(tmp, fmt.Sprintf("tcc-build-%d-1", done.Process.Pid))
	require.NoError(t, os.MkdirAll(filepath.Join(stale, "b"), 0o755))
	g, build, fw := addScalarBuild(t)
	m, err := OpenChip("fake", g.Mesh, ChipOptions{Builder: fakeBuilder{fwDir: fw}, Fake: blackhole.Options{Fake: fake.New()}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := Load(m, build)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob(filepath.Join(tmp, "tcc-build-*"))
	if len(dirs) != 1 || !strings.HasPrefix(filepath.Base(dirs[0]), fmt.Sprintf("tcc-build-%d-", os.Getpid())) {
		t.Fatalf("build directories while open: %v, want one, this process's (the stale one removed)", dirs)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if dirs, _ := filepath.Glob(filepath.Join(tmp, "tcc-build-*")); len(dirs) != 0 {
		t.Errorf("left after Close: %v", dirs)
	}
}

// TestDefinedDiff compares page bytes on the elements a tensor defines.
func TestDefinedDiff(t *testing.T) {
	mk := func(typ ir.TensorType, data []float32) (Tensor, []byte) {
		tt := tensor("t", typ)
		b, err := Encode(tt, data)
		if err != nil {
			t.Fatal(err)
		}
		return tt, b
	}
	seq := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i%13) - 6
		}
		return v
	}
	flip := func(b []byte, i int) []byte {
		c := append([]byte(nil), b...)
		c[i] ^= 1
		return c
	}
	bfp, bfpBytes := mk(ir.T(ir.BFP8B, 3, 64), seq(3*64))
	ids, idBytes := mk(ir.TensorType{Shape: ir.Shape{2}, DType: ir.Int32, Layout: ir.RowMajorLayout}, []float32{1 << 24, 7})
	rm, rmBytes := mk(ir.TensorType{Shape: ir.Shape{2, 16}, DType: ir.BF16, Layout: ir.RowMajorLayout}, seq(32))
	for _, tc := range []struct {
		name        string
		t           Tensor
		got, want   []byte
		diff        string
		wantPadding bool
	}{
		{"equal", bfp, bfpBytes, bfpBytes, "", false},
		// bfp8_b: byte 64 is the first mantissa, element [0 0].
		{"bfp8 defined", bfp, flip(bfpBytes, 64), bfpBytes, "1 of 192 defined bfp8_b values differ; first: element [0 0] is", false},
		// row 3 of face 0 is padding (the tensor has 3 rows).
		{"bfp8 padding", bfp, flip(bfpBytes, 64+3*16), bfpBytes, "", true},
		// an int32 past float32's integers: 1<<24 and 1<<24+1 differ.
		{"int32 bits", ids, flip(idBytes, 0), idBytes, "1 of 2 defined int32 values differ; first: element [0] is 16777217 on the chip, 16777216 on the simulator", false},
		{"bf16 row major", rm, flip(rmBytes, 2*17+1), rmBytes, "first: element [1 1] is", false},
		{"lengths", rm, rmBytes[:4], rmBytes, "the chip returned 4 bytes, the simulator holds 64", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diff, padding := definedDiff(tc.t, tc.got, tc.want)
			if padding != tc.wantPadding || (tc.diff == "") != (diff == "") || !strings.Contains(diff, tc.diff) {
				t.Errorf("definedDiff = %q, padding %v; want %q, padding %v", diff, padding, tc.diff, tc.wantPadding)
			}
		})
	}
}

// TestOpenChipOnChip1 runs a one-device build on chip 1 of a two-chip
// system (ChipOptions.Chip, as `tcc run --chip 1` on ttsim's bh_x2): every
// launch is on chip 1 and matches the simulator, chip 0 runs nothing. A
// chip the system does not have is an error naming it and the count.
func TestOpenChipOnChip1(t *testing.T) {
	g, build, fw := addScalarBuild(t)
	fs := fake.NewChips(2)
	fakes := blackhole.Options{Fakes: []access.BAR{fs[0], fs[1]}}
	other := fake.NewChips(2)
	if _, err := OpenChip("fake", g.Mesh, ChipOptions{Builder: fakeBuilder{fwDir: fw}, Fake: blackhole.Options{Fakes: []access.BAR{other[0], other[1]}}, Chip: 2}); err == nil ||
		!strings.Contains(err.Error(), "chip 2: the backend has 2 chip(s) (0..1)") {
		t.Errorf("chip 2 of 2: %v", err)
	}
	m, err := OpenChip("fake", g.Mesh, ChipOptions{Builder: fakeBuilder{fwDir: fw}, Fake: fakes, Chip: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e, err := Load(m, build)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	if len(fs[0].Launches) != 0 || len(fs[0].Boots) != 0 {
		t.Errorf("chip 0: %d launches, %d boots; want none", len(fs[0].Launches), len(fs[0].Boots))
	}
	if len(fs[1].Launches) == 0 {
		t.Errorf("chip 1: no launches")
	}
	rs := m.ChipResults()
	if len(rs) != len(build.Programs) {
		t.Fatalf("%d chip results for %d programs: %+v", len(rs), len(build.Programs), rs)
	}
	for _, r := range rs {
		if r.Status == "failed" {
			t.Errorf("program %s on chip 1: %s", r.Program, r.Detail)
		}
	}
}

// TestOpenChipMesh1x2 runs a 1x2 build with collectives on two fake
// chips: mesh device d's programs launch on chip d (results name the
// device), and each collective's ring links are checked against the links
// the chips report. Cabled as the build's ring (at 1x2: device 0 channel
// 0 <-> device 1 channel 1, 1 <-> 0, 2 <-> 3, 3 <-> 2) every program runs
// on both devices, collectives included: their ethernet cores on both
// chips are started before either chip is waited on (each fake's
// ethernet cores report done Delay cycles after their go message, and
// only a wait on that chip advances its clock, so chip 0's last started
// ethernet core must still be running when chip 1's start). Cabled as a
// P300 (0:2 <-> 1:9, 0:3 <-> 1:8) the run fails naming the program and
// link.
func TestOpenChipMesh1x2(t *testing.T) {
	fw := t.TempDir()
	if err := fwtest.WriteSet(fw); err != nil {
		t.Fatal(err)
	}
	g, x, _ := meshGraph(t, 2)
	build, err := codegen.Compile(g, target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	var runOn func(t *testing.T, build *codegen.Build, tp *target.Topology, cables [][2]int) ([]*fake.Chip, *Mesh, error)
	run := func(t *testing.T, cables [][2]int) ([]*fake.Chip, *Mesh, error) {
		return runOn(t, build, nil, cables)
	}
	runOn = func(t *testing.T, build *codegen.Build, tp *target.Topology, cables [][2]int) ([]*fake.Chip, *Mesh, error) {
		fs := fake.NewChips(2)
		for _, f := range fs {
			f.Delay = 5000
		}
		fs[1].EthProgram = func(c *fake.Chip, l fake.EthLaunch) error {
			last := fs[0].EthLaunches
			if len(last) == 0 {
				return fmt.Errorf("ethernet core %v of chip 1 started before any of chip 0", l.Core)
			}
			at := last[len(last)-1].Core
			if sig := fs[0].L1(at.X, at.Y)[fake.EthGo+3]; sig != target.BlackholeLayout().RunMsgGo {
				return fmt.Errorf("ethernet core %v of chip 1 started after chip 0's core %v finished (go signal %#x): chip 0 was waited on first", l.Core, at, sig)
			}
			return nil
		}
		for _, c := range cables {
			if err := fake.Cable(fs[0], c[0], fs[1], c[1]); err != nil {
				t.Fatal(err)
			}
		}
		m, err := OpenChip("fake", g.Mesh, ChipOptions{Builder: fakeBuilder{fwDir: fw}, Fake: blackhole.Options{Fakes: []access.BAR{fs[0], fs[1]}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		if tp != nil {
			require.NoError(t, m.UseTopology(tp))
		}
		e, err := Load(m, build)
		if err != nil {
			t.Fatal(err)
		}
		for d := 0; d < 2; d++ {
			if err := e.UploadTo(d, x, make([]float32, x.Type.Shape.Numel())); err != nil {
				t.Fatal(err)
			}
		}
		return fs, m, e.Run()
	}

	t.Run("ring cabling", func(t *testing.T) {
		fs, m, err := run(t, [][2]int{{0, 1}, {1, 0}, {2, 3}, {3, 2}})
		if err != nil {
			t.Fatal(err)
		}
		end := func(chip, ch int) blackhole.EthEnd { return blackhole.EthEnd{Chip: chip, Channel: ch} }
		wantLinks := []blackhole.EthLink{{A: end(0, 0), B: end(1, 1)}, {A: end(0, 1), B: end(1, 0)}, {A: end(0, 2), B: end(1, 3)}, {A: end(0, 3), B: end(1, 2)}}
		if diff := cmp.Diff(wantLinks, m.ChipLinks()); diff != "" {
			t.Errorf("chip links (-want +got):\n%s", diff)
		}
		type key struct {
			program string
			device  int
		}
		got := map[key]string{}
		for _, r := range m.ChipResults() {
			got[key{r.Program, r.Device}] = r.Status
		}
		want := map[key]string{}
		colls := 0
		for _, p := range build.Programs {
			if IsCollective(p.Kernel) {
				colls++
			}
			for d := 0; d < 2; d++ {
				want[key{p.Kernel.Name, d}] = "ran"
			}
		}
		require.NotZero(t, colls, "the build has no collectives")
		for k, s := range got {
			if s == "matched" || s == "differs" {
				got[k] = "ran" // the fake computes nothing: matched or differs
			}
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(key{})); diff != "" {
			t.Errorf("chip results by program and device (-want +got):\n%s", diff)
		}
		for d, f := range fs {
			if len(f.Launches) == 0 {
				t.Errorf("chip %d: no launches", d)
			}
			if len(f.EthLaunches) == 0 {
				t.Errorf("chip %d: no ethernet launches", d)
			}
			for _, err := range f.Errors {
				t.Errorf("chip %d: %v", d, err)
			}
		}
	})

	// A build planned on the P300 topology runs on P300 cabling: its link
	// check maps the logical channels to each chip's physical ones
	// (Ethernet.Ports), so its collectives pass it and run, each
	// ethernet kernel on its chip's physical channel (chip 0: 2 and 3,
	// chip 1: 8 and 9).
	t.Run("p300 build on p300 cabling", func(t *testing.T) {
		tp, err := target.LookupTopology("p300")
		require.NoError(t, err)
		tt, err := target.Blackhole().WithTopology(tp, 2)
		require.NoError(t, err)
		b300, err := codegen.Compile(g, tt)
		require.NoError(t, err)
		fs, m, err := runOn(t, b300, tp, [][2]int{{2, 9}, {3, 8}})
		require.NoError(t, err)
		for _, r := range m.ChipResults() {
			if r.Status == "skipped" || r.Status == "failed" {
				t.Errorf("program %s on device %d: %s: %s", r.Program, r.Device, r.Status, r.Detail)
			}
		}
		for d, want := range [][]int{{2, 3}, {8, 9}} {
			var nocs []fake.XY
			for _, ch := range want {
				x, y, err := tt.EthNoC(ch)
				require.NoError(t, err)
				nocs = append(nocs, fake.XY{X: x, Y: y})
			}
			got := map[fake.XY]bool{}
			for _, l := range fs[d].EthLaunches {
				got[l.Core] = true
			}
			var gotCores []fake.XY
			for _, c := range nocs {
				if got[c] {
					gotCores = append(gotCores, c)
				}
			}
			if len(got) != len(nocs) || len(gotCores) != len(nocs) {
				t.Errorf("chip %d: ethernet launches on %v, want the cores of physical channels %v (%v)", d, got, want, nocs)
			}
		}
	})

	t.Run("p300 cabling", func(t *testing.T) {
		_, _, err := run(t, [][2]int{{2, 9}, {3, 8}})
		if err == nil {
			t.Fatal("no error")
		}
		for _, s := range []string{"uses the ethernet link chip 0 channel 0 <-> chip 1 channel 1, which the chips do not have",
			"chip 0 channel 0 has no link to an opened chip",
			"their links: chip 0 channel 2 <-> chip 1 channel 9, chip 0 channel 3 <-> chip 1 channel 8"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not say %q", err, s)
			}
		}
	})
}

// TestPhysicalChannel maps a build's logical ring channels to each chip's
// physical ones: the identity on the default topology, Ports[d] on a P300
// (chip 1 sends east on physical 8 and receives from the west on 9).
func TestPhysicalChannel(t *testing.T) {
	p300, err := target.LookupTopology("p300")
	require.NoError(t, err)
	t300, err := target.Blackhole().WithTopology(p300, 2)
	require.NoError(t, err)
	tests := []struct {
		name      string
		t         *target.Target
		chip, ch  int
		want      int
		wantError string
	}{
		{"default chip 1", target.Blackhole(), 1, 1, 1, ""},
		{"p300 chip 0 east", t300, 0, 2, 2, ""},
		{"p300 chip 1 east", t300, 1, 2, 8, ""},
		{"p300 chip 1 west", t300, 1, 3, 9, ""},
		{"p300 not a ring channel", t300, 1, 5, 0, "ethernet channel 5 is not a ring channel"},
		{"p300 chip 2", t300, 2, 2, 0, "chip 2 is not in the build's 2-chip ring"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PhysicalChannel(tc.t, tc.chip, tc.ch)
			if tc.wantError != "" {
				require.Error(t, err)
				require.Contains(t, err.Error(), tc.wantError)
				return
			}
			require.NoError(t, err)
			if got != tc.want {
				t.Errorf("PhysicalChannel(chip %d, channel %d) = %d, want %d", tc.chip, tc.ch, got, tc.want)
			}
		})
	}
}

// TestChipComparesDefinedValue: a program that writes a value into a
// shared buffer sized for a larger one (here 8 rows into the 11 of a
// sliced value's buffer) is compared on its value's rows only: the rows
// past them hold what the larger value left, which the chip and the
// simulator need not agree on (matmul4 in the small config's prefill on
// ttsim). A difference in the value's own rows still counts. The fake
// plays each program by writing the simulator's results, with one byte
// of the mul_scalar program's result buffer changed.
func TestChipComparesDefinedValue(t *testing.T) {
	fw := t.TempDir()
	require.NoError(t, fwtest.WriteSet(fw))
	b := ir.NewBuilder("shared")
	x := b.Input("x", ir.T(ir.BF16, 11, 64))
	wide := b.AddScalar(x, 0.5)
	narrow := b.MulScalar(b.Slice(wide, []int{0, 0}, []int{8, 64}), 2)
	b.Output(b.AddScalar(narrow, 1))
	g, err := b.Finish()
	require.NoError(t, err)
	build, err := codegen.Compile(g, target.Blackhole())
	require.NoError(t, err)
	spec := build.BufferOf(narrow)
	require.NotNil(t, spec)
	require.Equal(t, ir.Shape{11, 64}, spec.Shape, "the precondition: mul_scalar's [8, 64] result shares the [11, 64] buffer")
	prog := -1
	for i, p := range build.Programs {
		if p.Op.Result() == narrow {
			prog = i
		}
	}
	require.GreaterOrEqual(t, prog, 0)
	// Tile layout, bf16: element (r, c) of the first tile is at byte
	// 2*(face offset + (r%16)*16 + c%16); row 9 column 0 is 2*(9*16).
	for _, tc := range []struct {
		name   string
		byteAt int
		want   string
	}{
		{"row 9, past the value's 8 rows", 2 * 9 * 16, "matched"},
		{"row 1, the value's own", 2 * 1 * 16, "differs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fake.New()
			running, played := -1, false
			m, err := OpenChip("fake", g.Mesh, ChipOptions{Builder: fakeBuilder{fwDir: fw}, Fake: blackhole.Options{Fake: f},
				BeforeLaunch: func(r ProgramResult) { running, played = r.Index, false }})
			require.NoError(t, err)
			defer m.Close()
			e, err := Load(m, build)
			require.NoError(t, err)
			f.Program = func(fc *fake.Chip, ln *fake.Launch) error {
				if played {
					return nil
				}
				played = true
				for _, kb := range build.Programs[running].Kernel.Buffers {
					db, ok := m.devices[0].Buffer(e.binding[kb.Name])
					require.True(t, ok, kb.Name)
					page, err := m.devices[0].ReadPages(db.Name, 0, db.Pages)
					require.NoError(t, err)
					if running == prog && kb.Name == spec.Name {
						page = append([]byte(nil), page...)
						page[tc.byteAt] ^= 0x40
					}
					if err := m.chip.WritePages(placement(db), page); err != nil {
						return err
					}
				}
				return nil
			}
			require.NoError(t, e.Upload(x, make([]float32, 11*64)))
			require.NoError(t, e.Run())
			for _, r := range m.ChipResults() {
				want := "matched"
				if r.Index == prog {
					want = tc.want
				}
				if r.Status != want {
					t.Errorf("program %d %s: %s (%s), want %s", r.Index, r.Program, r.Status, r.Detail, want)
				}
			}
			require.Len(t, m.ChipResults(), len(build.Programs))
		})
	}
}

// TestRemoveStale removes the temporary directories of processes that no
// longer run, and only those.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	names := []string{
		"tcc-build-1000001-a", "tcc-persist-1000001-b", // a dead process's
		"tcc-build-1000002-c",                      // a live process's
		fmt.Sprintf("tcc-build-%d-d", os.Getpid()), // this process's
		"tcc-build-123456789", "tcc-build-x-e",     // no process id
		"other-1000001-f",
	}
	for _, n := range names {
		require.NoError(t, os.Mkdir(filepath.Join(dir, n), 0o755))
	}
	removed := removeStale(dir, func(pid int) bool { return pid == 1000002 })
	for i := range removed {
		removed[i] = filepath.Base(removed[i])
	}
	if d := cmp.Diff([]string{"tcc-build-1000001-a", "tcc-persist-1000001-b"}, removed); d != "" {
		t.Errorf("removed (-want +got):\n%s", d)
	}
	left, _ := os.ReadDir(dir)
	require.Len(t, left, len(names)-2)
}

// addScalarBuild returns a one-program build (x + 0.5 on a bf16 [32, 64])
// for Blackhole, its graph, and a directory holding a fake firmware set
// (fakeBuilder's fwDir).
func addScalarBuild(t *testing.T) (*ir.Graph, *codegen.Build, string) {
	t.Helper()
	fw := t.TempDir()
	require.NoError(t, fwtest.WriteSet(fw))
	b := ir.NewBuilder("one")
	x := b.Input("x", ir.T(ir.BF16, 32, 64))
	b.Output(b.AddScalar(x, 0.5))
	g, err := b.Finish()
	require.NoError(t, err)
	build, err := codegen.Compile(g, target.Blackhole())
	require.NoError(t, err)
	return g, build, fw
}

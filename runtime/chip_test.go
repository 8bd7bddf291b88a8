package runtime

import (
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/kir/kirtest"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/runtime/blackhole"
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
// computed (matched) or that with one byte changed (differs).
func TestChipShadowCheck(t *testing.T) {
	dir := t.TempDir()
	if err := fwtest.WriteSet(dir); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, skip, corrupt, status, detail string
	}{
		{name: "matched", status: "matched", detail: "bit-exact"},
		{name: "differs", corrupt: "out", status: "differs", detail: "buffer out: 1 of 4096 bf16 values differ (at most 1 ulp); first: tile 0 (0,0)"},
		{name: "skipped", skip: "compute", status: "skipped", detail: "needs the SFPU"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fake.New()
			m, err := OpenChip("fake", ir.Mesh{Rows: 1, Cols: 1}, ChipOptions{Builder: fakeBuilder{fwDir: dir, skip: c.skip}, Fake: blackhole.Options{Fake: f}})
			if err != nil {
				t.Fatal(err)
			}
			b := eltwiseBuild(t)
			for _, buf := range b.Programs[0].Kernel.Buffers {
				if err := m.Alloc(Tensor{Buffer: buf, Shape: ir.Shape{buf.Pages * 32, 32}}); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := hostcfg.ConfigValidated(b.Programs[0].Kernel, target.Blackhole())
			if err != nil {
				t.Fatal(err)
			}
			e := &Executable{Mesh: m, Build: b, binding: map[string]string{}, dir: t.TempDir(), configs: map[int]*hostcfg.ProgramConfig{0: cfg}}
			in := make([]float32, 4*32*32)
			for i := range in {
				in[i] = float32(i%7) - 3
			}
			for _, n := range []string{"a", "b"} {
				if err := m.Upload(0, n, in); err != nil {
					t.Fatal(err)
				}
			}
			// Play the kernels: copy the simulator's output into the fake's DRAM.
			f.Program = func(fc *fake.Chip, ln *fake.Launch) error {
				if ln.Core != (fake.XY{X: 1, Y: 2}) {
					return nil
				}
				db, _ := m.devices[0].Buffer("out")
				page, _ := m.devices[0].ReadPages("out", 0, db.Pages)
				if c.corrupt != "" {
					page = append([]byte(nil), page...)
					page[0] ^= 1
				}
				return m.chip.WritePages(placement(db), page)
			}
			if err := e.RunProgram(0); err != nil {
				t.Fatal(err)
			}
			rs := m.ChipResults()
			if len(rs) != 1 || rs[0].Status != c.status || !strings.Contains(rs[0].Detail, c.detail) {
				t.Fatalf("results %+v, want one %q result saying %q", rs, c.status, c.detail)
			}
			if len(f.Errors) > 0 {
				t.Errorf("fake chip: %v", f.Errors)
			}
		})
	}
}

func TestOpenChipErrors(t *testing.T) {
	if _, err := OpenChip("ttsim", ir.Mesh{Rows: 1, Cols: 2}, ChipOptions{Builder: fakeBuilder{}}); err == nil || !strings.Contains(err.Error(), "drives one chip") {
		t.Errorf("two-device mesh: %v", err)
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

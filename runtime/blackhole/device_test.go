package blackhole

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/fake"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware/fwtest"
)

// namedImages builds, for each kernel, one image per processor of its
// Processor, of size[name] bytes (default 64) counting up from seed[name].
type namedImages struct {
	dir  string
	seed map[string]byte
	size map[string]int
}

func (b namedImages) Firmware() (firmware.Set, error) { return firmware.ReadSet(b.dir) }

func (b namedImages) Kernel(_ string, _ *hostcfg.ProgramConfig, k *hostcfg.KernelConfig) (map[int][]byte, error) {
	n := b.size[k.Name]
	if n == 0 {
		n = 64
	}
	img := make([]byte, n)
	for i := range img {
		img[i] = b.seed[k.Name] + byte(i)
	}
	switch k.Processor {
	case "RISCV_0":
		return map[int][]byte{0: img}, nil
	case "RISCV_1":
		return map[int][]byte{1: img}, nil
	}
	return map[int][]byte{2: img, 3: img, 4: img}, nil
}

// dmKernel is a data-movement kernel on the cores rs with one runtime arg
// per core (arg[core] = its value).
func dmKernel(name, proc string, arg map[kir.Core]uint32, rs ...hostcfg.CoreRange) hostcfg.KernelConfig {
	k := hostcfg.KernelConfig{Name: name, Processor: proc, Cores: rs}
	for _, c := range coresOf(rs) {
		k.RuntimeArgs = append(k.RuntimeArgs, hostcfg.CoreArgs{Core: hostcfg.Core(c), Values: []hostcfg.ArgValue{{ArgValue: kir.U32(arg[c])}}})
	}
	return k
}

// TestRunProgramKernelsPerCore runs a program whose two NCRISC kernels
// (as gdn_conv_gates has) run on disjoint cores, next to one BRISC kernel
// on both: each core must get its own NCRISC kernel's image and args.
// Two NCRISC kernels on one core are an error naming program, core and
// processor.
func TestRunProgramKernelsPerCore(t *testing.T) {
	c0, c1 := kir.Core{X: 0, Y: 0}, kir.Core{X: 1, Y: 0}
	r0, r1 := hostcfg.CoreRange{X0: 0, Y0: 0, X1: 0, Y1: 0}, hostcfg.CoreRange{X0: 1, Y0: 0, X1: 1, Y1: 0}
	both := hostcfg.CoreRange{X0: 0, Y0: 0, X1: 1, Y1: 0}
	args := map[kir.Core]uint32{c0: 0xA0, c1: 0xB0}
	seeds := map[string]byte{"writer": 0x10, "reader_a": 0x40, "reader_b": 0x80}

	t.Run("disjoint cores", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, fwtest.WriteSet(dir))
		f := fake.New()
		// reader_b's image is the larger: the NCRISC slot must hold it whole.
		d, err := Open(Options{Backend: "fake", Fake: f}, namedImages{dir: dir, seed: seeds, size: map[string]int{"reader_b": 160}})
		require.NoError(t, err)
		p := &hostcfg.ProgramConfig{Program: "gates", Kernels: []hostcfg.KernelConfig{
			dmKernel("writer", "RISCV_0", args, both),
			dmKernel("reader_a", "RISCV_1", args, r0),
			dmKernel("reader_b", "RISCV_1", map[kir.Core]uint32{c1: 0xC0}, r1),
		}}
		require.NoError(t, d.RunProgram("", p, Reference{}))
		require.Empty(t, f.Errors, "fake chip protocol errors")
		require.Len(t, f.Launches, 2)

		type core struct {
			Enables       uint32
			BRISC, NCRISC byte   // first image byte
			NCRISCLast    uint32 // last image word of NCRISC
			NCRISCArg     uint32
		}
		want := map[kir.Core]core{
			c0: {Enables: 0b11, BRISC: 0x10, NCRISC: 0x40, NCRISCLast: 0x7f7e7d7c, NCRISCArg: 0xA0},
			c1: {Enables: 0b11, BRISC: 0x10, NCRISC: 0x80, NCRISCLast: 0x1f1e1d1c, NCRISCArg: 0xC0},
		}
		// The last word of reader_a's 64-B image on c0, of reader_b's 160-B one on c1.
		lastWord := map[kir.Core]uint32{c0: 60, c1: 156}
		got := map[kir.Core]core{}
		for _, ln := range f.Launches {
			var lc kir.Core
			for _, c := range []kir.Core{c0, c1} {
				at, err := d.Chip.Worker(c)
				require.NoError(t, err)
				if at.X == ln.Core.X && at.Y == ln.Core.Y {
					lc = c
				}
			}
			require.Len(t, ln.Texts[0], 16)
			require.Len(t, ln.Texts[1], 16)
			got[lc] = core{
				Enables:    ln.Enables,
				BRISC:      ln.Texts[0][0],
				NCRISC:     ln.Texts[1][0],
				NCRISCLast: f.Words(ln.Core, ln.ConfigBase+ln.TextOffset[1]+lastWord[lc], 1)[0],
				NCRISCArg:  f.Words(ln.Core, ln.ConfigBase+ln.RTA[1], 1)[0],
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("per-core launches (-want +got):\n%s", diff)
		}
	})

	t.Run("two kernels of one processor on one core", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, fwtest.WriteSet(dir))
		d, err := Open(Options{Backend: "fake", Fake: fake.New()}, namedImages{dir: dir, seed: seeds})
		require.NoError(t, err)
		p := &hostcfg.ProgramConfig{Program: "gates", Kernels: []hostcfg.KernelConfig{
			dmKernel("reader_a", "RISCV_1", args, both),
			dmKernel("reader_b", "RISCV_1", args, r1),
		}}
		err = d.RunProgram("", p, Reference{})
		require.Error(t, err)
		for _, s := range []string{"program gates", "core (1,0)", "two kernels on ncrisc", "reader_a, reader_b"} {
			require.Contains(t, err.Error(), s)
		}
	})
}

package launch_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/runtime/blackhole/launch"
)

// persistentCore is one core running BRISC and NCRISC images of imgBytes
// and phases phases, each with rta runtime args per processor and a CB at
// index cb (4 pages of 2 KB).
func persistentCore(imgBytes, phases, rta, cb int) launch.PersistentCore {
	pc := launch.PersistentCore{Core: kir.Core{X: 1, Y: 2}}
	pc.Images[launch.BRISC] = make([]byte, imgBytes)
	pc.Images[launch.NCRISC] = make([]byte, imgBytes)
	for p := 0; p < phases; p++ {
		pt := launch.PhaseTables{Phase: p, CBs: []launch.CB{{Index: cb, PageSize: 2048, Pages: 4, Addr: 0x40000}}}
		for _, proc := range []int{launch.BRISC, launch.NCRISC} {
			pt.RTA[proc] = make([]uint32, rta)
			pt.CRTA[proc] = []uint32{uint32(p), 7}
		}
		pc.Phases = append(pc.Phases, pt)
	}
	return pc
}

// TestPersistentPlan: the layout of a core's kernel config ring (images,
// phase index, per-phase tables) and the error naming core, phase and
// bytes when a phase's tables do not fit.
func TestPersistentPlan(t *testing.T) {
	l := target.BlackholeLayout()
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "prog" + string(rune('a'+i%26))
		}
		return out
	}
	t.Run("fits", func(t *testing.T) {
		p := &launch.Persistent{Name: "step", Phases: names(3), Cores: []launch.PersistentCore{persistentCore(100, 3, 2, 1)}}
		p.Cores[0].Phases = append(p.Cores[0].Phases[:1], p.Cores[0].Phases[2]) // takes part in phases 0 and 2
		lays, err := launch.PersistentPlan(p, l)
		require.NoError(t, err)
		lay := lays[p.Cores[0].Core]
		// images at 0 and 112 of the ring; index (3 words) at 224; phase
		// 0's record at 240: BRISC RTA 240, CRTA 256, NCRISC RTA 272, CRTA
		// 288, the TRISCs' (shared, empty) at 304, CB table (2 entries) at
		// 304; phase 2's at 336.
		at := func(off uint32) uint32 { return l.KernelConfig.Base + off }
		want := &launch.CoreLayout{TextAddr: [5]uint32{at(0), at(112)}, Index: at(224),
			Records: map[int]*launch.PhaseRecord{
				0: {Addr: at(240), RTA: [5]uint32{at(240), at(272), at(304), at(304), at(304)}, CRTA: [5]uint32{at(256), at(288), at(304), at(304), at(304)}, CB: at(304), CBCount: 2, CBMask: 2},
				2: {Addr: at(336), RTA: [5]uint32{at(336), at(368), at(400), at(400), at(400)}, CRTA: [5]uint32{at(352), at(384), at(400), at(400), at(400)}, CB: at(400), CBCount: 2, CBMask: 2},
			}, RingSize: 432}
		if d := cmp.Diff(want, lay); d != "" {
			t.Fatalf("layout (-want +got):\n%s", d)
		}
		blob, tables, msg, err := launch.PersistentBlob(&p.Cores[0], lay, 3, l)
		require.NoError(t, err)
		require.Nil(t, tables)
		word := func(b []byte, off uint32) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
		if got := []uint32{word(blob, 224), word(blob, 228), word(blob, 232)}; !cmp.Equal(got, []uint32{at(240), launch.NoPhase, at(336)}) {
			t.Errorf("phase index %v, want [base+240 NoPhase base+336]", got)
		}
		if got := []uint32{word(blob, 352), word(blob, 356)}; !cmp.Equal(got, []uint32{2, 7}) {
			t.Errorf("phase 2's BRISC common args %v, want [2 7]", got)
		}
		if got := []uint32{word(blob, 400+16), word(blob, 400+20)}; !cmp.Equal(got, []uint32{0x40000, 8192}) {
			t.Errorf("phase 2's CB c_1 config %v, want [0x40000 8192]", got)
		}
		f := l.Launch
		if got := binary.LittleEndian.Uint64(msg[f.LocalCBMask:]); got != 0 {
			t.Errorf("launch message configures CBs %#x; each phase installs its own", got)
		}
		if got := binary.LittleEndian.Uint16(msg[f.RTAOffset:]); got != 240 {
			t.Errorf("launch message BRISC RTA offset %d, want phase 0's 240", got)
		}
	})
	t.Run("tables region", func(t *testing.T) {
		p := &launch.Persistent{Name: "step", Phases: names(200), Cores: []launch.PersistentCore{persistentCore(1024, 200, 64, 31)},
			Tables: 0x100000, TablesSize: 800 + 200*1056}
		lays, err := launch.PersistentPlan(p, l)
		require.NoError(t, err)
		lay := lays[p.Cores[0].Core]
		// 800 B of index, then 1056 B per phase from the region's start.
		if lay.RingSize != 2048 || lay.Index != 0x100000 || lay.Records[199].Addr != 0x100000+800+199*1056 || lay.TablesSize != 800+200*1056 {
			t.Errorf("layout: ring %d B, index %#x, phase 199 at %#x, tables %d B; want 2048, 0x100000, %#x, %d",
				lay.RingSize, lay.Index, lay.Records[199].Addr, lay.TablesSize, 0x100000+800+199*1056, 800+200*1056)
		}
		n, err := launch.PersistentTablesSize(p, l)
		require.NoError(t, err)
		if n != 800+200*1056 {
			t.Errorf("PersistentTablesSize = %d, want %d", n, 800+200*1056)
		}
		_, tables, msg, err := launch.PersistentBlob(&p.Cores[0], lay, 200, l)
		require.NoError(t, err)
		if len(tables) != int(lay.TablesSize) || binary.LittleEndian.Uint32(tables[4*199:]) != lay.Records[199].Addr {
			t.Errorf("tables blob of %d B, index[199] %#x", len(tables), binary.LittleEndian.Uint32(tables[4*199:]))
		}
		if got := binary.LittleEndian.Uint16(msg[l.Launch.RTAOffset:]); got != 0 {
			t.Errorf("launch message RTA offset %d with the tables outside the ring, want 0", got)
		}
		p.TablesSize -= 1056 // one phase short
		_, err = launch.PersistentPlan(p, l)
		want := `program "step", core (1,2): phase 199 (progr): its tables (1056 B: runtime args and a CB table of 32 entries) end at byte 212000 of the phase tables' 210944 B at 0x100000 [rule l1-budget]`
		if err == nil || err.Error() != want {
			t.Errorf("one phase short: %v, want %s", err, want)
		}
	})
	for _, tc := range []struct {
		name string
		pc   launch.PersistentCore
		n    int
		want string
	}{
		// 200 phases of 2x(64+2) argument words and a 32-entry CB table:
		// 1056 B each after 2048 B of images and an 800 B index; 64 fit.
		{"CB tables overflow", persistentCore(1024, 200, 64, 31), 200,
			`program "step", core (1,2): phase 64 (progm): its tables (1056 B: runtime args and a CB table of 32 entries) end at byte 71488 of the persistent launch's data; the kernel config ring (0x9de0..0x1b1e0, ` + target.TTMetalRelease + `) holds 70656 B (merged kernel images 2048 B) [rule l1-budget]`},
		{"images overflow", persistentCore(40000, 1, 1, 0), 1,
			`program "step", core (1,2): the merged kernel images (brisc 40000 B, ncrisc 40000 B) end at byte 80000 of the persistent launch's data; the kernel config ring (0x9de0..0x1b1e0, ` + target.TTMetalRelease + `) holds 70656 B (merged kernel images 80000 B) [rule l1-budget]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &launch.Persistent{Name: "step", Phases: names(tc.n), Cores: []launch.PersistentCore{tc.pc}}
			_, err := launch.PersistentPlan(p, l)
			var re *kir.RuleError
			if !errors.As(err, &re) || re.Rule != kir.RuleL1Budget {
				t.Fatalf("PersistentPlan: %v, want an L1-budget *kir.RuleError", err)
			}
			if d := cmp.Diff(tc.want, err.Error()); d != "" {
				t.Errorf("error (-want +got):\n%s", d)
			}
		})
	}
}

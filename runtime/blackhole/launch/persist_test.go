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

// persistentCore is one core running BRISC and compute images of imgBytes
// (compute: TRISC0..2) with a tables page of 64 bytes.
func persistentCore(imgBytes int) launch.PersistentCore {
	pc := launch.PersistentCore{Core: kir.Core{X: 1, Y: 2}, Page: make([]byte, 64)}
	for _, proc := range []int{launch.BRISC, launch.TRISC0, launch.TRISC1, launch.TRISC2} {
		pc.Images[proc] = make([]byte, imgBytes)
		pc.Images[proc][0] = byte(1 + proc)
	}
	return pc
}

// TestPersistentPlan: a core's images lie back to back in the images
// buffer, each rounded up to 16 bytes; the ring holds each argument
// slot's control block and tables addresses (the TRISCs share the compute
// slot), which the launch message's common argument offsets name; images
// that overflow the images buffer are an error naming core and bytes.
func TestPersistentPlan(t *testing.T) {
	l := target.BlackholeLayout()
	const text, tables, ctl = 0x100000, 0x120000, 0x130000
	p := &launch.Persistent{Name: "step", Ctl: ctl, Tables: tables, TablesSize: 64, Text: text, TextSize: 4 * 112,
		Cores: []launch.PersistentCore{persistentCore(100)}}
	lays, err := launch.PersistentPlan(p, l)
	require.NoError(t, err)
	lay := lays[p.Cores[0].Core]
	base := l.KernelConfig.Base
	want := &launch.CoreLayout{TextAddr: [5]uint32{text, 0, text + 112, text + 224, text + 336}, TextSize: 448,
		Ring: [5]uint32{base, 0, base + 32, base + 32, base + 32}, RingSize: 48}
	if d := cmp.Diff(want, lay); d != "" {
		t.Fatalf("layout (-want +got):\n%s", d)
	}
	ring, img, msg, err := launch.PersistentBlob(p, &p.Cores[0], lay, l)
	require.NoError(t, err)
	word := func(b []byte, off uint32) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
	if got := []uint32{word(ring, 0), word(ring, 4), word(ring, 16), word(ring, 32), word(ring, 36)}; !cmp.Equal(got, []uint32{ctl, tables, 0, ctl, tables}) {
		t.Errorf("ring words %#x, want BRISC's and compute's [ctl tables], NCRISC's slot empty", got)
	}
	if got := []byte{img[0], img[112], img[224], img[336]}; !cmp.Equal(got, []byte{1, 3, 4, 5}) {
		t.Errorf("images' first bytes %v, want [1 3 4 5]", got)
	}
	f := l.Launch
	for proc, wantOff := range map[int]uint16{launch.BRISC: 0, launch.TRISC0: 32, launch.TRISC2: 32} {
		if got := binary.LittleEndian.Uint16(msg[f.RTAOffset+4*proc+2:]); got != wantOff {
			t.Errorf("processor %d: common args at ring offset %d, want %d", proc, got, wantOff)
		}
	}
	if got := word(msg, uint32(f.KernelTextOffset+4*launch.TRISC1)); got != text+224-base {
		t.Errorf("TRISC1 text offset %#x, want %#x", got, text+224-base)
	}
	if got := binary.LittleEndian.Uint64(msg[f.LocalCBMask:]); got != 0 {
		t.Errorf("launch message configures CBs %#x; each phase installs its own", got)
	}
	if got := word(msg, uint32(f.Enables)); got != 0b11101 {
		t.Errorf("enables %#b, want BRISC and the TRISCs", got)
	}

	p.TextSize = 4*112 - 16
	_, err = launch.PersistentPlan(p, l)
	var re *kir.RuleError
	if !errors.As(err, &re) || re.Rule != kir.RuleL1Budget {
		t.Fatalf("PersistentPlan with too small an images buffer: %v, want an L1-budget *kir.RuleError", err)
	}
	wantErr := `program "step", core (1,2): the merged kernel images (brisc 100 B, trisc0 100 B, trisc1 100 B, trisc2 100 B) take 448 B, 16 B more than the 432 B page of persist.text at 0x100000 [rule l1-budget]`
	if d := cmp.Diff(wantErr, err.Error()); d != "" {
		t.Errorf("error (-want +got):\n%s", d)
	}
}

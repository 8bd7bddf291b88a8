package runtime

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/runtime/blackhole"
	"github.com/tcc-dev/tcc/runtime/blackhole/launch"
)

// printedPage is core c's page of the tables buffer as programs.json's
// persistent section describes it (hostcfg.PersistentConfig's doc, read
// here independently of kir.Tables): zeroed barrier words; per argument
// slot the offsets of the core's merged kernel's runtime and common
// argument vectors; from ArgHeader+ArgHeaderBytes, for each phase of the
// core in phase order whose record_of is itself, its record (the CB mask
// over merged indices, then address, total size, pages and page size per
// merged index); then per slot with a kernel on the core its runtime
// argument values on the core and its common runtime argument values,
// each vector starting at a multiple of Stride. res resolves the
// symbolic values (buffer addresses, NoC coordinates).
func printedPage(t *testing.T, pc *hostcfg.ProgramConfig, c kir.Core, res func(hostcfg.ArgValue) uint32) []uint32 {
	t.Helper()
	ps := pc.Persistent
	tb := ps.Tables
	page := make([]uint32, tb.Bytes/4)
	put := func(off int, v uint32) { page[off/4] = v }
	on := func(rs []hostcfg.CoreRange) bool {
		for _, r := range rs {
			if c.X >= r.X0 && c.X <= r.X1 && c.Y >= r.Y0 && c.Y <= r.Y1 {
				return true
			}
		}
		return false
	}
	off := tb.ArgHeader + tb.ArgHeaderBytes
	for _, ph := range ps.Phases {
		if !on(ph.Cores) || ph.RecordOf != ph.Index {
			continue
		}
		var mask uint64
		for _, cb := range ph.CBs {
			if !on(cb.Cores) {
				continue
			}
			mask |= 1 << cb.MergedIndex
			at := off + 8 + 16*cb.MergedIndex
			put(at, res(cb.Address))
			put(at+4, uint32(cb.TotalSize))
			put(at+8, uint32(cb.NumPages))
			put(at+12, uint32(cb.PageSize))
		}
		put(off, uint32(mask))
		put(off+4, uint32(mask>>32))
		off += ph.RecordBytes
	}
	align := func(n int) int { return (n + tb.Stride - 1) / tb.Stride * tb.Stride }
	for slot, proc := range []string{"RISCV_0", "RISCV_1", "compute"} {
		var k *hostcfg.KernelConfig
		for i := range pc.Kernels {
			if pc.Kernels[i].Processor == proc && on(pc.Kernels[i].Cores) {
				k = &pc.Kernels[i]
			}
		}
		if k == nil {
			continue
		}
		off = align(off)
		put(tb.ArgHeader+8*slot, uint32(off))
		for _, ca := range k.RuntimeArgs {
			if ca.Core.X == c.X && ca.Core.Y == c.Y {
				for i, v := range ca.Values {
					put(off+4*i, res(v))
				}
			}
		}
		off = align(off + 4*len(k.RuntimeArgNames))
		put(tb.ArgHeader+8*slot+4, uint32(off))
		for _, a := range k.CommonRuntimeArgs {
			put(off+4*a.Index, res(a.Value))
		}
		off += 4 * len(k.CommonRuntimeArgs)
	}
	return page
}

func words(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

// chipResolver resolves values as the chip sees them: the reference's
// buffer addresses, the chip's NoC coordinates.
type chipResolver struct {
	ref  blackhole.Reference
	chip *blackhole.Device
}

func (r chipResolver) BufferAddress(name string) (uint32, error) {
	b, _, err := r.ref.Buffer(name)
	return b.Addr, err
}

func (r chipResolver) WorkerNoC(c kir.Core) (int, int, error) {
	at, err := r.chip.Chip.Worker(c)
	return at.X, at.Y, err
}

// TestPersistentTablesAsPrinted: after the one launch of tiny-mlp's
// multi-step persistent program on the fake chip, every core holds, at
// the printed program's addresses, exactly what the printed kernels read:
// its page of persist.tables equal, word for word, to the page
// programs.json's persistent section describes (printedPage), its merged
// kernels' images back to back in persist.text, and in the kernel config
// ring each argument slot's control block and tables addresses, which
// tcc_persist_init starts from.
func TestPersistentTablesAsPrinted(t *testing.T) {
	r := newFakeRun(t, tinyLoop, 2, 5*time.Second)
	e := r.chip.e
	p := e.persistent
	require.NotNil(t, p.Buffer(kir.TablesBuffer), "the chip's program has no %s (persist.WithTables)", kir.TablesBuffer)
	pc, err := hostcfg.ConfigValidated(p, target.Blackhole())
	require.NoError(t, err)
	pc.Persistent, err = hostcfg.Persistent(p, target.Blackhole())
	require.NoError(t, err)
	ref := blackhole.Reference{Mem: simMemory{e.Mesh.devices[0]}, Binding: e.binding}
	names := make([]string, len(p.Buffers))
	for i, b := range p.Buffers {
		names[i] = b.Name
	}
	dev := e.Mesh.chip
	require.NoError(t, dev.UploadBuffers(names, ref))
	_, err = dev.LaunchPersistent(p, ref)
	require.NoError(t, err)
	require.Empty(t, r.f.Errors)

	res := func(v hostcfg.ArgValue) uint32 {
		x, err := v.Resolve(chipResolver{ref: ref, chip: dev})
		require.NoError(t, err)
		return x
	}
	addr := func(name string) uint32 {
		b, _, err := ref.Buffer(name)
		require.NoError(t, err)
		return b.Addr
	}
	tables, text, ctl := addr(kir.TablesBuffer), addr(kir.TextBuffer), addr(p.Persist.Ctl)
	l := target.BlackholeLayout()
	cores := 0
	for _, c := range p.Cores() {
		if c.IsEth() {
			continue
		}
		cores++
		at, err := dev.Chip.Worker(c)
		require.NoError(t, err)
		l1 := r.f.L1(at.X, at.Y)
		want := printedPage(t, pc, c, res)
		got := words(l1[tables : tables+uint32(4*len(want))])
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("core %s: persist.tables page (-printed +chip):\n%s", c, d)
		}
		// The images, back to back from persist.text's start in
		// processor order, each rounded up to 16 bytes.
		var imgs [5][]byte
		for _, k := range p.Kernels {
			if kir.InRanges(k.Cores, c) {
				m, err := persistBuilder{}.PersistentKernel(p, k)
				require.NoError(t, err)
				for proc, img := range m {
					imgs[proc] = img
				}
			}
		}
		off := text
		for proc, img := range imgs {
			if img == nil {
				continue
			}
			if got := l1[off : off+uint32(len(img))]; !bytes.Equal(got, img) {
				t.Errorf("core %s: %s image at %#x: % x..., want % x...", c, target.ProcessorNames[proc], off, got[:8], img[:8])
			}
			off += (uint32(len(img)) + 15) &^ 15
		}
		for _, proc := range []int{launch.BRISC, launch.NCRISC, launch.TRISC0} {
			slot := kir.TableArgSlot([]kir.Processor{kir.RISCV0, kir.RISCV1, kir.ComputeProc}[min(proc, 2)])
			ring := words(l1[l.KernelConfig.Base+uint32(16*slot) : l.KernelConfig.Base+uint32(16*slot)+8])
			if d := cmp.Diff([]uint32{ctl, tables}, ring); d != "" {
				t.Errorf("core %s slot %d: ring arguments (-want +got):\n%s", c, slot, d)
			}
		}
	}
	if cores == 0 {
		t.Fatal("no worker core checked")
	}
}

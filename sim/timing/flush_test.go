package timing

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// TestWritesFlushedWaitsForDeparture: noc_async_writes_flushed waits
// until the writes have left the core (tt-metal's
// ncrisc_noc_nonposted_writes_sent), noc_async_write_barrier until they
// are acknowledged. A 16 KiB write (unicast, or multicast to a 3 x 3
// rectangle) then the call: the flush ends once the 16 KiB have crossed
// the core's NoC port, before the barrier by about the write's flight
// (the measured L1 write latency of 16 KiB, 629 cycles, less the port
// time).
func TestWritesFlushedWaitsForDeparture(t *testing.T) {
	tg := target.Blackhole()
	prm := Default()
	const size = 16384
	finish := func(t *testing.T, multicast, flush bool) float64 {
		p := kir.NewProgram("flush")
		src := kir.Core{X: 0, Y: 0}
		var rs []ir.CoreRange
		for y := range 3 {
			for x := range 3 {
				rs = append(rs, kir.Core{X: 4 + x, Y: 4 + y}.Range())
			}
		}
		all := append([]ir.CoreRange{src.Range()}, rs...)
		p.AddCB(kir.CB{Index: 0, PageSize: size, Pages: 1, Format: ir.BF16, Cores: all, Name: "data"})
		k := p.AddKernel(&kir.Kernel{Name: "sender", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: []ir.CoreRange{src.Range()}})
		b := k.Builder()
		l1 := b.Let("l1", kir.GetWritePtr{CB: 0})
		x0, y0, _ := tg.WorkerNoC(4, 4)
		x1, y1, _ := tg.WorkerNoC(6, 6)
		if multicast {
			b.NoCAsyncWriteMulticast(l1, kir.MulticastAddr{X0: kir.Ci(x0), Y0: kir.Ci(y0), X1: kir.Ci(x1), Y1: kir.Ci(y1), Addr: l1}, kir.Ci(size), kir.C(9))
		} else {
			b.NoCAsyncWrite(l1, kir.NoCAddr{X: kir.Ci(x1), Y: kir.Ci(y1), Addr: l1}, kir.Ci(size))
		}
		if flush {
			b.NoCAsyncWritesFlushed()
		} else {
			b.NoCAsyncWriteBarrier()
		}
		return senderFinishUS(t, p, tg, prm)
	}
	port := prm.cyclesToUS(size / prm.NoCLinkBytesPerCycle)
	flight := prm.cyclesToUS(prm.L1WriteLatency[len(prm.L1WriteLatency)-1]) - port
	for _, tc := range []struct {
		name      string
		multicast bool
	}{{"unicast", false}, {"multicast", true}} {
		t.Run(tc.name, func(t *testing.T) {
			flushed, barrier := finish(t, tc.multicast, true), finish(t, tc.multicast, false)
			if flushed < port {
				t.Errorf("flushed at %.3f us, before the 16 KiB crossed the port (%.3f us)", flushed, port)
			}
			if barrier-flushed < 0.5*flight {
				t.Errorf("flushed at %.3f us, barrier at %.3f us: want the flush earlier by about the flight (%.3f us)", flushed, barrier, flight)
			}
		})
	}
}

// TestLoopbackMulticastSendsOnce: a multicast to a rectangle holding the
// sender (noc_async_write_multicast_loopback_src) crosses the sender's
// NoC port once, landing on the sender too; reaching the same 3 x 3
// cores without loopback takes two multicasts (the rest of the sender's
// row, the rows below), which cross the port twice. So the loopback
// write's flush ends after one port time, the two writes' after two.
func TestLoopbackMulticastSendsOnce(t *testing.T) {
	tg := target.Blackhole()
	prm := Default()
	const size = 16384
	finish := func(t *testing.T, loopback bool) float64 {
		p := kir.NewProgram("loopback")
		var rs []ir.CoreRange
		for y := range 3 {
			for x := range 3 {
				rs = append(rs, kir.Core{X: x, Y: y}.Range())
			}
		}
		p.AddCB(kir.CB{Index: 0, PageSize: size, Pages: 1, Format: ir.BF16, Cores: rs, Name: "data"})
		k := p.AddKernel(&kir.Kernel{Name: "sender", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: []ir.CoreRange{kir.Core{}.Range()}})
		b := k.Builder()
		l1 := b.Let("l1", kir.GetWritePtr{CB: 0})
		mc := func(x0, y0, x1, y1 int) kir.MulticastAddr {
			a, b, _ := tg.WorkerNoC(x0, y0)
			c, d, _ := tg.WorkerNoC(x1, y1)
			return kir.MulticastAddr{X0: kir.Ci(a), Y0: kir.Ci(b), X1: kir.Ci(c), Y1: kir.Ci(d), Addr: l1}
		}
		if loopback {
			b.NoCAsyncWriteMulticastLoopbackSrc(l1, mc(0, 0, 2, 2), kir.Ci(size), kir.C(9))
		} else {
			b.NoCAsyncWriteMulticast(l1, mc(1, 0, 2, 0), kir.Ci(size), kir.C(2))
			b.NoCAsyncWriteMulticast(l1, mc(0, 1, 2, 2), kir.Ci(size), kir.C(6))
		}
		b.NoCAsyncWritesFlushed()
		return senderFinishUS(t, p, tg, prm)
	}
	port := prm.cyclesToUS(size / prm.NoCLinkBytesPerCycle)
	one, two := finish(t, true), finish(t, false)
	if one < port || one > 1.5*port {
		t.Errorf("loopback multicast flushed at %.3f us, want about one port time (%.3f us)", one, port)
	}
	if two < 2*port {
		t.Errorf("two multicasts flushed at %.3f us, want at least two port times (%.3f us)", two, 2*port)
	}
}

// senderFinishUS simulates p and returns when its "sender" thread ends.
func senderFinishUS(t *testing.T, p *kir.Program, tg *target.Target, prm *Params) float64 {
	t.Helper()
	pt, err := Simulate(p, tg, prm, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range pt.Devices[0].Kernels {
		if r.Kernel == "sender" {
			return r.FinishUS
		}
	}
	t.Fatal("no sender thread")
	return 0
}

package timing

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// ethRow is one ethernet row of reference/measured.md: the one-direction
// rate of back-to-back transmit commands of PacketBytes each (tt-metal's
// Blackhole erisc bandwidth test; the fabric's 4 KB packet rate,
// ~4.2 M packets/s).
type ethRow struct {
	name        string
	packetBytes int
	gbps        float64
}

var ethRows = []ethRow{
	{"erisc 16 B", 16, 0.28},
	{"erisc 256 B", 256, 4.39},
	{"erisc 1 KB", 1024, 11.74},
	{"fabric 4 KB", 4096, 4.2e6 * 4096 / 1e9},
}

// measuredEthRoundTripUS is the erisc latency test's round trip of 16 B.
const measuredEthRoundTripUS = 0.894

// ethTolerance bounds every ethernet row's relative error.
const ethTolerance = 0.10

// ethStream is a two-card program: the ethernet core of ring link 0 on
// each card sends n commands of size bytes (n eth_send_bytes of one
// command each), then eth_wait_for_receiver_done; the peer waits for all
// the bytes and answers with eth_receiver_done. The commands resend one
// buffer, so the total may exceed an ethernet L1 (kir.Validate refuses the
// receiver's wait for more bytes than fit, which the timing model ignores).
func ethStream(t *target.Target, size, n int) *kir.Program {
	p := kir.NewProgram(fmt.Sprintf("eth_stream_%d", size))
	east, west := kir.EthCore(t.Eth.RingEast[0]), kir.EthCore(t.Eth.RingWest[0])
	base := kir.Ci(t.Eth.L1UnreservedBase)
	s := p.AddKernel(&kir.Kernel{Name: "sender", Role: kir.RoleReader, Processor: kir.RISCV0, Cores: []ir.CoreRange{east.Range()}})
	b := s.Builder()
	b.For("i", kir.C(0), kir.Ci(n), func(kir.Var) { b.EthSendBytes(base, base, kir.Ci(size)) })
	b.EthWaitForReceiverDone()
	r := p.AddKernel(&kir.Kernel{Name: "receiver", Role: kir.RoleWriter, Processor: kir.RISCV0, Cores: []ir.CoreRange{west.Range()}})
	b = r.Builder()
	b.EthWaitForBytes(kir.Ci(size * n))
	b.EthReceiverDone()
	return p
}

// ethSenderUS simulates p on two cards and returns the sender's kernel time.
func ethSenderUS(tb testing.TB, p *kir.Program, prm *Params) float64 {
	tb.Helper()
	tg := target.Blackhole()
	pt, err := Simulate(p, tg, prm, Options{Devices: 2})
	require.NoError(tb, err)
	for _, k := range pt.Devices[0].Kernels {
		if k.Kernel == "sender" {
			return k.FinishUS
		}
	}
	tb.Fatalf("%s: no sender thread", p.Name)
	return 0
}

// ethRates predicts every ethernet row's rate in GB/s with prm, from
// streams long enough (~0.4 ms) that the closing handshake is noise.
func ethRates(tb testing.TB, prm *Params) []float64 {
	tg := target.Blackhole()
	var out []float64
	for _, r := range ethRows {
		n := max(1, int(400e3*r.gbps)/r.packetBytes)
		us := ethSenderUS(tb, ethStream(tg, r.packetBytes, n), prm)
		out = append(out, float64(n*r.packetBytes)/us/1e3)
	}
	return out
}

func ethError(tb testing.TB, prm *Params) float64 {
	e := 0.0
	for i, got := range ethRates(tb, prm) {
		d := math.Log(got / ethRows[i].gbps)
		e += d * d
	}
	return e
}

// TestEthFit: the ethernet rates the timing model derives from the kernels
// (commands and bytes) reproduce the measured rows within ethTolerance,
// and so does a 16-byte round trip.
func TestEthFit(t *testing.T) {
	prm := Default()
	for i, got := range ethRates(t, prm) {
		r := ethRows[i]
		t.Run(r.name, func(t *testing.T) {
			t.Logf("predicted %.2f GB/s, measured %.2f GB/s (%+.1f%%)", got, r.gbps, 100*(got/r.gbps-1))
			if relErr(got, r.gbps) > ethTolerance {
				t.Errorf("predicted %.2f GB/s, measured %.2f GB/s: off by more than %.0f%%", got, r.gbps, 100*ethTolerance)
			}
		})
	}
	t.Run("round trip 16 B", func(t *testing.T) {
		got := ethSenderUS(t, ethStream(target.Blackhole(), 16, 1), prm)
		t.Logf("predicted %.3f us, measured %.3f us (%+.1f%%)", got, measuredEthRoundTripUS, 100*(got/measuredEthRoundTripUS-1))
		if relErr(got, measuredEthRoundTripUS) > ethTolerance {
			t.Errorf("predicted %.3f us, measured %.3f us: off by more than %.0f%%", got, measuredEthRoundTripUS, 100*ethTolerance)
		}
	})
}

// TestEthFitIsOptimal: moving either fitted ethernet parameter by 5% does
// not fit the bandwidth rows better.
func TestEthFitIsOptimal(t *testing.T) {
	base := ethError(t, Default())
	params := map[string]func(*Params) *float64{
		"eth_command": func(p *Params) *float64 { return &p.EthCommandCycles },
		"eth_link":    func(p *Params) *float64 { return &p.EthBytesPerCycle },
	}
	for name, field := range params {
		for _, f := range []float64{0.95, 1.05} {
			prm := Default()
			*field(prm) *= f
			if e := ethError(t, prm); e < base*0.98 {
				t.Errorf("%s x %.2f fits the ethernet rows better (error %.5f < %.5f)", name, f, e, base)
			}
		}
	}
}

// TestEthSendCostsPerCommand: the same bytes cost more in more commands
// (the release's default of 16 bytes per command), as the model derives
// from the statement's per-command size, not from any op name.
func TestEthSendCostsPerCommand(t *testing.T) {
	tg := target.Blackhole()
	const size = 8192
	whole := ethStream(tg, size, 1)
	perWord := ethStream(tg, size, 1)
	body := perWord.Kernel("sender").Body
	for i, s := range body {
		if f, ok := s.(kir.For); ok {
			f.Body = []kir.Stmt{kir.EthSendBytes{Src: kir.C(0x20000), Dst: kir.C(0x20000), Size: kir.Ci(size), PerSend: kir.C(16), PerSendWords: kir.C(1)}}
			body[i] = f
		}
	}
	tw, err := Simulate(whole, tg, Default(), Options{Devices: 2})
	require.NoError(t, err)
	tp, err := Simulate(perWord, tg, Default(), Options{Devices: 2})
	require.NoError(t, err)
	p := Default()
	wantExtra := p.cyclesToUS(float64(size/16-1) * fittedEthCommandCycles)
	extra := tp.US() - tw.US()
	t.Logf("%d B in one command: %.2f us; in %d commands of 16 B: %.2f us", size, tw.US(), size/16, tp.US())
	if relErr(extra, wantExtra) > 0.05 {
		t.Errorf("%d commands of 16 B cost %.2f us more than one command, want %.2f us (%d extra commands)", size/16, extra, wantExtra, size/16-1)
	}
}

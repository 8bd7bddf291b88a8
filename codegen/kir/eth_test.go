package kir_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// ethProgram is a sender on ethernet channel 0 and a receiver on channel 1
// that hands the bytes to worker (0,0) through a semaphore.
func ethProgram() *kir.Program {
	p := kir.NewProgram("eth")
	send, recv, w := kir.EthCore(0), kir.EthCore(1), kir.Core{}
	p.AddSemaphore(kir.Semaphore{ID: 0, Cores: []ir.CoreRange{recv.Range()}})
	p.AddSemaphore(kir.Semaphore{ID: 0, Cores: []ir.CoreRange{w.Range()}})
	es := p.AddKernel(&kir.Kernel{Name: "sender", Role: kir.RoleReader, Processor: kir.RISCV0, Cores: []ir.CoreRange{send.Range()}})
	dev := es.CommonArg("device_id", kir.DeviceID())
	b := es.Builder()
	b.EthSendBytes(kir.Add(kir.C(0x20000), kir.Mul(dev, kir.C(16))), kir.C(0x20000), kir.C(64))
	b.EthWaitForReceiverDone()
	er := p.AddKernel(&kir.Kernel{Name: "receiver", Role: kir.RoleWriter, Processor: kir.RISCV1, NoC: 1, Cores: []ir.CoreRange{recv.Range()}})
	wx, wy := er.CommonArg("wx", kir.NoCX(w)), er.CommonArg("wy", kir.NoCY(w))
	b = er.Builder()
	b.EthWaitForBytes(kir.C(64))
	b.NoCSemaphoreInc(kir.NoCAddr{X: wx, Y: wy, Addr: kir.GetSemaphore{ID: kir.C(0)}}, kir.C(1))
	b.EthReceiverDone()
	wr := p.AddKernel(&kir.Kernel{Name: "worker", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: []ir.CoreRange{w.Range()}})
	ex, ey := wr.CommonArg("ex", kir.NoCX(recv)), wr.CommonArg("ey", kir.NoCY(recv))
	b = wr.Builder()
	b.NoCSemaphoreWait(kir.GetSemaphore{ID: kir.C(0)}, kir.C(1))
	b.NoCSemaphoreInc(kir.NoCAddr{X: ex, Y: ey, Addr: kir.GetEthSemaphore{ID: kir.C(0)}}, kir.C(1))
	return p
}

func TestEthernetValidation(t *testing.T) {
	if err := kir.Validate(ethProgram(), bh); err != nil {
		t.Fatalf("valid ethernet program rejected: %v", err)
	}
	tests := []struct {
		name  string
		edit  func(p *kir.Program)
		rules []kir.Rule
		msg   string
	}{
		{"CB on an ethernet core", func(p *kir.Program) {
			p.AddCB(kir.CB{Index: 0, PageSize: 2048, Pages: 1, Format: ir.BF16, Cores: []ir.CoreRange{kir.EthRange(0, 0)}})
		}, []kir.Rule{kir.RuleGrid}, "have no circular buffers"},
		{"ethernet call on a worker", func(p *kir.Program) {
			p.Kernel("worker").Body = append(p.Kernel("worker").Body, kir.EthReceiverDone{})
		}, []kir.Rule{kir.RuleEthernet}, "eth_receiver_done is an ethernet call"},
		{"compute on an ethernet core", func(p *kir.Program) {
			p.AddKernel(&kir.Kernel{Name: "math", Role: kir.RoleCompute, Processor: kir.ComputeProc, Cores: []ir.CoreRange{kir.EthRange(2, 2)}})
		}, []kir.Rule{kir.RuleProcessor}, "compute kernels cannot run on ethernet cores"},
		{"mixed cores", func(p *kir.Program) {
			k := p.Kernel("sender")
			k.Cores = append(k.Cores, ir.CoreRange{X0: 3, Y0: 3, X1: 3, Y1: 3})
		}, []kir.Rule{kir.RuleGrid}, "mixes ethernet and worker"},
		{"no such channel", func(p *kir.Program) {
			p.Kernel("sender").Cores = []ir.CoreRange{kir.EthRange(14, 14)}
		}, []kir.Rule{kir.RuleGrid}, "outside channels 0..13"},
		{"odd transfer size", func(p *kir.Program) {
			p.Kernel("sender").Body[0] = kir.EthSendBytes{Src: kir.C(0x20000), Dst: kir.C(0x20000), Size: kir.C(24), PerSend: kir.C(24), PerSendWords: kir.Shr(kir.C(24), kir.C(4))}
		}, []kir.Rule{kir.RuleEthernet}, "whole 16-byte words"},
		{"default 16-byte commands", func(p *kir.Program) {
			p.Kernel("sender").Body[0] = ethSend(kir.C(64), kir.C(16), kir.C(1))
		}, []kir.Rule{kir.RuleEthSend}, "64 bytes as 4 transmit commands of 16 bytes; 1 command(s) of 64 bytes would do"},
		{"default 16-byte commands of a runtime size", func(p *kir.Program) {
			p.Kernel("sender").Body[0] = ethSend(kir.Mul(kir.ArgRef{Name: "device_id"}, kir.C(64)), kir.C(16), kir.C(1))
		}, []kir.Rule{kir.RuleEthSend}, "16 bytes per command for a transfer of unknown size"},
		{"word size is not bytes / 16", func(p *kir.Program) {
			p.Kernel("sender").Body[0] = ethSend(kir.C(64), kir.C(64), kir.C(1))
		}, []kir.Rule{kir.RuleEthSend}, "num_bytes_per_send_word_size 1 is not num_bytes_per_send 64 / 16"},
		{"last command past the transfer", func(p *kir.Program) {
			p.Kernel("sender").Body[0] = ethSend(kir.C(96), kir.C(64), kir.C(4))
		}, []kir.Rule{kir.RuleEthSend}, "the last command sends 32 bytes past the transfer"},
		{"per-command size unknown", func(p *kir.Program) {
			dev := kir.ArgRef{Name: "device_id"}
			p.Kernel("sender").Body[0] = ethSend(kir.C(64), dev, kir.Shr(dev, kir.C(4)))
		}, []kir.Rule{kir.RuleEthSend}, "neither the transfer size nor a constant"},
		{"plain semaphore wait on an ethernet core", func(p *kir.Program) {
			k := p.Kernel("receiver")
			k.Body = append([]kir.Stmt{kir.NoCSemaphoreWait{Addr: kir.GetEthSemaphore{ID: kir.C(0)}, Value: kir.C(0)}}, k.Body...)
		}, []kir.Rule{kir.RuleEthWait}, "noc_semaphore_wait on an ethernet core spins without run_routing"},
		{"plain semaphore wait_min on an ethernet core", func(p *kir.Program) {
			k := p.Kernel("receiver")
			k.Body = append([]kir.Stmt{kir.NoCSemaphoreWaitMin{Addr: kir.GetEthSemaphore{ID: kir.C(0)}, Value: kir.C(0)}}, k.Body...)
		}, []kir.Rule{kir.RuleEthWait}, "use eth_noc_semaphore_wait_min"},
		{"ethernet semaphore wait on a worker", func(p *kir.Program) {
			k := p.Kernel("worker")
			k.Body[0] = kir.EthNoCSemaphoreWait{Addr: kir.GetSemaphore{ID: kir.C(0)}, Value: kir.C(1)}
		}, []kir.Rule{kir.RuleEthernet}, "eth_noc_semaphore_wait is an ethernet call"},
		{"two kernels on one ERISC", func(p *kir.Program) {
			p.AddKernel(&kir.Kernel{Name: "other", Role: kir.RoleReader, Processor: kir.RISCV0, Cores: []ir.CoreRange{kir.EthRange(0, 0)}})
		}, []kir.Rule{kir.RuleProcessor}, "both run on RISCV_0 of this ethernet core"},
		{"both ERISCs of a core send on TX queue 0", func(p *kir.Program) {
			k := p.AddKernel(&kir.Kernel{Name: "back", Role: kir.RoleWriter, Processor: kir.RISCV1, NoC: 1, Cores: []ir.CoreRange{kir.EthRange(0, 0)}})
			k.Builder().EthReceiverChannelDone(kir.C(1))
		}, []kir.Rule{kir.RuleEthTXQ}, `kernels "sender" and "back" both send on TX queue 0 of this ethernet core`},
		{"both ERISCs of a core send on TX queue 1", func(p *kir.Program) {
			p.Kernel("sender").TXQ = 1
			k := p.AddKernel(&kir.Kernel{Name: "back", Role: kir.RoleWriter, Processor: kir.RISCV1, NoC: 1, TXQ: 1, Cores: []ir.CoreRange{kir.EthRange(0, 0)}})
			k.Builder().EthSendBytesOverChannelPayloadOnly(kir.C(0x20000), kir.C(0x20000), kir.C(64))
		}, []kir.Rule{kir.RuleEthTXQ}, "both send on TX queue 1"},
		{"TX queue out of range", func(p *kir.Program) {
			p.Kernel("sender").TXQ = 2
		}, []kir.Rule{kir.RuleEthTXQ}, "TX queue 2 is not 0..1"},
		{"TX queue on a worker kernel", func(p *kir.Program) {
			p.Kernel("worker").TXQ = 1
		}, []kir.Rule{kir.RuleEthTXQ}, "TX queue 1 on a kernel on worker cores"},
		{"ERISC1 on NoC 0", func(p *kir.Program) {
			p.Kernel("receiver").NoC = 0
		}, []kir.Rule{kir.RuleEthNoC}, "uses NoC 0; in 2-ERISC mode tt-metal requires NoC 1"},
		{"ERISC0 on NoC 1", func(p *kir.Program) {
			p.Kernel("sender").NoC = 1
		}, []kir.Rule{kir.RuleEthNoC}, "RISCV_0 of an ethernet core uses NoC 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := ethProgram()
			tc.edit(p)
			err := kir.Validate(p, bh)
			if diff := cmp.Diff(tc.rules, kir.RulesOf(err)); diff != "" {
				t.Errorf("rules (-want +got):\n%s\nerror: %v", diff, err)
			}
			if err != nil && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
		})
	}
}

// TestEthTXQPerERISC: both ERISCs of one ethernet core may send when each
// has its own TX queue (kir.EthTXQ), and a second ERISC that never sends
// may stay on queue 0.
func TestEthTXQPerERISC(t *testing.T) {
	tests := []struct {
		name  string
		txq   int
		sends bool
	}{
		{"ERISC1 sends on TXQ 1", kir.EthTXQ(kir.RISCV1), true},
		{"ERISC1 does not send", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := ethProgram()
			k := p.AddKernel(&kir.Kernel{Name: "back", Role: kir.RoleWriter, Processor: kir.RISCV1, NoC: kir.EthNoC(kir.RISCV1), TXQ: tc.txq, Cores: []ir.CoreRange{kir.EthRange(0, 0)}})
			if tc.sends {
				k.Builder().EthReceiverChannelDone(kir.C(1))
			}
			assert.NoError(t, kir.Validate(p, bh))
		})
	}
	assert.Equal(t, []int{0, 1}, []int{kir.EthTXQ(kir.RISCV0), kir.EthTXQ(kir.RISCV1)}, "ERISC c sends on TXQ c")
	assert.Equal(t, []int{0, 1}, []int{kir.EthNoC(kir.RISCV0), kir.EthNoC(kir.RISCV1)}, "ERISC c uses NoC c")
}

// ethSend is an eth_send_bytes of size bytes from and to 0x20000 with the
// given per-command arguments.
func ethSend(size, per, words kir.Expr) kir.EthSendBytes {
	return kir.EthSendBytes{Src: kir.C(0x20000), Dst: kir.C(0x20000), Size: size, PerSend: per, PerSendWords: words}
}

// TestEthSendValid: the sends the validator accepts, the one-command form
// of Builder.EthSendBytes included.
func TestEthSendValid(t *testing.T) {
	dev := kir.ArgRef{Name: "device_id"}
	runtime := kir.Mul(kir.Add(dev, kir.C(1)), kir.C(2048))
	tests := []struct {
		name string
		s    kir.EthSendBytes
	}{
		{"whole constant transfer", ethSend(kir.C(2048), kir.C(2048), kir.C(128))},
		{"whole constant transfer, word size as a shift", ethSend(kir.C(2048), kir.C(2048), kir.Shr(kir.C(2048), kir.C(4)))},
		{"whole runtime transfer", ethSend(runtime, runtime, kir.Shr(runtime, kir.C(4)))},
		{"one 16-byte word", ethSend(kir.C(16), kir.C(16), kir.C(1))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := ethProgram()
			p.Kernel("sender").Body[0] = tc.s
			if err := kir.Validate(p, bh); err != nil {
				t.Errorf("rejected: %v", err)
			}
		})
	}
	k := &kir.Kernel{Name: "k"}
	k.Builder().EthSendBytes(kir.C(0), kir.C(0), runtime)
	if diff := cmp.Diff([]kir.Stmt{kir.EthSendBytes{Src: kir.C(0), Dst: kir.C(0), Size: runtime, PerSend: runtime, PerSendWords: kir.Shr(runtime, kir.C(4))}}, k.Body); diff != "" {
		t.Errorf("Builder.EthSendBytes (-want +got):\n%s", diff)
	}
}

func TestEthMinCommands(t *testing.T) {
	tests := []struct {
		size, maxCmd, want uint64
	}{
		{0, 1 << 20, 0},
		{16, 1 << 20, 1},
		{124160, 1 << 20, 1},   // the B=1 logits gather's link share
		{124160, 65536, 2},     // 2 x 62,080
		{16 * 97, 16 * 50, 97}, // 97 words split evenly only one by one
		{65536, 65536, 1},
		{65552, 65536, 17}, // 4,097 words = 17 x 241
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d in %d", tc.size, tc.maxCmd), func(t *testing.T) {
			assert.Equal(t, tc.want, kir.EthMinCommands(tc.size, tc.maxCmd))
		})
	}
	assert.Equal(t, uint64(7760), kir.EthCommands(124160, 16), "the release's default: one command per 16 bytes")
	assert.Equal(t, uint64(2), kir.EthCommands(96, 64), "the loop sends a last whole command")
}

// plainResolver knows no device; deviceResolver is device int(r).
type (
	plainResolver  struct{}
	deviceResolver int
)

func (plainResolver) BufferAddress(string) (uint32, error)  { return 0, nil }
func (plainResolver) WorkerNoC(kir.Core) (int, int, error)  { return 0, 0, nil }
func (deviceResolver) BufferAddress(string) (uint32, error) { return 0, nil }
func (deviceResolver) WorkerNoC(kir.Core) (int, int, error) { return 0, 0, nil }
func (r deviceResolver) DeviceID() (int, error)             { return int(r), nil }

func TestDeviceIDAndEthCores(t *testing.T) {
	v := kir.DeviceID()
	if v.String() != "device_id" {
		t.Errorf("DeviceID prints %q", v.String())
	}
	if got, err := v.Resolve(deviceResolver(3)); err != nil || got != 3 {
		t.Errorf("Resolve on device 3 = %d, %v", got, err)
	}
	if _, err := v.Resolve(plainResolver{}); err == nil || !strings.Contains(err.Error(), "mesh") {
		t.Errorf("Resolve without a device: %v, want an error", err)
	}
	c := kir.EthCore(5)
	if !c.IsEth() || c.String() != "eth5" || (kir.Core{X: 5}).IsEth() {
		t.Errorf("EthCore(5) = %v (IsEth %t)", c, c.IsEth())
	}
	for _, s := range []kir.Stmt{kir.EthSendBytes{}, kir.EthWaitForReceiverDone{}, kir.EthWaitForBytes{}, kir.EthReceiverDone{}} {
		if !kir.IsEthOnly(s) || !kir.IsDataMovementOnly(s) || kir.APIName(s) == "" {
			t.Errorf("%T: eth-only %t, data-movement-only %t, API name %q", s, kir.IsEthOnly(s), kir.IsDataMovementOnly(s), kir.APIName(s))
		}
	}
}

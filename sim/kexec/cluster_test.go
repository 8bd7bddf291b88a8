package kexec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/cpp/samples"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/kexec"
)

// ring returns n devices cabled as a ring with one link (channel 0 east,
// channel 1 west: the channels of samples.EthLink), every device holding
// the buffers of p with "src" of device d set to tile pattern d.
func ring(t *testing.T, n int, p *kir.Program, line bool) (*kexec.Cluster, [][]float32) {
	t.Helper()
	links := kexec.RingLinks(n, []int{samples.EthSendChannel}, []int{samples.EthRecvChannel})
	if line {
		links = kexec.LineLinks(n, []int{samples.EthSendChannel}, []int{samples.EthRecvChannel})
	}
	c, err := kexec.NewCluster(bh, n, links)
	if err != nil {
		t.Fatal(err)
	}
	srcs := make([][]float32, n)
	for d, dev := range c.Devices {
		for _, b := range p.Buffers {
			if _, err := dev.Alloc(b); err != nil {
				t.Fatal(err)
			}
		}
		srcs[d] = randTiles(uint64(100+d), 1)
		if err := dev.WriteTiles("src", srcs[d]); err != nil {
			t.Fatal(err)
		}
	}
	return c, srcs
}

func TestClusterEthLinkRing(t *testing.T) {
	p := samples.EthLink()
	if err := kir.Validate(p, bh); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	for _, n := range []int{2, 4} {
		t.Run(strings.Repeat("x", 0)+string(rune('0'+n))+" devices", func(t *testing.T) {
			c, srcs := ring(t, n, p, false)
			stats, err := c.RunAll(p, kexec.RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for d, dev := range c.Devices {
				got, err := dev.ReadTiles("dst")
				if err != nil {
					t.Fatal(err)
				}
				from := (d + n - 1) % n
				if diff := cmp.Diff(srcs[from], got); diff != "" {
					t.Errorf("device %d dst should be device %d's src (-want +got):\n%s", d, from, diff)
				}
				if stats[d].EthBytes != 2048 {
					t.Errorf("device %d sent %d bytes over ethernet, want 2048", d, stats[d].EthBytes)
				}
			}
		})
	}
}

func TestClusterDeadlockNamesDevice(t *testing.T) {
	good := samples.EthLink()
	broken := samples.EthLink()
	broken.Kernel("eth_sender").Body = nil // device 0 never sends
	c, _ := ring(t, 2, good, false)
	_, err := c.Run([]*kir.Program{broken, good}, kexec.RunOptions{})
	var de *kexec.DeadlockError
	if !errors.As(err, &de) {
		t.Fatalf("Run returned %v (%T), want a *DeadlockError", err, err)
	}
	if de.Devices != 2 {
		t.Errorf("Devices = %d, want 2", de.Devices)
	}
	want := []kexec.Blocked{
		{Device: 1, Core: kir.EthCore(1), Kernel: "eth_receiver", Call: "eth_wait_for_bytes", CB: kir.NoCB, Semaphore: -1,
			Reason: "waits for 2048 bytes from device 0 eth0, has 0"},
		{Device: 1, Core: kir.Core{}, Kernel: "reader", Call: "noc_semaphore_wait", CB: kir.NoCB, Semaphore: samples.SemTileReady,
			Reason: "waits for value == 1, has 0"},
		{Device: 1, Core: kir.Core{}, Kernel: "writer", Call: "cb_wait_front", CB: samples.CBOut, Semaphore: -1,
			Reason: "waits for 1 page, 0 available"},
	}
	if diff := cmp.Diff(want, de.Blocked); diff != "" {
		t.Errorf("blocked kernels (-want +got):\n%s", diff)
	}
	if msg := err.Error(); !strings.Contains(msg, `device 1 core eth1 kernel "eth_receiver": eth_wait_for_bytes waits for 2048 bytes from device 0 eth0, has 0`) {
		t.Errorf("error does not name device, core and the awaited transfer:\n%s", msg)
	}
}

func TestClusterRuleErrors(t *testing.T) {
	t.Run("uncabled channel on a line", func(t *testing.T) {
		p := samples.EthLink()
		c, _ := ring(t, 2, p, true)
		_, err := c.RunAll(p, kexec.RunOptions{})
		// Device 0's west channel 1 has no cable on a line.
		if !kir.HasRule(err, kir.RuleEthernet) || !strings.Contains(err.Error(), "device 0: ") ||
			!strings.Contains(err.Error(), "ethernet channel 1 of device 0 is not cabled") {
			t.Errorf("got %v, want a RuleEthernet error for device 0's uncabled channel 1", err)
		}
	})
	t.Run("single device", func(t *testing.T) {
		p := samples.EthLink()
		d := kexec.NewDevice(bh)
		for _, b := range p.Buffers {
			if _, err := d.Alloc(b); err != nil {
				t.Fatal(err)
			}
		}
		_, err := d.Run(p, kexec.RunOptions{})
		if !kir.HasRule(err, kir.RuleEthernet) {
			t.Errorf("got %v, want RuleEthernet (no link on a single device)", err)
		}
	})
	t.Run("ethernet semaphore not created", func(t *testing.T) {
		p := samples.EthLink()
		er := p.Kernel("eth_receiver")
		er.Body = append([]kir.Stmt{kir.Let{Var: kir.Var{Name: "bad"}, Value: kir.GetEthSemaphore{ID: kir.C(5)}}}, er.Body...)
		c, _ := ring(t, 2, p, false)
		_, err := c.RunAll(p, kexec.RunOptions{})
		if !kir.HasRule(err, kir.RuleSemaphore) || !strings.Contains(err.Error(), "ACTIVE_ETH>(5)") {
			t.Errorf("got %v, want RuleSemaphore for ethernet semaphore 5", err)
		}
	})
	t.Run("two sends counted as one transfer", func(t *testing.T) {
		p := samples.EthLink()
		es := p.Kernel("eth_sender")
		// Send the tile twice before eth_wait_for_receiver_done: the
		// bytes_sent word says 4096, the receiver waits for 2048.
		es.Body = append(es.Body[:3:3], es.Body[2], es.Body[3])
		c, _ := ring(t, 2, p, false)
		_, err := c.RunAll(p, kexec.RunOptions{})
		var de *kexec.DeadlockError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), "eth_wait_for_bytes waits for 2048 bytes from device 1 eth0, has 4096") {
			t.Errorf("got %v, want a deadlock naming the 4096 bytes received", err)
		}
	})
}

func TestNewClusterRejectsBadLinks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		links []kexec.Link
		want  string
	}{
		{"self", []kexec.Link{{A: kexec.EthEnd{Device: 0, Channel: 0}, B: kexec.EthEnd{Device: 0, Channel: 1}}}, "joins a device to itself"},
		{"twice", []kexec.Link{
			{A: kexec.EthEnd{Device: 0, Channel: 0}, B: kexec.EthEnd{Device: 1, Channel: 1}},
			{A: kexec.EthEnd{Device: 0, Channel: 0}, B: kexec.EthEnd{Device: 1, Channel: 2}},
		}, "already cabled"},
		{"no channel", []kexec.Link{{A: kexec.EthEnd{Device: 0, Channel: 14}, B: kexec.EthEnd{Device: 1, Channel: 1}}}, "does not exist"},
		{"no device", []kexec.Link{{A: kexec.EthEnd{Device: 0, Channel: 0}, B: kexec.EthEnd{Device: 2, Channel: 1}}}, "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := kexec.NewCluster(bh, 2, tc.links)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewCluster: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if got := len(kexec.RingLinks(4, []int{0, 2}, []int{1, 3})); got != 8 {
		t.Errorf("RingLinks(4, 2 links) has %d cables, want 8", got)
	}
	if got := len(kexec.LineLinks(4, []int{0}, []int{1})); got != 3 {
		t.Errorf("LineLinks(4, 1 link) has %d cables, want 3", got)
	}
}

func TestEthL1Access(t *testing.T) {
	d := kexec.NewDevice(bh)
	data := []byte{1, 2, 3, 4}
	if err := d.WriteEthL1(3, 0x20000, data); err != nil {
		t.Fatal(err)
	}
	got, err := d.ReadEthL1(3, 0x20000, 4)
	if err != nil || !cmp.Equal(got, data) {
		t.Errorf("ReadEthL1 = %v, %v; want %v", got, err, data)
	}
	if _, err := d.ReadEthL1(14, 0, 4); err == nil {
		t.Error("channel 14 of a 14-channel chip accepted")
	}
	if _, err := d.ReadEthL1(0, 512<<10, 4); err == nil {
		t.Error("read past the ethernet L1 accepted")
	}
	_ = numerics.TileElems
}

// TestClusterRefusesEthRules: the simulator refuses, whatever the
// validator proved, an eth_send_bytes in more transmit commands than
// needed (the release's default of one command per 16 bytes) or that
// overruns its transfer, and a plain noc_semaphore_wait on an ethernet
// core; the fixed sample runs and counts one command per send.
func TestClusterRefusesEthRules(t *testing.T) {
	send := func(per, words uint32) func(p *kir.Program) {
		return func(p *kir.Program) {
			body := p.Kernel("eth_sender").Body
			for i, s := range body {
				if e, ok := s.(kir.EthSendBytes); ok {
					e.PerSend, e.PerSendWords = kir.C(per), kir.C(words)
					body[i] = e
				}
			}
		}
	}
	tests := []struct {
		name string
		edit func(p *kir.Program)
		rule kir.Rule
		msg  string
	}{
		{"fixed sample", func(*kir.Program) {}, 0, ""},
		{"default 16-byte commands", send(16, 1), kir.RuleEthSend, "eth_send_bytes of 2048 bytes as 128 transmit commands of 16 bytes; 1 would do"},
		{"commands past the transfer", send(1536, 96), kir.RuleEthSend, "the last command sends 1024 bytes past the transfer"},
		{"word size not bytes / 16", send(2048, 1), kir.RuleEthSend, "num_bytes_per_send_word_size is not num_bytes_per_send / 16"},
		{"plain semaphore wait", func(p *kir.Program) {
			body := p.Kernel("eth_receiver").Body
			for i, s := range body {
				if w, ok := s.(kir.EthNoCSemaphoreWait); ok {
					body[i] = kir.NoCSemaphoreWait(w)
				}
			}
		}, kir.RuleEthWait, "noc_semaphore_wait on ethernet core eth1 spins without run_routing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := samples.EthLink()
			tc.edit(p)
			c, _ := ring(t, 2, p, false)
			stats, err := c.RunAll(p, kexec.RunOptions{})
			if tc.rule == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if stats[0].EthCommands != 1 {
					t.Errorf("device 0 issued %d transmit commands, want 1", stats[0].EthCommands)
				}
				return
			}
			if diff := cmp.Diff([]kir.Rule{tc.rule}, kir.RulesOf(err)); diff != "" {
				t.Errorf("rules (-want +got):\n%s\nerror: %v", diff, err)
			}
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %v does not say %q", err, tc.msg)
			}
		})
	}
}

// TestClusterRefusesSharedTXQ: a second kernel on ERISC1 of EthLink's
// sending core that also sends is refused (RuleEthTXQ) on TX queue 0, the
// sender's, and runs on TX queue 1.
func TestClusterRefusesSharedTXQ(t *testing.T) {
	tests := []struct {
		name string
		txq  int
		msg  string
	}{
		{"both ERISCs on TXQ 0", 0, "on TX queue 0 of ethernet core"},
		{"ERISC1 on TXQ 1", 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := samples.EthLink()
			k := p.AddKernel(&kir.Kernel{Name: "eth_other", Role: kir.RoleWriter, Processor: kir.RISCV1, NoC: 1, TXQ: tc.txq,
				Cores: []ir.CoreRange{kir.EthCore(samples.EthSendChannel).Range()}})
			a := kir.C(samples.EthStagingAddr + 4096)
			k.Builder().EthSendBytesOverChannelPayloadOnly(a, a, kir.C(64))
			c, _ := ring(t, 2, p, false)
			_, err := c.RunAll(p, kexec.RunOptions{})
			if tc.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff([]kir.Rule{kir.RuleEthTXQ}, kir.RulesOf(err)); diff != "" {
				t.Errorf("rules (-want +got):\n%s\nerror: %v", diff, err)
			}
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %v does not say %q", err, tc.msg)
			}
		})
	}
}

package gogen

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
)

// fullConfig has every slice, map and pointer of a ProgramConfig set, and
// one kernel with all of them nil.
func fullConfig() *hostcfg.ProgramConfig {
	noc := 1
	cr := []hostcfg.CoreRange{{X0: 0, Y0: 0, X1: 1, Y1: 2}}
	buf := hostcfg.ArgValue{ArgValue: kir.BufferAddr("w", 64)}
	cb := hostcfg.CBConfig{Index: 3, Name: "cb", PageSize: 2048, NumPages: 2, TotalSize: 4096, DataFormat: "Float16_b", DataFormatCode: 5, Cores: cr, BackingBuffer: "w"}
	sem := hostcfg.SemaphoreConfig{ID: 1, Cores: cr, Initial: 2, CoreType: hostcfg.CoreTypeEth}
	return &hostcfg.ProgramConfig{
		Program: "p",
		Kernels: []hostcfg.KernelConfig{{
			Name: "k", Source: "p/k.cpp", Role: "compute", Processor: "MATH", NoC: &noc, Cores: cr,
			Compute:           &hostcfg.ComputeConfig{MathFidelity: "HiFi4", UnpackToDestFP32: []int{0, 1}},
			Ethernet:          &hostcfg.EthernetConfig{EthMode: hostcfg.EthSender, NoC: 1, Processor: "ERISC"},
			Defines:           map[string]string{"A": "1"},
			CompileArgs:       []hostcfg.NamedArg{{Index: 0, Name: "c", Value: buf}},
			RuntimeArgNames:   []string{"r"},
			RuntimeArgs:       []hostcfg.CoreArgs{{Core: hostcfg.Core{X: 1, Y: 2}, Values: []hostcfg.ArgValue{buf}}},
			CommonRuntimeArgs: []hostcfg.NamedArg{{Index: 0, Name: "cr", Value: buf}},
		}, {Name: "empty"}},
		CBs:        []hostcfg.CBConfig{cb},
		Semaphores: []hostcfg.SemaphoreConfig{sem},
		Buffers: []hostcfg.BufferConfig{{Name: "w", Memory: "L1", DType: "bf16", PageSize: 2048, Pages: 4,
			Shard:  &hostcfg.ShardConfig{Grid: cr[0], Shape: [2]int{32, 64}},
			Blocks: &hostcfg.BlockConfig{Kt: 2, Nt: 3, Period: 1, Dest: 4, KB: 2}}},
		Persistent: &hostcfg.PersistentConfig{Steps: 2,
			Control: hostcfg.ControlConfig{Buffer: "ctl", Bytes: 64},
			Tables:  hostcfg.TablesConfig{Buffer: "tab", RingCommonArgs: []string{"x"}},
			Phases: []hostcfg.PhaseConfig{{Index: 0, Name: "ph", Cores: cr, Semaphores: []hostcfg.SemaphoreConfig{sem},
				CBs:     []hostcfg.PhaseCBConfig{{CBConfig: cb, Address: buf, MergedIndex: 1}},
				Kernels: []hostcfg.PhaseArgs{{Kernel: "k", RuntimeArgs: [2]int{0, 1}}}}},
		},
	}
}

// TestClone: clone equals its input and a round trip through JSON (nil
// stays nil), and changing anything reachable from the clone leaves the
// input as it was.
func TestClone(t *testing.T) {
	jsonOf := func(c *hostcfg.ProgramConfig) string {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	c := fullConfig()
	var viaJSON hostcfg.ProgramConfig
	if err := json.Unmarshal([]byte(jsonOf(c)), &viaJSON); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&viaJSON, clone(c)); diff != "" {
		t.Fatalf("clone (-via JSON +got):\n%s", diff)
	}
	before := jsonOf(c)
	mutations := []struct {
		name string
		f    func(c *hostcfg.ProgramConfig)
	}{
		{"kernel NoC", func(c *hostcfg.ProgramConfig) { *c.Kernels[0].NoC = 0 }},
		{"kernel cores", func(c *hostcfg.ProgramConfig) { c.Kernels[0].Cores[0].X1 = 9 }},
		{"compute unpack", func(c *hostcfg.ProgramConfig) { c.Kernels[0].Compute.UnpackToDestFP32[1] = 7 }},
		{"compute", func(c *hostcfg.ProgramConfig) { c.Kernels[0].Compute.MathFidelity = "LoFi" }},
		{"ethernet", func(c *hostcfg.ProgramConfig) { c.Kernels[0].Ethernet.NoC = 0 }},
		{"defines", func(c *hostcfg.ProgramConfig) { c.Kernels[0].Defines["A"] = "2" }},
		{"compile args", func(c *hostcfg.ProgramConfig) { c.Kernels[0].CompileArgs[0].Value.Buffer = "v" }},
		{"runtime arg names", func(c *hostcfg.ProgramConfig) { c.Kernels[0].RuntimeArgNames[0] = "s" }},
		{"runtime args", func(c *hostcfg.ProgramConfig) { c.Kernels[0].RuntimeArgs[0].Values[0].Buffer = "v" }},
		{"common runtime args", func(c *hostcfg.ProgramConfig) { c.Kernels[0].CommonRuntimeArgs[0].Value.Const = 1 }},
		{"cb cores", func(c *hostcfg.ProgramConfig) { c.CBs[0].Cores[0].Y1 = 9 }},
		{"semaphore cores", func(c *hostcfg.ProgramConfig) { c.Semaphores[0].Cores[0].Y1 = 9 }},
		{"buffer", func(c *hostcfg.ProgramConfig) { c.Buffers[0].Name = "v" }},
		{"buffer shard", func(c *hostcfg.ProgramConfig) { c.Buffers[0].Shard.Shape[0] = 1 }},
		{"buffer blocks", func(c *hostcfg.ProgramConfig) { c.Buffers[0].Blocks.Kt = 1 }},
		{"persistent", func(c *hostcfg.ProgramConfig) { c.Persistent.Steps = 3 }},
		{"ring common args", func(c *hostcfg.ProgramConfig) { c.Persistent.Tables.RingCommonArgs[0] = "y" }},
		{"phase cores", func(c *hostcfg.ProgramConfig) { c.Persistent.Phases[0].Cores[0].X0 = 1 }},
		{"phase semaphores", func(c *hostcfg.ProgramConfig) { c.Persistent.Phases[0].Semaphores[0].Cores[0].X0 = 1 }},
		{"phase cbs", func(c *hostcfg.ProgramConfig) { c.Persistent.Phases[0].CBs[0].Cores[0].X0 = 1 }},
		{"phase cb address", func(c *hostcfg.ProgramConfig) { c.Persistent.Phases[0].CBs[0].Address.Buffer = "v" }},
		{"phase kernels", func(c *hostcfg.ProgramConfig) { c.Persistent.Phases[0].Kernels[0].Kernel = "j" }},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			cl := clone(c)
			m.f(cl)
			if jsonOf(cl) == before {
				t.Fatalf("mutation %s changed nothing", m.name)
			}
			if diff := cmp.Diff(before, jsonOf(c)); diff != "" {
				t.Errorf("input after changing its clone's %s (-want +got):\n%s", m.name, diff)
			}
		})
	}
}

package hostcfg_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/cpp/samples"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

var bh = target.Blackhole()

func intp(n int) *int { return &n }

func v(a kir.ArgValue) hostcfg.ArgValue { return hostcfg.ArgValue{ArgValue: a} }

// TestEltwiseAddConfig checks the config of the element-wise add sample
// against values computed by hand from the sample's definition.
func TestEltwiseAddConfig(t *testing.T) {
	cfg, err := hostcfg.Config(samples.EltwiseAdd(), bh)
	if err != nil {
		t.Fatal(err)
	}
	both := []hostcfg.CoreRange{{X0: 0, Y0: 0, X1: 1, Y1: 0}}
	c00, c10 := hostcfg.Core{X: 0, Y: 0}, hostcfg.Core{X: 1, Y: 0}
	want := &hostcfg.ProgramConfig{
		Program: "eltwise_add",
		Kernels: []hostcfg.KernelConfig{
			{
				Name: "reader", Source: "eltwise_add/reader.cpp", Role: "reader", Processor: "RISCV_1", NoC: intp(1),
				Cores: both, Defines: map[string]string{},
				CompileArgs:     []hostcfg.NamedArg{{Index: 0, Name: "tile_bytes", Value: v(kir.U32(2048))}},
				RuntimeArgNames: []string{"a_addr", "b_addr", "start_tile", "num_tiles"},
				RuntimeArgs: []hostcfg.CoreArgs{
					{Core: c00, Values: []hostcfg.ArgValue{v(kir.BufferAddr("a", 0)), v(kir.BufferAddr("b", 0)), v(kir.U32(0)), v(kir.U32(4))}},
					{Core: c10, Values: []hostcfg.ArgValue{v(kir.BufferAddr("a", 0)), v(kir.BufferAddr("b", 0)), v(kir.U32(4)), v(kir.U32(4))}},
				},
				CommonRuntimeArgs: []hostcfg.NamedArg{},
			},
			{
				Name: "compute", Source: "eltwise_add/compute.cpp", Role: "compute", Processor: "compute",
				Cores: both, Defines: map[string]string{},
				Compute:         &hostcfg.ComputeConfig{MathFidelity: "LoFi", UnpackToDestFP32: []int{}},
				CompileArgs:     []hostcfg.NamedArg{{Index: 0, Name: "num_tiles", Value: v(kir.U32(4))}},
				RuntimeArgNames: []string{}, RuntimeArgs: []hostcfg.CoreArgs{}, CommonRuntimeArgs: []hostcfg.NamedArg{},
			},
			{
				Name: "writer", Source: "eltwise_add/writer.cpp", Role: "writer", Processor: "RISCV_0", NoC: intp(0),
				Cores: both, Defines: map[string]string{},
				CompileArgs:     []hostcfg.NamedArg{{Index: 0, Name: "tile_bytes", Value: v(kir.U32(2048))}},
				RuntimeArgNames: []string{"start_tile", "num_tiles"},
				RuntimeArgs: []hostcfg.CoreArgs{
					{Core: c00, Values: []hostcfg.ArgValue{v(kir.U32(0)), v(kir.U32(4))}},
					{Core: c10, Values: []hostcfg.ArgValue{v(kir.U32(4)), v(kir.U32(4))}},
				},
				CommonRuntimeArgs: []hostcfg.NamedArg{{Index: 0, Name: "out_addr", Value: v(kir.BufferAddr("out", 0))}},
			},
		},
		CBs: []hostcfg.CBConfig{
			{Index: 0, Name: "in0", PageSize: 2048, NumPages: 2, TotalSize: 4096, DataFormat: "Float16_b", DataFormatCode: 5, Cores: both},
			{Index: 1, Name: "in1", PageSize: 2048, NumPages: 2, TotalSize: 4096, DataFormat: "Float16_b", DataFormatCode: 5, Cores: both},
			{Index: 16, Name: "out", PageSize: 2048, NumPages: 2, TotalSize: 4096, DataFormat: "Float16_b", DataFormatCode: 5, Cores: both},
		},
		Semaphores: []hostcfg.SemaphoreConfig{},
		Buffers: []hostcfg.BufferConfig{
			{Name: "a", Memory: "dram_interleaved", DType: "bf16", DataFormat: "Float16_b", Layout: "tile", PageSize: 2048, Pages: 8},
			{Name: "b", Memory: "dram_interleaved", DType: "bf16", DataFormat: "Float16_b", Layout: "tile", PageSize: 2048, Pages: 8},
			{Name: "out", Memory: "dram_interleaved", DType: "bf16", DataFormat: "Float16_b", Layout: "tile", PageSize: 2048, Pages: 8},
		},
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
}

func TestHandshakeConfig(t *testing.T) {
	cfg, err := hostcfg.Config(samples.SemaphoreHandshake(), bh)
	if err != nil {
		t.Fatal(err)
	}
	recv := hostcfg.CoreRange{X0: 1, Y0: 0, X1: 1, Y1: 0}
	both := []hostcfg.CoreRange{{X0: 0, Y0: 0, X1: 0, Y1: 0}, recv}
	wantSems := []hostcfg.SemaphoreConfig{{ID: 0, Cores: both}, {ID: 1, Cores: both}}
	if diff := cmp.Diff(wantSems, cfg.Semaphores); diff != "" {
		t.Errorf("semaphores (-want +got):\n%s", diff)
	}
	wantStaging := hostcfg.BufferConfig{Name: "staging", Memory: "l1_height_sharded",
		Shard: &hostcfg.ShardConfig{Grid: recv, Shape: [2]int{32, 32}},
		DType: "bf16", DataFormat: "Float16_b", Layout: "tile", PageSize: 2048, Pages: 1}
	if diff := cmp.Diff(wantStaging, cfg.Buffers[2]); diff != "" {
		t.Errorf("staging buffer (-want +got):\n%s", diff)
	}
	sw := cfg.Kernel("sender_writer")
	if sw == nil {
		t.Fatal("no sender_writer kernel")
	}
	wantArgs := []hostcfg.CoreArgs{{Core: hostcfg.Core{X: 0, Y: 0}, Values: []hostcfg.ArgValue{
		v(kir.NoCX(kir.Core{X: 1, Y: 0})), v(kir.NoCY(kir.Core{X: 1, Y: 0})), v(kir.BufferAddr("staging", 0))}}}
	if diff := cmp.Diff(wantArgs, sw.RuntimeArgs); diff != "" {
		t.Errorf("sender_writer runtime args (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{
		"semaphore_handshake/receiver_reader.cpp", "semaphore_handshake/receiver_writer.cpp",
		"semaphore_handshake/sender_reader.cpp", "semaphore_handshake/sender_writer.cpp",
	}, cfg.Sources()); diff != "" {
		t.Errorf("sources (-want +got):\n%s", diff)
	}
}

func TestConfigRejectsInvalidPrograms(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *kir.Program)
		rule   kir.Rule
	}{
		{"CB index out of range", func(p *kir.Program) { p.CBs[0].Index = 40 }, kir.RuleCBCount},
		{"missing runtime values", func(p *kir.Program) { p.Kernel("writer").RuntimeValues = nil }, kir.RuleArgTable},
		{"core outside the grid", func(p *kir.Program) { p.Kernel("reader").Cores = []ir.CoreRange{{X0: 0, Y0: 0, X1: 11, Y1: 0}} }, kir.RuleGrid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := samples.EltwiseAdd()
			tc.mutate(p)
			cfg, err := hostcfg.Config(p, bh)
			if err == nil {
				t.Fatalf("no error; config %+v", cfg)
			}
			if !kir.HasRule(err, tc.rule) {
				t.Errorf("error %v does not report rule %v", err, tc.rule)
			}
			if cfg != nil {
				t.Error("a config came back with the error")
			}
		})
	}
	if _, err := hostcfg.Config(nil, bh); err == nil {
		t.Error("nil program: no error")
	}
}

// TestJSONRoundTrip decodes the JSON of every sample and compares it with
// the config it came from.
func TestJSONRoundTrip(t *testing.T) {
	for _, s := range samples.All() {
		t.Run(s.Name, func(t *testing.T) {
			cfg, err := hostcfg.Config(s.Program, bh)
			if err != nil {
				t.Fatal(err)
			}
			js, err := cfg.JSON()
			if err != nil {
				t.Fatal(err)
			}
			var back hostcfg.ProgramConfig
			if err := json.Unmarshal(js, &back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(cfg, &back); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJSONFormat(t *testing.T) {
	p := samples.Matmul()
	k := p.Kernel("compute")
	k.Define("ZED", "a<b && c>d")
	k.Define("ALPHA", "1")
	js, err := hostcfg.Marshal(p, bh)
	if err != nil {
		t.Fatal(err)
	}
	s := string(js)
	if !strings.HasPrefix(s, "{\n  \"program\": \"matmul\",\n  \"kernels\": [\n    {\n") {
		t.Errorf("not two-space indented JSON starting with the program name:\n%.200s", s)
	}
	if !strings.HasSuffix(s, "}\n") {
		t.Error("no final newline")
	}
	want := "\"defines\": {\n        \"ALPHA\": \"1\",\n        \"MM_THROTTLE\": \"0\",\n        \"ZED\": \"a<b && c>d\"\n      }"
	if !strings.Contains(s, want) {
		t.Errorf("defines not sorted and unescaped; want %q in\n%s", want, s)
	}
	again, err := hostcfg.Marshal(p, bh)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != s {
		t.Error("two marshals of the same program differ")
	}
}

func TestArgValueJSON(t *testing.T) {
	tests := []struct {
		v    kir.ArgValue
		json string
	}{
		{kir.U32(0), `0`},
		{kir.U32(4294967295), `4294967295`},
		{kir.BufferAddr("w", 0), `"addr(w)"`},
		{kir.BufferAddr("w", 64), `"addr(w)+64"`},
		{kir.NoCX(kir.Core{X: 3, Y: 9}), `"noc_x(3,9)"`},
		{kir.NoCY(kir.Core{X: 10, Y: 0}), `"noc_y(10,0)"`},
		{kir.NoCX(kir.EthCore(3)), `"noc_x(eth3)"`},
		{kir.NoCY(kir.EthCore(13)), `"noc_y(eth13)"`},
		{kir.DeviceID(), `"device_id"`},
	}
	for _, tc := range tests {
		t.Run(tc.json, func(t *testing.T) {
			b, err := json.Marshal(hostcfg.ArgValue{ArgValue: tc.v})
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.json {
				t.Errorf("marshal: got %s, want %s", b, tc.json)
			}
			var back hostcfg.ArgValue
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back.ArgValue != tc.v {
				t.Errorf("unmarshal: got %+v, want %+v", back.ArgValue, tc.v)
			}
		})
	}
	// kir.ArgValue.String spells an ethernet core's coordinate noc_xeth3.
	if av, err := hostcfg.ParseArgValue(kir.NoCX(kir.EthCore(3)).String()); err != nil || av != kir.NoCX(kir.EthCore(3)) {
		t.Errorf("ParseArgValue(%q) = %+v, %v; want noc_x of eth3", kir.NoCX(kir.EthCore(3)).String(), av, err)
	}
	for _, bad := range []string{`"addr()"`, `"noc_z(1,2)"`, `"hello"`, `-1`, `true`, `"addr(w)+99999999999"`,
		`"device_id+1"`, `"noc_x(eth)"`, `"noc_x(eth-1)"`, `"noc_x(eth3"`} {
		var av hostcfg.ArgValue
		if err := json.Unmarshal([]byte(bad), &av); err == nil {
			t.Errorf("unmarshal %s: no error, got %+v", bad, av.ArgValue)
		}
	}
	if _, err := json.Marshal(hostcfg.ArgValue{ArgValue: kir.ArgValue{Kind: 9}}); err == nil {
		t.Error("marshal of an unknown value kind: no error")
	}
}

func TestCoreJSON(t *testing.T) {
	var r hostcfg.CoreRange
	if err := json.Unmarshal([]byte(`"(1,2)-(10,9)"`), &r); err != nil {
		t.Fatal(err)
	}
	if want := (hostcfg.CoreRange{X0: 1, Y0: 2, X1: 10, Y1: 9}); r != want {
		t.Errorf("got %+v, want %+v", r, want)
	}
	var c hostcfg.Core
	if err := json.Unmarshal([]byte(`"(4,5)"`), &c); err != nil {
		t.Fatal(err)
	}
	if want := (hostcfg.Core{X: 4, Y: 5}); c != want {
		t.Errorf("got %+v, want %+v", c, want)
	}
	for _, bad := range []string{`"(1,2)"`, `"1,2-3,4"`, `5`} {
		if err := json.Unmarshal([]byte(bad), &r); err == nil {
			t.Errorf("core range %s: no error", bad)
		}
	}
	if err := json.Unmarshal([]byte(`"(1,2)-(3,4)"`), &c); err == nil {
		t.Error("core from a range: no error")
	}
}

func TestEthCoreJSON(t *testing.T) {
	tests := []struct {
		r    hostcfg.CoreRange
		json string
	}{
		{hostcfg.CoreRange(kir.EthRange(3, 3)), `"eth3"`},
		{hostcfg.CoreRange(kir.EthRange(0, 13)), `"eth0-eth13"`},
		{hostcfg.CoreRange{X0: 0, Y0: 0, X1: 0, Y1: 0}, `"(0,0)-(0,0)"`},
	}
	for _, tc := range tests {
		t.Run(tc.json, func(t *testing.T) {
			b, err := json.Marshal(tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.json {
				t.Errorf("marshal %+v: got %s, want %s", tc.r, b, tc.json)
			}
			var back hostcfg.CoreRange
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back != tc.r {
				t.Errorf("unmarshal %s: got %+v, want %+v", b, back, tc.r)
			}
		})
	}
	var r hostcfg.CoreRange
	if err := json.Unmarshal([]byte(`"eth2-eth2"`), &r); err != nil || r != hostcfg.CoreRange(kir.EthRange(2, 2)) {
		t.Errorf(`"eth2-eth2" = %+v, %v; want channel 2`, r, err)
	}
	for _, bad := range []string{`"eth3-eth1"`, `"eth"`, `"eth1-2"`, `"(1,-1)-(1,-1)"`} {
		if err := json.Unmarshal([]byte(bad), &r); err == nil {
			t.Errorf("core range %s: no error, got %+v", bad, r)
		}
	}
	c := hostcfg.Core(kir.EthCore(7))
	b, err := json.Marshal(c)
	if err != nil || string(b) != `"eth7"` {
		t.Fatalf("marshal eth core 7: %s, %v", b, err)
	}
	var back hostcfg.Core
	if err := json.Unmarshal(b, &back); err != nil || back != c {
		t.Errorf("unmarshal %s: %+v, %v", b, back, err)
	}
	if err := json.Unmarshal([]byte(`"eth0-eth1"`), &back); err == nil {
		t.Error("core from an ethernet range: no error")
	}
}

// TestEthernetConfig checks the config of the ethernet-only ring shift
// sample against its definition: EthernetConfig per kernel, device_id
// and ethernet NoC coordinates as symbolic values, an ETH semaphore.
func TestEthernetConfig(t *testing.T) {
	cfg, err := hostcfg.Config(samples.EthRingShift(), bh)
	if err != nil {
		t.Fatal(err)
	}
	send, recv := cfg.Kernel("eth_sender"), cfg.Kernel("eth_receiver")
	if send == nil || recv == nil {
		t.Fatalf("kernels %v: want eth_sender and eth_receiver", cfg.Sources())
	}
	if diff := cmp.Diff(&hostcfg.EthernetConfig{EthMode: hostcfg.EthSender, NoC: 0, Processor: "RISCV_0"}, send.Ethernet); diff != "" {
		t.Errorf("sender ethernet config (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&hostcfg.EthernetConfig{EthMode: hostcfg.EthReceiver, NoC: 0, Processor: "RISCV_0"}, recv.Ethernet); diff != "" {
		t.Errorf("receiver ethernet config (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]hostcfg.CoreRange{hostcfg.CoreRange(kir.EthRange(0, 0))}, send.Cores); diff != "" {
		t.Errorf("sender cores (-want +got):\n%s", diff)
	}
	wantCommon := []hostcfg.NamedArg{
		{Index: 0, Name: "device_id", Value: v(kir.DeviceID())},
		{Index: 1, Name: "dst_addr", Value: v(kir.BufferAddr("dst", 0))},
		{Index: 2, Name: "sender_x", Value: v(kir.NoCX(kir.EthCore(0)))},
		{Index: 3, Name: "sender_y", Value: v(kir.NoCY(kir.EthCore(0)))},
	}
	if diff := cmp.Diff(wantCommon, recv.CommonRuntimeArgs); diff != "" {
		t.Errorf("receiver common args (-want +got):\n%s", diff)
	}
	wantSems := []hostcfg.SemaphoreConfig{{ID: 0, Cores: []hostcfg.CoreRange{hostcfg.CoreRange(kir.EthRange(0, 1))}, CoreType: hostcfg.CoreTypeEth}}
	if diff := cmp.Diff(wantSems, cfg.Semaphores); diff != "" {
		t.Errorf("semaphores (-want +got):\n%s", diff)
	}
	// Worker kernels and semaphores keep their JSON: no ethernet object,
	// no core_type.
	js, err := hostcfg.Marshal(samples.EthLink(), bh)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Kernels    []map[string]any `json:"kernels"`
		Semaphores []map[string]any `json:"semaphores"`
	}
	if err := json.Unmarshal(js, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range raw.Kernels {
		_, has := k["ethernet"]
		if onEth := strings.HasPrefix(k["name"].(string), "eth_"); has != onEth {
			t.Errorf("kernel %s: ethernet object present %t, want %t", k["name"], has, onEth)
		}
	}
	for _, s := range raw.Semaphores {
		ct, has := s["core_type"]
		eth := strings.HasPrefix(s["cores"].([]any)[0].(string), "eth")
		if has != eth || (has && ct != "ETH") {
			t.Errorf("semaphore %v: core_type %v, want ETH exactly on ethernet cores", s, ct)
		}
	}
}

// TestEthernetRuntimeArgs checks per-core runtime args on ethernet cores:
// the cores print as "ethN".
func TestEthernetRuntimeArgs(t *testing.T) {
	p := samples.EthRingShift()
	k := p.Kernel("eth_sender")
	k.RuntimeArg("link")
	k.SetRuntimeArgs(kir.EthCore(0), kir.U32(5))
	cfg, err := hostcfg.Config(p, bh)
	if err != nil {
		t.Fatal(err)
	}
	want := []hostcfg.CoreArgs{{Core: hostcfg.Core(kir.EthCore(0)), Values: []hostcfg.ArgValue{v(kir.U32(5))}}}
	if diff := cmp.Diff(want, cfg.Kernel("eth_sender").RuntimeArgs); diff != "" {
		t.Errorf("runtime args (-want +got):\n%s", diff)
	}
	js, err := cfg.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"core": "eth0"`) {
		t.Errorf("runtime args of ethernet core 0 not keyed \"eth0\":\n%s", js)
	}
}

func TestSourceFile(t *testing.T) {
	if got, want := hostcfg.SourceFile("rmsnorm_l3", "reader"), "rmsnorm_l3/reader.cpp"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

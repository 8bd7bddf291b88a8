package hostcfg_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
)

// TestAppendJSONIsMarshal: AppendJSON writes json.Marshal's bytes for
// configs with every optional field present and absent, nil and empty
// slices and maps, and strings that need escaping (HTML characters,
// quotes, control characters, non-ASCII).
func TestAppendJSONIsMarshal(t *testing.T) {
	noc := 1
	args := []hostcfg.CoreArgs{
		{Core: hostcfg.Core{X: 1, Y: 2}, Values: []hostcfg.ArgValue{{ArgValue: kir.BufferAddr("t12", 64)}, {ArgValue: kir.U32(7)}, {ArgValue: kir.NoCY(kir.Core{X: 3, Y: 4})}}},
		{Core: hostcfg.Core(kir.EthCore(2)), Values: []hostcfg.ArgValue{{ArgValue: kir.NoCX(kir.EthCore(5))}, {ArgValue: kir.DeviceID()}}},
		{Core: hostcfg.Core{X: 0, Y: 0}},
	}
	full := hostcfg.ProgramConfig{
		Program: "matmul_12",
		Kernels: []hostcfg.KernelConfig{
			{Name: "reader", Source: "kernels/reader_0.cpp", Role: "reader", Processor: "RISCV_1", NoC: &noc,
				Cores: []hostcfg.CoreRange{{X0: 0, Y0: 0, X1: 7, Y1: 9}}, Defines: map[string]string{"B": "x<y>&z", "A": `q"\` + "\t\u00e9"},
				CompileArgs: []hostcfg.NamedArg{{Index: 0, Name: "n", Value: hostcfg.ArgValue{ArgValue: kir.U32(3)}}}, RuntimeArgNames: []string{"src", "n", "y"},
				RuntimeArgs: args, CommonRuntimeArgs: []hostcfg.NamedArg{{Index: 0, Name: "w", Value: hostcfg.ArgValue{ArgValue: kir.BufferAddr("layers.0.w<1>", 0)}}},
				Ethernet: &hostcfg.EthernetConfig{EthMode: hostcfg.EthSender, NoC: 1, Processor: "ERISC"}},
			{Name: "compute", Role: "compute", Processor: "compute", Compute: &hostcfg.ComputeConfig{MathFidelity: "HiFi4", FP32DestAccEn: true, UnpackToDestFP32: []int{0, 24}},
				Defines: map[string]string{}, CompileArgs: []hostcfg.NamedArg{}, RuntimeArgNames: []string{}, RuntimeArgs: []hostcfg.CoreArgs{}, CommonRuntimeArgs: []hostcfg.NamedArg{}},
			{Name: "bare", Compute: &hostcfg.ComputeConfig{}},
		},
		CBs: []hostcfg.CBConfig{
			{Index: 0, Name: "in0", PageSize: 2048, NumPages: 4, TotalSize: 8192, DataFormat: "Float16_b", DataFormatCode: 5, Cores: []hostcfg.CoreRange{{X0: 1, Y0: 1, X1: 1, Y1: 1}}, BackingBuffer: "t3"},
			{Index: 16, DataFormat: "Float32"},
		},
		Semaphores: []hostcfg.SemaphoreConfig{{ID: 0, Cores: []hostcfg.CoreRange{{X0: 0, Y0: 0, X1: 0, Y1: 0}}, Initial: 4294967295, CoreType: hostcfg.CoreTypeEth}, {ID: 1}},
		Buffers: []hostcfg.BufferConfig{
			{Name: "t3", Memory: "L1_HEIGHT_SHARDED", Shard: &hostcfg.ShardConfig{Grid: hostcfg.CoreRange{X0: 0, Y0: 0, X1: 3, Y1: 0}, Shape: [2]int{32, 64}}, DType: "bf16", DataFormat: "Float16_b", Layout: "tile", PageSize: 2048, Pages: 8},
			{Name: "w", Memory: "DRAM", DType: "bfp8_b", Layout: "tile", PageSize: 1088, Pages: 64, Blocks: &hostcfg.BlockConfig{Kt: 8, Nt: 8, Period: 2, Dest: 4, KB: 8}},
		},
	}
	tests := []struct {
		name string
		cfg  *hostcfg.ProgramConfig
	}{
		{"every field", &full},
		{"empty lists", &hostcfg.ProgramConfig{Kernels: []hostcfg.KernelConfig{}, CBs: []hostcfg.CBConfig{}, Semaphores: []hostcfg.SemaphoreConfig{}, Buffers: []hostcfg.BufferConfig{}}},
		{"nil lists", &hostcfg.ProgramConfig{Program: "<&>"}},
		{"nil config", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := json.Marshal(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := hostcfg.AppendJSON([]byte("prefix"), tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff("prefix"+string(want), string(got)); diff != "" {
				t.Errorf("AppendJSON (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAppendJSONUnknownValue: a value of unknown kind is an error, as
// json.Marshal's.
func TestAppendJSONUnknownValue(t *testing.T) {
	cfg := &hostcfg.ProgramConfig{Kernels: []hostcfg.KernelConfig{{CommonRuntimeArgs: []hostcfg.NamedArg{{Value: hostcfg.ArgValue{ArgValue: kir.ArgValue{Kind: 200}}}}}}}
	if _, err := json.Marshal(cfg); err == nil {
		t.Fatal("json.Marshal accepts a value of unknown kind")
	}
	if _, err := hostcfg.AppendJSON(nil, cfg); err == nil {
		t.Error("AppendJSON accepts a value of unknown kind")
	}
}

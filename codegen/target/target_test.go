package target

import (
	"testing"

	"github.com/tcc-dev/tcc/ir"
)

func TestBlackholeConstants(t *testing.T) {
	bh := Blackhole()
	tests := []struct {
		name      string
		got, want int
	}{
		{"grid x", bh.GridX, 11},
		{"grid y", bh.GridY, 10},
		{"workers", bh.NumWorkers(), 110},
		{"l1 size", bh.L1Size, 1572864},
		{"l1 budget", bh.L1Budget(), 1572864 - 111104}, // DEFAULT_UNRESERVED of the pinned release,
		{"brisc code", bh.CodeBytes(BRISC), 49152},
		{"ncrisc code", bh.CodeBytes(NCRISC), 24576},
		{"trisc code", bh.CodeBytes(TRISC), 24576},
		{"trisc local", bh.LocalBytes(TRISC), 4096},
		{"banks", bh.DRAMBanks, 8},
		{"dram bank MiB", int(bh.DRAMBankBytes >> 20), 4080}, // dram_bank_size of blackhole_140_arch.yaml
		{"dram device MiB", int(bh.DRAMBytes() >> 20), 8 * 4080},
		{"dram read align", bh.DRAMReadAlign, 64},
		{"dram write align", bh.DRAMWriteAlign, 16},
		{"l1 align", bh.L1Align, 16},
		{"noc packet", bh.MaxNoCPacket, 16384},
		{"cbs", bh.MaxCBs, 32},
		{"rt args", bh.MaxRuntimeArgs, 341},
		{"dest half bf16", bh.DestTiles(false, false), 8},
		{"dest half fp32", bh.DestTiles(false, true), 4},
		{"dest full bf16", bh.DestTiles(true, false), 16},
		{"dest full fp32", bh.DestTiles(true, true), 8},
		{"tile bf16", bh.TileBytes(ir.BF16), 2048},
		{"tile bfp8", bh.TileBytes(ir.BFP8B), 1088},
		{"tile bfp4", bh.TileBytes(ir.BFP4B), 576},
		{"tile fp32", bh.TileBytes(ir.FP32), 4096},
		{"dram page 200", bh.DRAMPageSize(200), 256},
		{"dram page 1088", bh.DRAMPageSize(1088), 1088},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %d, want %d", tc.got, tc.want)
			}
		})
	}
}

func TestDataFormat(t *testing.T) {
	want := map[ir.DType]DataFormat{ir.FP32: 0, ir.BF16: 5, ir.BFP8B: 6, ir.BFP4B: 7, ir.Int32: 8, ir.UInt32: 24}
	for _, d := range ir.AllDTypes {
		got, err := DataFormatOf(d)
		if err != nil || got != want[d] {
			t.Errorf("DataFormatOf(%s) = %d, %v; want %d", d, got, err, want[d])
		}
	}
	if _, err := DataFormatOf(ir.InvalidDType); err == nil {
		t.Error("DataFormatOf(invalid) succeeded")
	}
	if got := Float16B.Name(); got != "Float16_b" {
		t.Errorf("Float16B.Name() = %q", got)
	}
}

func TestNoCMapping(t *testing.T) {
	bh := Blackhole()
	seen := map[[2]int]bool{}
	for y := 0; y < bh.GridY; y++ {
		for x := 0; x < bh.GridX; x++ {
			nx, ny, err := bh.WorkerNoC(x, y)
			if err != nil {
				t.Fatal(err)
			}
			if seen[[2]int{nx, ny}] {
				t.Fatalf("duplicate NoC coordinate (%d,%d)", nx, ny)
			}
			seen[[2]int{nx, ny}] = true
			if bx, by, ok := bh.WorkerAt(nx, ny); !ok || bx != x || by != y {
				t.Errorf("WorkerAt(WorkerNoC(%d,%d)) = %d,%d,%v", x, y, bx, by, ok)
			}
			if _, ok := bh.DRAMBankAt(nx, ny); ok {
				t.Errorf("worker (%d,%d) collides with a DRAM endpoint", x, y)
			}
		}
	}
	for b := 0; b < bh.DRAMBanks; b++ {
		nx, ny, err := bh.DRAMNoC(b)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := bh.DRAMBankAt(nx, ny); !ok || got != b {
			t.Errorf("DRAMBankAt(DRAMNoC(%d)) = %d,%v", b, got, ok)
		}
	}
	if _, _, err := bh.WorkerNoC(11, 0); err == nil {
		t.Error("WorkerNoC(11,0) succeeded")
	}
	if _, _, ok := bh.WorkerAt(14, 2); ok { // column 14 is logical x=11, outside the 11-wide grid
		t.Error("WorkerAt(14,2) is outside the grid but reported ok")
	}
}

func TestHumanBytes(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{512, "512 B"}, {-1023, "-1023 B"}, {1536, "1.5 KiB"}, {87 << 20, "87.0 MiB"}, {-(5 << 29), "-2.50 GiB"}, {4278190080 * 8, "31.88 GiB"}} {
		if got := HumanBytes(c.n); got != c.want {
			t.Errorf("HumanBytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

package timing

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// The CSV of WriteCSV is tt-metal's device profiler report,
// ops_perf_results_*.csv, as tt-metal writes it for Blackhole (the column
// set of its v2.1 format: DEVICE ARCH and AVAILABLE WORKER CORE COUNT
// present, tensor dimensions as INPUT_n_{W,Z,Y,X}_PAD[LOGICAL]), so that
// tools that read it (tenstorrent/tt-perf-report) read tcc's predictions,
// and a measured CSV joins with a predicted one on OP CODE, DEVICE ID and
// GLOBAL CALL COUNT. Columns tcc has nothing for stay empty; tcc's own
// columns follow tt-metal's, prefixed TCC.
//
// Value forms, as tt-metal writes them:
//
//   - OP CODE: tcc's op kind (matmul_swiglu, all_reduce_add_rmsnorm, ...).
//     tt-perf-report's matmul analysis keys on "Matmul" in the op code and
//     knows no HiFi3, which tcc's bfp4_b matmuls use, so tcc's programs
//     keep their own names and are read as generic device ops.
//   - OP TYPE: tt_dnn_device; DEVICE ARCH: blackhole; AVAILABLE WORKER
//     CORE COUNT: 110 (the 11x10 worker grid).
//   - GLOBAL CALL COUNT: the op id (the program's index + 1) shifted left
//     10 bits, the device id in the low bits; rows in execution order,
//     each program on every device before the next program.
//   - MATH FIDELITY: LoFi, HiFi2, HiFi3 or HiFi4; empty without a compute
//     kernel.
//   - DEVICE KERNEL DURATION [ns]: the predicted program time (its latest
//     thread's finish plus the fixed per-program cost), as the timing
//     model is calibrated against this column of measured CSVs.
//   - OP TO OP LATENCY [ns]: the launch gap since the previous program on
//     the device ends (0 for the first).
//   - DEVICE {BRISC,NCRISC,TRISC0,TRISC1,TRISC2,ERISC} KERNEL DURATION
//     [ns]: the latest finish of the kernels on that RISC (writers run on
//     BRISC, readers on NCRISC, compute on the three TRISCs, which tcc
//     times as one thread, ethernet kernels on ERISC), without the fixed
//     cost.
//   - INPUT_n_* / OUTPUT_n_*: the op's operands and results, dimensions as
//     padded[logical] (the last four, 1 for missing ones; a tile-layout
//     tensor's Y and X padded to whole tiles of 32), layout TILE or
//     ROW_MAJOR, datatype BFLOAT16, BFLOAT8_B, BFLOAT4_B, FLOAT32, INT32,
//     UINT32, memory DEV_0_DRAM_INTERLEAVED, DEV_0_L1_INTERLEAVED,
//     DEV_0_L1_HEIGHT_SHARDED, ...
//   - PM IDEAL [ns] and PM BANDWIDTH [ns]: the program's DRAM reads at the
//     physical DRAM rate (the report's floor rate, 512 GB/s): tcc's ideal
//     is its DRAM floor; PM COMPUTE stays empty.
//   - PROGRAM HASH: the program's signature (programs that differ only in
//     buffer addresses share it).

// csvInputs and csvOutputs are how many operands and results the CSV has
// columns for (tt-metal's: 8 and 3).
const csvInputs, csvOutputs = 8, 3

// workerCores is the Blackhole worker grid tcc builds for (11x10).
const workerCores = 110

// CSVHeader are the columns of WriteCSV: tt-metal's ops_perf_results
// columns, then tcc's own.
var CSVHeader = csvHeader()

func csvHeader() []string {
	h := []string{"OP CODE", "OP TYPE", "GLOBAL CALL COUNT", "DEVICE ID", "DEVICE ARCH", "ATTRIBUTES", "MATH FIDELITY",
		"CORE COUNT", "AVAILABLE WORKER CORE COUNT", "PARALLELIZATION STRATEGY", "HOST START TS", "HOST END TS",
		"HOST DURATION [ns]", "DEVICE FW START CYCLE", "DEVICE FW END CYCLE", "OP TO OP LATENCY [ns]",
		"OP TO OP LATENCY BR/NRISC START [ns]", "DEVICE FW DURATION [ns]", "DEVICE KERNEL DURATION [ns]",
		"DEVICE KERNEL DURATION DM START [ns]", "DEVICE KERNEL DURATION PER CORE MIN [ns]",
		"DEVICE KERNEL DURATION PER CORE MAX [ns]", "DEVICE KERNEL DURATION PER CORE AVG [ns]",
		"DEVICE KERNEL FIRST TO LAST START [ns]"}
	for _, r := range risc {
		h = append(h, "DEVICE "+r+" KERNEL DURATION [ns]")
	}
	h = append(h, "DEVICE COMPUTE CB WAIT FRONT [ns]", "DEVICE COMPUTE CB RESERVE BACK [ns]",
		"DISPATCH TOTAL CQ CMD OP TIME [ns]", "DISPATCH GO SEND WAIT TIME [ns]")
	for i := range csvInputs {
		h = append(h, tensorColumns(fmt.Sprintf("INPUT_%d", i))...)
	}
	for i := range csvOutputs {
		h = append(h, tensorColumns(fmt.Sprintf("OUTPUT_%d", i))...)
	}
	h = append(h, "METAL TRACE ID", "METAL TRACE REPLAY SESSION ID", "COMPUTE KERNEL SOURCE", "COMPUTE KERNEL HASH",
		"DATA MOVEMENT KERNEL SOURCE", "DATA MOVEMENT KERNEL HASH", "PROGRAM HASH", "PROGRAM CACHE HIT",
		"TENSIX DM 0 MAX KERNEL SIZE [B]", "TENSIX DM 1 MAX KERNEL SIZE [B]", "TENSIX COMPUTE 0 MAX KERNEL SIZE [B]",
		"TENSIX COMPUTE 1 MAX KERNEL SIZE [B]", "TENSIX COMPUTE 2 MAX KERNEL SIZE [B]", "ACTIVE ETH DM 0 MAX KERNEL SIZE [B]",
		"ACTIVE ETH DM 1 MAX KERNEL SIZE [B]", "IDLE ETH DM 0 MAX KERNEL SIZE [B]", "IDLE ETH DM 1 MAX KERNEL SIZE [B]",
		"PM IDEAL [ns]", "PM COMPUTE [ns]", "PM BANDWIDTH [ns]", "PM REQ I BW", "PM REQ O BW", "PM FPU UTIL (%)",
		"NOC UTIL (%)", "MULTICAST NOC UTIL (%)", "DRAM BW UTIL (%)", "ETH BW UTIL (%)", "NPE CONG IMPACT (%)",
		"TCC LAYER", "TCC REGION", "TCC BYTES READ", "TCC BYTES WRITTEN", "TCC DRAM READ", "TCC CRITICAL THREAD", "TCC WAITS ON")
	return h
}

// risc are the RISC-V cores of tt-metal's per-RISC kernel durations.
var risc = []string{"BRISC", "NCRISC", "TRISC0", "TRISC1", "TRISC2", "ERISC"}

func tensorColumns(prefix string) []string {
	return []string{prefix + "_W_PAD[LOGICAL]", prefix + "_Z_PAD[LOGICAL]", prefix + "_Y_PAD[LOGICAL]", prefix + "_X_PAD[LOGICAL]",
		prefix + "_LAYOUT", prefix + "_DATATYPE", prefix + "_MEMORY"}
}

// WriteCSV writes one row per program per device in execution order (see
// the column forms above).
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	col := map[string]int{}
	for i, c := range CSVHeader {
		col[c] = i
	}
	bytesPerNS := 512.0 // the physical DRAM rate, 512 GB/s, unless the report says otherwise
	if r.FloorUS > 0 && r.FloorBytes > 0 {
		bytesPerNS = float64(r.FloorBytes) / (r.FloorUS * 1000)
	}
	// Execution order: program by program, every device's row of it.
	byIndex := map[int][]ProgramRow{}
	var order []int
	for _, p := range r.Programs {
		if _, ok := byIndex[p.Index]; !ok {
			order = append(order, p.Index)
		}
		byIndex[p.Index] = append(byIndex[p.Index], p)
	}
	prevEnd := map[int]float64{}
	for _, i := range order {
		for _, p := range byIndex[i] {
			row := make([]string, len(CSVHeader))
			set := func(c, v string) { row[col[c]] = v }
			set("OP CODE", p.Op)
			set("OP TYPE", "tt_dnn_device")
			set("GLOBAL CALL COUNT", strconv.Itoa((p.Index+1)<<10|p.Device))
			set("DEVICE ID", strconv.Itoa(p.Device))
			set("DEVICE ARCH", "blackhole")
			set("ATTRIBUTES", fmt.Sprintf("{'layer': '%d'; 'region': '%s'}", p.Layer, p.Region))
			set("MATH FIDELITY", fidelityName(p.MathFidelity))
			set("CORE COUNT", strconv.Itoa(p.Cores))
			set("AVAILABLE WORKER CORE COUNT", strconv.Itoa(workerCores))
			gap := 0.0
			if end, ok := prevEnd[p.Device]; ok {
				gap = max(0, p.StartUS-end)
			}
			prevEnd[p.Device] = p.StartUS + p.US
			set("OP TO OP LATENCY [ns]", ns(gap))
			set("DEVICE KERNEL DURATION [ns]", ns(p.US))
			for name, us := range riscFinish(p.Threads) {
				set("DEVICE "+name+" KERNEL DURATION [ns]", ns(us))
			}
			for j, t := range p.Operands[:min(len(p.Operands), csvInputs)] {
				setTensor(set, fmt.Sprintf("INPUT_%d", j), t)
			}
			for j, t := range p.Results[:min(len(p.Results), csvOutputs)] {
				setTensor(set, fmt.Sprintf("OUTPUT_%d", j), t)
			}
			set("PROGRAM HASH", p.Signature)
			ideal := strconv.FormatInt(int64(float64(p.DRAMRead)/bytesPerNS+0.5), 10)
			set("PM IDEAL [ns]", ideal)
			set("PM BANDWIDTH [ns]", ideal)
			set("TCC LAYER", strconv.Itoa(p.Layer))
			set("TCC REGION", p.Region)
			set("TCC BYTES READ", strconv.FormatInt(p.BytesRead, 10))
			set("TCC BYTES WRITTEN", strconv.FormatInt(p.BytesWritten, 10))
			set("TCC DRAM READ", strconv.FormatInt(p.DRAMRead, 10))
			set("TCC CRITICAL THREAD", p.CriticalThread)
			set("TCC WAITS ON", p.WaitsOn)
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// ns is us in whole nanoseconds.
func ns(us float64) string { return strconv.FormatInt(int64(us*1000+0.5), 10) }

// fidelityName is tt-metal's spelling of a math fidelity: HIFI4 -> HiFi4.
func fidelityName(f string) string {
	switch strings.ToUpper(f) {
	case "LOFI":
		return "LoFi"
	case "HIFI2":
		return "HiFi2"
	case "HIFI3":
		return "HiFi3"
	case "HIFI4":
		return "HiFi4"
	}
	return f
}

// riscOf is the RISC-V core a thread runs on, by tcc's convention:
// ethernet kernels on ERISC, readers on NCRISC (RISCV_1), writers on BRISC
// (RISCV_0), compute on TRISC0-2 ("TRISC").
func riscOf(t ThreadTime) string {
	switch {
	case t.Core.IsEth():
		return "ERISC"
	case t.Role == kir.RoleCompute:
		return "TRISC"
	case t.Role == kir.RoleReader:
		return "NCRISC"
	}
	return "BRISC"
}

// riscFinish is the latest thread finish per RISC column (TRISC0-2 each
// the compute thread's).
func riscFinish(threads []ThreadTime) map[string]float64 {
	out := map[string]float64{}
	for _, t := range threads {
		r := riscOf(t)
		names := []string{r}
		if r == "TRISC" {
			names = []string{"TRISC0", "TRISC1", "TRISC2"}
		}
		for _, n := range names {
			out[n] = max(out[n], t.FinishUS)
		}
	}
	return out
}

// setTensor fills the seven columns of one tensor.
func setTensor(set func(c, v string), prefix string, t ir.TensorType) {
	dims := []int{1, 1, 1, 1}
	for i, d := range t.Shape[max(0, len(t.Shape)-4):] {
		dims[4-min(4, len(t.Shape))+i] = d
	}
	for i, name := range []string{"W", "Z", "Y", "X"} {
		pad := dims[i]
		if t.Layout == ir.TileLayout && i >= 2 {
			pad = (pad + 31) / 32 * 32
		}
		set(fmt.Sprintf("%s_%s_PAD[LOGICAL]", prefix, name), fmt.Sprintf("%d[%d]", pad, dims[i]))
	}
	layout := "TILE"
	if t.Layout == ir.RowMajorLayout {
		layout = "ROW_MAJOR"
	}
	set(prefix+"_LAYOUT", layout)
	set(prefix+"_DATATYPE", datatypeName(t.DType))
	set(prefix+"_MEMORY", "DEV_0_"+strings.ToUpper(t.Mem.Kind.String()))
}

// datatypeName is tt-metal's DataType name of d.
func datatypeName(d ir.DType) string {
	switch d {
	case ir.FP32:
		return "FLOAT32"
	case ir.BF16:
		return "BFLOAT16"
	case ir.BFP8B:
		return "BFLOAT8_B"
	case ir.BFP4B:
		return "BFLOAT4_B"
	case ir.Int32:
		return "INT32"
	case ir.UInt32:
		return "UINT32"
	}
	return strings.ToUpper(d.String())
}

// tensorTypes are the types of vs.
func tensorTypes(vs []*ir.Value) []ir.TensorType {
	out := make([]ir.TensorType, len(vs))
	for i, v := range vs {
		out[i] = v.Type
	}
	return out
}

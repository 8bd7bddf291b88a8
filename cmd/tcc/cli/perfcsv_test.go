package cli

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestPerfCSVReadsAsOpsPerfResults reads tcc perf --format csv the way
// tenstorrent/tt-perf-report reads tt-metal's ops_perf_results CSV
// (perf_report.py): the columns it indexes and the forms it parses. A
// column it indexes that is missing, or a value it would fail to parse,
// fails the test.
//
//   - detect_csv_format: DEVICE ARCH (v2.1) and the _PAD[LOGICAL] columns.
//   - the architecture: DEVICE ARCH a registered name (blackhole) and
//     AVAILABLE WORKER CORE COUNT a non-zero integer.
//   - analyze_op: OP CODE, OP TYPE (tt_dnn_device), int(CORE COUNT), DEVICE
//     KERNEL DURATION [ns] and OP TO OP LATENCY [ns] as numbers,
//     INPUT_0_MEMORY, ATTRIBUTES, GLOBAL CALL COUNT, int(DEVICE ID), the
//     datatype columns (mantissa_bits names; get_datatype_size reads the
//     digits) and MATH FIDELITY.
//   - get_value_physical_logical: "padded[logical]" integers.
//   - merge_device_rows: every device runs the same op sequence.
//   - tflops_per_core knows LoFi, HiFi2 and HiFi4 only and runs for op
//     codes containing "Matmul": tcc's op codes must not reach it with
//     another fidelity.
//
// And what tcc promises on top: GLOBAL CALL COUNT is (index+1)<<10 |
// device, and a device's kernel durations plus op-to-op latencies add up to
// its predicted step (less the launch gap after its last program).
func TestPerfCSVReadsAsOpsPerfResults(t *testing.T) {
	for _, args := range [][]string{
		{"tiny-mlp"},
		{"qwen27b", "--config", smallCfg, "--mesh", "1x2"},
	} {
		t.Run(args[0], func(t *testing.T) {
			out, err := runCLI(t, append([]string{"perf", "--format", "csv"}, args...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			js, err := runCLI(t, append([]string{"perf", "--format", "json"}, args...)...)
			if err != nil {
				t.Fatal(err)
			}
			var rep struct {
				DeviceStepUS []float64 `json:"device_step_us"`
			}
			if err := json.Unmarshal([]byte(js), &rep); err != nil {
				t.Fatal(err)
			}
			recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			header, rows := recs[0], recs[1:]
			col := map[string]int{}
			for i, h := range header {
				col[h] = i
			}
			for _, c := range []string{"OP CODE", "OP TYPE", "GLOBAL CALL COUNT", "DEVICE ID", "DEVICE ARCH", "ATTRIBUTES",
				"MATH FIDELITY", "CORE COUNT", "AVAILABLE WORKER CORE COUNT", "OP TO OP LATENCY [ns]", "DEVICE KERNEL DURATION [ns]",
				"DEVICE BRISC KERNEL DURATION [ns]", "DEVICE NCRISC KERNEL DURATION [ns]", "DEVICE TRISC1 KERNEL DURATION [ns]",
				"DEVICE ERISC KERNEL DURATION [ns]", "INPUT_0_W_PAD[LOGICAL]", "INPUT_0_Z_PAD[LOGICAL]", "INPUT_0_Y_PAD[LOGICAL]",
				"INPUT_0_X_PAD[LOGICAL]", "INPUT_0_LAYOUT", "INPUT_0_DATATYPE", "INPUT_0_MEMORY", "INPUT_1_X_PAD[LOGICAL]",
				"INPUT_1_DATATYPE", "INPUT_1_MEMORY", "OUTPUT_0_W_PAD[LOGICAL]", "OUTPUT_0_Y_PAD[LOGICAL]", "OUTPUT_0_X_PAD[LOGICAL]",
				"OUTPUT_0_DATATYPE", "OUTPUT_0_MEMORY", "PM IDEAL [ns]", "PROGRAM HASH"} {
				if _, ok := col[c]; !ok {
					t.Fatalf("no column %q", c)
				}
			}
			get := func(row []string, c string) string { return row[col[c]] }
			num := func(row []string, c string) float64 {
				v, err := strconv.ParseFloat(get(row, c), 64)
				if err != nil {
					t.Fatalf("%s %q: %v", c, get(row, c), err)
				}
				return v
			}
			padLogical := regexp.MustCompile(`^([0-9]+)\[([0-9]+)\]$`)
			mantissa := map[string]bool{"FLOAT32": true, "BFLOAT16": true, "BFLOAT8_B": true, "BFLOAT4_B": true, "UINT32": true, "INT32": true}
			digits := regexp.MustCompile(`[0-9]+`)
			ops := map[int][]string{}
			sum := map[int]float64{}
			lastID := map[int]int{}
			maxGap := 0.0
			for _, row := range rows {
				if get(row, "OP TYPE") != "tt_dnn_device" || get(row, "DEVICE ARCH") != "blackhole" || num(row, "AVAILABLE WORKER CORE COUNT") == 0 {
					t.Fatalf("row %v: type, arch or worker cores", row[:10])
				}
				dev := int(num(row, "DEVICE ID"))
				if float64(dev) != num(row, "DEVICE ID") || num(row, "CORE COUNT") < 1 || num(row, "CORE COUNT") != math.Trunc(num(row, "CORE COUNT")) {
					t.Errorf("DEVICE ID %q or CORE COUNT %q not integers", get(row, "DEVICE ID"), get(row, "CORE COUNT"))
				}
				gcc := int(num(row, "GLOBAL CALL COUNT"))
				if gcc&(1<<10-1) != dev || gcc>>10 <= lastID[dev] {
					t.Errorf("GLOBAL CALL COUNT %d: want the op id << 10 | device %d, op ids increasing (last %d)", gcc, dev, lastID[dev])
				}
				lastID[dev] = gcc >> 10
				kernel := num(row, "DEVICE KERNEL DURATION [ns]")
				sum[dev] += kernel + num(row, "OP TO OP LATENCY [ns]")
				maxGap = max(maxGap, num(row, "OP TO OP LATENCY [ns]"))
				for _, r := range []string{"BRISC", "NCRISC", "TRISC0", "TRISC1", "TRISC2", "ERISC"} {
					if v := get(row, "DEVICE "+r+" KERNEL DURATION [ns]"); v != "" && num(row, "DEVICE "+r+" KERNEL DURATION [ns]") > kernel {
						t.Errorf("%s: %s RISC duration %s over the kernel duration %v", get(row, "OP CODE"), r, v, kernel)
					}
				}
				op := get(row, "OP CODE")
				ops[dev] = append(ops[dev], op)
				switch f := get(row, "MATH FIDELITY"); {
				case strings.Contains(op, "Matmul") && f != "HiFi4" && f != "HiFi2" && f != "LoFi":
					t.Errorf("%s with fidelity %q would fail tt-perf-report's tflops_per_core", op, f)
				case f != "" && f != "LoFi" && f != "HiFi2" && f != "HiFi3" && f != "HiFi4":
					t.Errorf("%s: MATH FIDELITY %q", op, f)
				}
				if get(row, "INPUT_0_MEMORY") == "" || !strings.HasPrefix(get(row, "ATTRIBUTES"), "{") {
					t.Errorf("%s: INPUT_0_MEMORY %q, ATTRIBUTES %q", op, get(row, "INPUT_0_MEMORY"), get(row, "ATTRIBUTES"))
				}
				for _, tensor := range []string{"INPUT_0", "INPUT_1", "OUTPUT_0"} {
					if get(row, tensor+"_DATATYPE") == "" {
						continue
					}
					for _, d := range []string{"W", "Z", "Y", "X"} {
						m := padLogical.FindStringSubmatch(get(row, tensor+"_"+d+"_PAD[LOGICAL]"))
						if m == nil {
							t.Fatalf("%s %s_%s: %q is not padded[logical]", op, tensor, d, get(row, tensor+"_"+d+"_PAD[LOGICAL]"))
						}
						p, _ := strconv.Atoi(m[1])
						l, _ := strconv.Atoi(m[2])
						if l < 1 || p < l {
							t.Errorf("%s %s_%s %s: padded below logical", op, tensor, d, m[0])
						}
					}
					dt := get(row, tensor+"_DATATYPE")
					if !mantissa[dt] || digits.FindString(dt) == "" {
						t.Errorf("%s %s_DATATYPE %q", op, tensor, dt)
					}
					if mem := get(row, tensor+"_MEMORY"); !regexp.MustCompile(`^DEV_0_(DRAM|L1)_(INTERLEAVED|HEIGHT_SHARDED|WIDTH_SHARDED|BLOCK_SHARDED)$`).MatchString(mem) {
						t.Errorf("%s %s_MEMORY %q", op, tensor, mem)
					}
					if l := get(row, tensor+"_LAYOUT"); l != "TILE" && l != "ROW_MAJOR" {
						t.Errorf("%s %s_LAYOUT %q", op, tensor, l)
					}
				}
			}
			for dev, seq := range ops {
				if strings.Join(seq, " ") != strings.Join(ops[0], " ") {
					t.Errorf("device %d runs another op sequence than device 0 (merge_device_rows would warn)", dev)
				}
				// The step also counts the launch gap after the last program.
				if got, want := sum[dev]/1000, rep.DeviceStepUS[dev]; got > want+0.01 || want-got > maxGap/1000+0.01 {
					t.Errorf("device %d: kernel durations + op-to-op latencies %.3f us, step %.3f us (launch gap %.3f us)", dev, got, want, maxGap/1000)
				}
			}
			if len(ops) != len(rep.DeviceStepUS) {
				t.Errorf("%d devices in the CSV, %d in the report", len(ops), len(rep.DeviceStepUS))
			}
		})
	}
}

// TestPerfTraceTracks: --trace lays a step out as the device profiler
// does: per device a programs track and a track per RISC and core group
// (BRISC writer, NCRISC reader, TRISC0-2 compute, ERISC eth_sender, ...),
// each slice within its program's.
func TestPerfTraceTracks(t *testing.T) {
	path := t.TempDir() + "/trace.json"
	if out, err := runCLI(t, "perf", "qwen27b", "--config", smallCfg, "--mesh", "1x2", "--trace", path); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Cat  string         `json:"cat"`
			Ph   string         `json:"ph"`
			TS   float64        `json:"ts"`
			Dur  float64        `json:"dur"`
			PID  int            `json:"pid"`
			TID  int            `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatal(err)
	}
	trackRe := regexp.MustCompile(`^(BRISC|NCRISC|TRISC0-2|ERISC) [a-z_0-9]+$`)
	tracks := map[[2]int]string{}
	riscs := map[string]bool{}
	type key struct {
		pid  int
		ts   float64
		name string
	}
	programs := map[key]float64{}
	for _, e := range tr.TraceEvents {
		switch {
		case e.Ph == "M" && e.Name == "thread_name" && e.TID > 0:
			name, _ := e.Args["name"].(string)
			if !trackRe.MatchString(name) {
				t.Errorf("device %d track %d named %q", e.PID, e.TID, name)
			}
			tracks[[2]int{e.PID, e.TID}] = name
			riscs[strings.Fields(name)[0]] = true
		case e.Ph == "X" && e.TID == 0:
			programs[key{e.PID, e.TS, e.Name}] = e.Dur
		}
	}
	for _, e := range tr.TraceEvents {
		if e.Ph != "X" || e.TID == 0 {
			continue
		}
		name, ok := tracks[[2]int{e.PID, e.TID}]
		if !ok || !strings.HasPrefix(name, e.Cat) || !strings.HasSuffix(name, " "+e.Args["kernel"].(string)) {
			t.Fatalf("slice %s (%s, kernel %v) on track %d %q", e.Name, e.Cat, e.Args["kernel"], e.TID, name)
		}
		if pd, ok := programs[key{e.PID, e.TS, e.Name}]; !ok || e.Dur > pd {
			t.Errorf("%s on %q: %.3f us, outside its program's slice (%v, %.3f us)", e.Name, name, e.Dur, ok, pd)
		}
	}
	for _, r := range []string{"BRISC", "NCRISC", "TRISC0-2", "ERISC"} {
		if !riscs[r] {
			t.Errorf("no %s track (tracks %v)", r, tracks)
		}
	}
}

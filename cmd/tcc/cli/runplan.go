package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/runtime"
)

// valueHostBytes is the host memory one value of a run costs on one
// device: float32 host copies (the uploads and the references) and the
// simulated DRAM holding it at its storage format.
func valueHostBytes(v *ir.Value, f32Copies float64) float64 {
	numel := float64(v.Type.Shape.Numel())
	return numel*4*f32Copies + numel*float64(v.Type.DType.ElemBytes())
}

// hostCopies is the number of float32 host copies each kind of value has
// in a run: weights twice (upload, references), state six times (a copy
// per reference and the device's), inputs twice.
var hostCopies = map[ir.ValueKind]float64{ir.KindWeight: 2, ir.KindState: 6, ir.KindInput: 2}

// hostBytes estimates the host memory a run of g needs on all its devices:
// the weights and state as float32 host copies (the uploads and the
// references), the simulated DRAM holding every value at its storage
// format, and a copy of the state per reference, times simHeapFactor,
// plus simBaseBytes.
func hostBytes(g *ir.Graph) float64 {
	fixed, layers := hostBytesByLayer(g)
	n := fixed
	for _, l := range layers {
		n += l
	}
	return n
}

// simHeapFactor and simBaseBytes turn the bytes the values occupy into the
// peak resident memory of a simulated run (the simulator's transient tiles
// and the Go heap's headroom). Fitted on tiny-mlp --hidden 1024
// --intermediate 4096 --vocab 4096 at 2, 4 and 8 layers (peak RSS 1.4, 2.3
// and 4.1 GB: 0.43 GB a layer where the values hold 0.126 GB).
const (
	simHeapFactor = 3.5
	simBaseBytes  = 0.3e9
)

// hostBytesByLayer splits hostBytes(g) into the part of the values first
// used by each decoder layer (in order) and the rest (embedding, head,
// inputs, values used by no op, the simulator's base).
func hostBytesByLayer(g *ir.Graph) (fixed float64, layers []float64) {
	devs := float64(g.Mesh.Devices())
	cost := map[*ir.Value]float64{}
	for _, vs := range [][]*ir.Value{g.Weights, g.States, g.Inputs} {
		for _, v := range vs {
			cost[v] = valueHostBytes(v, hostCopies[v.Kind]) * devs * simHeapFactor
		}
	}
	for _, r := range g.Layers() {
		var n float64
		for _, op := range r.Ops {
			for _, v := range op.Operands {
				if c, ok := cost[v]; ok {
					n += c
					delete(cost, v)
				}
			}
		}
		layers = append(layers, n)
	}
	fixed = simBaseBytes
	for _, c := range cost {
		fixed += c
	}
	return fixed, layers
}

// simSecondsPerWeight is the simulator's rough cost of one decode step per
// weight element (all devices together): every weight is streamed once a
// step, so it dominates. Measured on the small qwen27b config and on
// tiny-mlp --hidden 1024 (3 s a layer of 12.6M weights, on one core of a
// 2-core machine); good to a factor of two or so.
const simSecondsPerWeight = 0.25e-6

// stepSeconds is a rough simulator time of one step of g, without and
// with --check (the references evaluate the step five more times).
func stepSeconds(g *ir.Graph, check bool) float64 {
	var n float64
	for _, v := range g.Weights {
		n += float64(v.Type.Shape.Numel())
	}
	s := n * float64(g.Mesh.Devices()) * simSecondsPerWeight
	if check {
		s *= 2
	}
	return s
}

// availableHostBytes is MemAvailable from /proc/meminfo, or 0 when unknown.
func availableHostBytes() float64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		var kb float64
		if _, err := fmt.Sscanf(line, "MemAvailable: %f kB", &kb); err == nil {
			return kb * 1024
		}
	}
	return 0
}

// checkHostMemory refuses a run of g (model m, name) estimated to need
// more host memory than --host-memory-gb (default: what the machine has
// available), before any allocation, saying what would fit: fewer layers
// (--layers, or a --config with fewer num_hidden_layers), a smaller mesh.
// It prints the estimate (memory, rough time per step) to progress.
func checkHostMemory(progress io.Writer, m models.Model, mf *modelFlags, g *ir.Graph, rf runFlags) error {
	if rf.hostGB < 0 || rf.hostGB != rf.hostGB {
		return fmt.Errorf("--host-memory-gb %v: must be positive (0: what the machine has available)", rf.hostGB)
	}
	limit := rf.hostGB * 1e9
	what := "--host-memory-gb allows %s"
	if limit == 0 {
		limit, what = availableHostBytes(), "this machine has %s available"
	}
	need := hostBytes(g)
	if limit == 0 || need <= limit {
		if progress != nil && rf.backend == "sim" {
			steps := rf.steps + len(prefillSegments(rf.prefill, rf.prefillChunk))
			per := stepSeconds(g, rf.check)
			plural := "s"
			if steps == 1 {
				plural = ""
			}
			fmt.Fprintf(progress, "tcc: estimate: %s of host memory, about %s per step on the simulator (%s for %d step%s)\n",
				gb(need), secs(per), secs(per*float64(steps)), steps, plural)
		}
		return nil
	}
	return fmt.Errorf("a simulated run of %s needs about %s of host memory (weights and state as float32 copies, the simulated DRAM, the references' state), but %s; %s; or raise --host-memory-gb if the estimate is too high",
		g.Name, gb(need), fmt.Sprintf(what, gb(limit)), fits(m, mf, g, limit))
}

// fits says what would fit in limit bytes: a layer count and a smaller mesh.
func fits(m models.Model, mf *modelFlags, g *ir.Graph, limit float64) string {
	var ways []string
	fixed, layers := hostBytesByLayer(g)
	k, n := 0, fixed
	for k < len(layers) && n+layers[k] <= limit {
		n += layers[k]
		k++
	}
	_, hasLayers := mf.params["layers"]
	_, hasConfig := mf.params["config"]
	switch {
	case fixed > limit:
		ways = append(ways, fmt.Sprintf("even with no decoder layers the embedding, head and inputs need %s: run a smaller config (--config with a smaller vocab_size or hidden_size)", gb(fixed)))
	case hasLayers && modelHas(m, "layers"):
		ways = append(ways, fmt.Sprintf("what fits: --layers %d (of %d)", k, len(layers)))
	case hasConfig && modelHas(m, "config"):
		ways = append(ways, fmt.Sprintf("what fits: a --config with num_hidden_layers %d (of %d) or a smaller hidden_size", k, len(layers)))
	}
	if devs := g.Mesh.Devices(); devs > 1 {
		// A mesh with fewer columns (the model's weights are cut over
		// them; fewer devices replicate less).
		for cols := g.Mesh.Cols / 2; cols >= 1; cols /= 2 {
			sm := ir.Mesh{Rows: g.Mesh.Rows, Cols: cols}
			args, err := mf.args(m)
			if err != nil {
				break
			}
			sg, err := m.Build(args, sm)
			if err != nil {
				break
			}
			if hostBytes(sg) <= limit {
				ways = append(ways, fmt.Sprintf("--mesh %s would need %s", sm, gb(hostBytes(sg))))
				break
			}
		}
	}
	if len(ways) == 0 {
		return "run a smaller config (--config)"
	}
	return strings.Join(ways, "; ")
}

func modelHas(m models.Model, param string) bool {
	for _, p := range m.Params() {
		if p.Name == param {
			return true
		}
	}
	return false
}

// gb formats bytes as GB, with two decimals below 1 GB.
func gb(b float64) string {
	prec := 1
	if b < 1e9 {
		prec = 2
	}
	return strconv.FormatFloat(b/1e9, 'f', prec, 64) + " GB"
}

func secs(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(roundTo(s)).String()
}

func roundTo(s float64) time.Duration {
	switch {
	case s < 1:
		return time.Millisecond
	case s < 60:
		return 100 * time.Millisecond
	}
	return time.Second
}

// runPrograms runs one step's programs in order; when the step has taken
// more than progressAfter, it reports each decoder layer it reaches to
// progress (at most one line a second), so a long step shows it is moving.
func runPrograms(progress io.Writer, exe *runtime.Executable, step string, around func(i int, run func() error) error) error {
	start := time.Now()
	var last time.Time
	layers, lastLayer := 0, -1
	for _, p := range exe.Build.Programs {
		if r := p.Op.Region; r != nil && r.IsLayer() {
			layers = max(layers, r.Index+1)
		}
	}
	for i, p := range exe.Build.Programs {
		if r := p.Op.Region; progress != nil && r != nil && r.IsLayer() && r.Index != lastLayer {
			lastLayer = r.Index
			if now := time.Now(); now.Sub(start) > progressAfter && now.Sub(last) > time.Second {
				last = now
				fmt.Fprintf(progress, "tcc: %s: layer %d/%d (%s)\n", step, r.Index+1, layers, now.Sub(start).Round(100*time.Millisecond))
			}
		}
		run := func() error { return exe.RunProgram(i) }
		if around != nil {
			if err := around(i, run); err != nil {
				return err
			}
			continue
		}
		if err := run(); err != nil {
			return err
		}
	}
	return nil
}

// progressAfter is how long a step runs before runPrograms reports layers.
var progressAfter = 2 * time.Second
